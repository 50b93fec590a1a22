"""Batched sampling: G completions for each of many prompts, with the prompt computed once.

How the work is shared. Each micro-batch of prompts is left-padded and run through the model
once (the "prefill"); its key/value cache and last-position logits are then repeated G times
along the batch axis (``DynamicCache.batch_repeat_interleave``), and the P x G sequences are
decoded together, one token per step. ``model.generate(num_return_sequences=G)`` would instead
repeat the *input ids* G times and prefill every copy: with few-shot prompts of a few hundred
tokens and 64-token answers that prefill is most of the work, so it is done once here. The loop
is written out (rather than calling ``generate``) for that, for the protocol's seeded sampler
(``node.provenance``), and to drop finished sequences from the batch as they stop.

Details:
- left padding, with an attention mask and explicit position ids (``cumsum(mask) - 1``), so a
  prompt gets the same greedy completion alone or beside a longer one;
- a completion stops at EOS or the chat template's end-of-turn token (``stop_token_ids``), or
  after ``max_new_tokens`` (finish reason ``"stop"`` or ``"length"``); it keeps the ids sampled
  (with the stop token) beside its decoded text (without it), so GRPO trains on what was sampled;
- temperature 0 is greedy; otherwise every completion samples with the seeded sampler
  ``swarm.sample/1`` from its own 32-byte seed: position t's token is the pick of the fp32 logits
  with ``u_t`` (``node.provenance.sampler``). A completion's tokens therefore depend only on the
  model, its prompt and its seed, never on the batch it was decoded in (up to float rounding),
  and a verifier can recompute them. A publishing node passes the protocol's seeds
  (``node.provenance.seeds.batch_seeds``); other callers give an integer seed;
- prompts are sorted by length before being cut into micro-batches of at most
  ``max_batch_sequences`` sequences (whole groups: a chunk holds at least one prompt's G), which
  bounds memory and padding; results come back in the caller's order;
- works with a peft model: whichever adapter is active generates. The model is put in eval mode
  for the call (no LoRA dropout) and restored after.
"""

from __future__ import annotations

from collections.abc import Sequence
from dataclasses import dataclass
from typing import Any

import torch
from transformers import DynamicCache, PreTrainedModel, PreTrainedTokenizerBase
from transformers.cache_utils import DynamicLayer

from node import interrupt
from node.learning_data import FinishReason, GeneratedCompletion, GeneratedGroup, Message
from node.policy.adapters import RowAdapters
from node.policy.model import encode_prompts, stop_token_ids
from node.policy.prefill import prefill
from node.provenance.sampler import seeded_pick
from node.provenance.seeds import CompletionSeeds, local_seeds, uniform


@dataclass(frozen=True)
class SamplingConfig:
    """How completions are sampled. Invalid values raise ``ValueError`` when constructed.

    ``max_new_tokens`` has no default here: a node's comes from its configuration
    (``generation.max_new_tokens``), which also sets GRPO's cutoff to it.
    """

    max_new_tokens: int
    temperature: float = 1.0
    """0 means greedy decoding."""
    top_p: float = 1.0
    max_batch_sequences: int = 64
    """Sequences decoded together (prompts per micro-batch x completions per prompt)."""

    def __post_init__(self) -> None:
        if self.max_new_tokens < 1:
            raise ValueError(f"max_new_tokens must be at least 1, got {self.max_new_tokens}")
        if self.temperature < 0:
            raise ValueError(f"temperature must be >= 0 (0 = greedy), got {self.temperature}")
        if not 0 < self.top_p <= 1:
            raise ValueError(f"top_p must be in (0, 1], got {self.top_p}")
        if self.max_batch_sequences < 1:
            raise ValueError(f"max_batch_sequences must be >= 1, got {self.max_batch_sequences}")


def generate(
    model: PreTrainedModel,
    tokenizer: PreTrainedTokenizerBase,
    prompts: Sequence[Sequence[Message]],
    *,
    num_completions: int,
    sampling: SamplingConfig,
    seed: int | None = None,
) -> list[list[GeneratedCompletion]]:
    """``num_completions`` completions for each chat prompt, in the order of ``prompts``.

    ``seed`` (a uint64) makes a call repeat exactly (same model, prompts and settings); ``None``
    draws the seed from torch's global RNG, so a restored RNG state also repeats the call.
    """
    groups = generate_groups(
        model, tokenizer, prompts, num_completions=num_completions, sampling=sampling, seed=seed
    )
    return [list(group.completions) for group in groups]


def generate_groups(
    model: PreTrainedModel,
    tokenizer: PreTrainedTokenizerBase,
    prompts: Sequence[Sequence[Message]],
    *,
    num_completions: int,
    sampling: SamplingConfig,
    seed: int | None = None,
) -> list[GeneratedGroup]:
    """As ``generate``, each prompt's completions kept with the prompt ids the model was fed
    (what GRPO trains on for this node's own groups)."""
    prompt_ids = encode_prompts(tokenizer, prompts)
    completions = generate_from_ids(
        model, tokenizer, prompt_ids, num_completions=num_completions, sampling=sampling, seed=seed
    )
    pairs = zip(prompt_ids, completions, strict=True)
    return [GeneratedGroup(tuple(prompt), tuple(group)) for prompt, group in pairs]


def generate_from_ids(
    model: PreTrainedModel,
    tokenizer: PreTrainedTokenizerBase,
    prompt_ids: Sequence[Sequence[int]],
    *,
    num_completions: int,
    sampling: SamplingConfig,
    seed: int | None = None,
    stop_ids: Sequence[int] | None = None,
) -> list[list[GeneratedCompletion]]:
    """As ``generate``, for prompts already tokenised (e.g. by ``encode_prompts``).

    ``stop_ids`` replaces ``stop_token_ids(tokenizer, model)``; an empty list never stops early.
    """
    if seed is None:
        seed = int(torch.randint(0, 2**62, (1,)).item())
    request = GenerationRequest(prompt_ids, seed)
    (result,) = generate_together(
        model,
        tokenizer,
        [request],
        num_completions=num_completions,
        sampling=sampling,
        stop_ids=stop_ids,
    )
    return result


@dataclass(frozen=True)
class GenerationRequest:
    """One node's share of a batched generation: its prompts, its sampling seeds, its adapter."""

    prompt_ids: Sequence[Sequence[int]]
    seed: int = 0
    """Derives the completions' seeds (``local_seeds``) unless ``completion_seeds`` are given."""
    adapter: str | None = None
    """The adapter its rows go through when ``routing`` is given (None: the base alone)."""
    completion_seeds: CompletionSeeds | None = None
    """Per prompt, one 32-byte seed per completion (a batch's: ``batch_seeds``)."""

    def seeds(self, num_completions: int) -> CompletionSeeds:
        """The seed of every completion, per prompt; ``ValueError`` if the given ones do not fit."""
        if self.completion_seeds is None:
            return local_seeds(self.seed, len(self.prompt_ids), num_completions)
        seeds = self.completion_seeds
        shapes_fit = len(seeds) == len(self.prompt_ids) and all(
            len(row) == num_completions and all(len(s) == 32 for s in row) for row in seeds
        )
        if not shapes_fit:
            raise ValueError(
                f"completion_seeds must hold {num_completions} seeds of 32 bytes for each of "
                f"the {len(self.prompt_ids)} prompts"
            )
        return seeds


def generate_together(
    model: PreTrainedModel,
    tokenizer: PreTrainedTokenizerBase,
    requests: Sequence[GenerationRequest],
    *,
    num_completions: int,
    sampling: SamplingConfig,
    routing: RowAdapters | None = None,
    stop_ids: Sequence[int] | None = None,
) -> list[list[list[GeneratedCompletion]]]:
    """Completions for several requests in shared forward passes: per request, per prompt.

    With ``routing`` (``AdapterPool.rows``) each row goes through its request's adapter;
    without, through whatever adapter is active. Each completion samples from its own seed
    (``GenerationRequest.seeds``), so its draws never depend on another's.
    """
    if num_completions < 1:
        raise ValueError(f"num_completions must be at least 1, got {num_completions}")
    prompts = [(k, list(ids)) for k, request in enumerate(requests) for ids in request.prompt_ids]
    _check_lengths(model, [ids for _, ids in prompts], sampling.max_new_tokens)
    results: list[list[list[GeneratedCompletion]]] = [
        [[] for _ in request.prompt_ids] for request in requests
    ]
    if not prompts:
        return results
    device = next(model.parameters()).device
    if stop_ids is None:
        stop_ids = stop_token_ids(tokenizer, model)
    stops = torch.tensor(list(stop_ids), dtype=torch.long, device=device)  # (S,)
    pad_id = tokenizer.pad_token_id
    if pad_id is None:
        pad_id = tokenizer.eos_token_id if tokenizer.eos_token_id is not None else 0
    seeds = [request.seeds(num_completions) for request in requests]
    slot = [(k, i) for k, request in enumerate(requests) for i in range(len(request.prompt_ids))]

    order = sorted(range(len(prompts)), key=lambda i: len(prompts[i][1]))
    per_chunk = max(1, sampling.max_batch_sequences // num_completions)
    was_training = model.training
    model.eval()
    try:
        with torch.inference_mode():
            for start in range(0, len(order), per_chunk):
                # by request within a chunk: one run of rows per adapter (``RowAdapters``)
                chunk = sorted(order[start : start + per_chunk], key=lambda i: prompts[i][0])
                owners = [prompts[i][0] for i in chunk]
                if routing is not None:
                    routing.set([requests[k].adapter for k in owners])
                rows, logprobs, reasons = _decode_chunk(
                    model,
                    [prompts[i][1] for i in chunk],
                    owners,
                    [seed for i in chunk for seed in seeds[slot[i][0]][slot[i][1]]],
                    sampling,
                    stops,
                    pad_id,
                    routing,
                )
                for offset, index in enumerate(chunk):
                    k, i = slot[index]
                    for g in range(num_completions):
                        row = offset * num_completions + g
                        results[k][i].append(
                            _completion(tokenizer, rows[row], logprobs[row], reasons[row])
                        )
    finally:
        model.train(was_training)
    return results


def _decode_chunk(
    model: PreTrainedModel,
    prompts: list[list[int]],
    owners: list[int],
    row_seeds: list[bytes],
    sampling: SamplingConfig,
    stops: torch.Tensor,
    pad_id: int,
    routing: RowAdapters | None,
) -> tuple[list[list[int]], list[list[float]], list[FinishReason]]:
    """Prefills ``prompts`` once, then decodes their G = len(row_seeds) / len(prompts) sequences
    each together, sequence j sampling from ``row_seeds[j]``; ``owners[i]`` is the request of
    prompt i. Per sequence: its ids, their log-probs under the sampler, and its finish reason."""
    device = stops.device
    width = max(len(p) for p in prompts)
    group = len(row_seeds) // len(prompts)

    # -- prefill: each prompt once, common prefixes once (node.policy.prefill)
    cache = preallocated_cache(model, width + sampling.max_new_tokens)
    start = prefill(model, prompts, pad_id, cache, routing, owners)
    # -- share it: repeat cache, logits, mask and positions G times along the batch
    cache.batch_repeat_interleave(group)
    logits = model.get_output_embeddings()(start.hidden)  # (P, V)
    logits = logits.repeat_interleave(group, dim=0)  # (N, V), N = P * G
    mask = start.mask.repeat_interleave(group, dim=0)  # (N, T)
    next_position = start.next_position.repeat_interleave(group)  # (N,)
    if routing is not None:
        routing.select([row for row in range(len(prompts)) for _ in range(group)])

    count = logits.shape[0]
    tokens_out = torch.full((count, sampling.max_new_tokens), pad_id, dtype=torch.long)  # (N, L)
    logprobs_out = torch.zeros((count, sampling.max_new_tokens), dtype=torch.float32)  # (N, L)
    lengths = torch.full((count,), sampling.max_new_tokens, dtype=torch.long)  # (N,)
    stopped = torch.zeros(count, dtype=torch.bool)  # (N,)
    alive = torch.arange(count)  # (n,) rows of tokens_out still decoding, in cache order

    # -- decode: one token per step for the live sequences; drop those that stopped
    for step in range(sampling.max_new_tokens):
        interrupt.check()  # a Ctrl-C ends generation within one token
        tokens, logprobs = _sample(logits, sampling, [row_seeds[r] for r in alive.tolist()], step)
        tokens_out[alive, step] = tokens.cpu()
        logprobs_out[alive, step] = logprobs.cpu()
        ended = torch.isin(tokens, stops).cpu()  # (n,)
        if ended.any():
            lengths[alive[ended]] = step + 1
            stopped[alive[ended]] = True
            keep = (~ended).nonzero().squeeze(-1)  # (n',)
            if keep.numel() == 0:
                break
            alive = alive[keep]
            keep_device = keep.to(device)
            cache.batch_select_indices(keep_device)
            mask, next_position = mask[keep_device], next_position[keep_device]
            tokens = tokens[keep_device]
            if routing is not None:
                routing.select(keep.tolist())
        if step + 1 == sampling.max_new_tokens:
            break
        mask = torch.cat([mask, mask.new_ones(mask.shape[0], 1)], dim=-1)  # (n, T + step + 1)
        out = model(
            input_ids=tokens[:, None],
            attention_mask=mask,
            position_ids=next_position[:, None],
            cache=cache,
            use_cache=True,
        )
        logits = out.logits[:, -1, :]  # (n, V)
        next_position = next_position + 1

    rows = [tokens_out[i, : lengths[i]].tolist() for i in range(count)]
    logprob_rows = [logprobs_out[i, : lengths[i]].tolist() for i in range(count)]
    reasons: list[FinishReason] = ["stop" if s else "length" for s in stopped.tolist()]
    return rows, logprob_rows, reasons


class _PreallocatedLayer(DynamicLayer):
    """A key/value cache layer written into buffers of the final length: a decode step writes
    its token in place instead of copying the whole cache (``torch.cat``) as ``DynamicLayer``
    does; ``keys``/``values`` are views of the filled part."""

    def __init__(self, capacity: int) -> None:
        super().__init__()
        self.capacity = capacity
        self._buffers: tuple[torch.Tensor, torch.Tensor] | None = None

    def update(
        self, key_states: torch.Tensor, value_states: torch.Tensor, *args: Any, **kwargs: Any
    ) -> tuple[torch.Tensor, torch.Tensor]:
        if not self.is_initialized:
            self.lazy_initialization(key_states, value_states)
        used = self.get_seq_length()
        end = used + key_states.shape[-2]
        if self._buffers is None or end > self._buffers[0].shape[-2]:
            self._buffers = tuple(
                self._grown(old, new, max(end, self.capacity))
                for old, new in ((self.keys, key_states), (self.values, value_states))
            )
        keys, values = self._buffers
        keys[..., used:end, :] = key_states
        values[..., used:end, :] = value_states
        self.keys, self.values = keys[..., :end, :], values[..., :end, :]
        return self.keys, self.values

    @staticmethod
    def _grown(old: torch.Tensor, new: torch.Tensor, length: int) -> torch.Tensor:
        shape = (*new.shape[:-2], length, new.shape[-1])
        buffer = new.new_empty(shape)
        if old.numel():
            buffer[..., : old.shape[-2], :] = old
        return buffer

    def batch_repeat_interleave(self, repeats: int) -> None:
        if self._buffers is not None:
            self._reindex(lambda t: t.repeat_interleave(repeats, dim=0))

    def batch_select_indices(self, indices: torch.Tensor) -> None:
        if self._buffers is not None:
            self._reindex(lambda t: t[indices, ...])

    def _reindex(self, fn: Any) -> None:
        used = self.get_seq_length()
        self._buffers = (fn(self._buffers[0]), fn(self._buffers[1]))
        self.keys, self.values = self._buffers[0][..., :used, :], self._buffers[1][..., :used, :]


def preallocated_cache(model: PreTrainedModel, capacity: int) -> DynamicCache:
    """A ``DynamicCache`` for ``model`` whose full-attention layers hold ``capacity`` positions
    from the start (other kinds of layer, e.g. sliding windows, are left as they are)."""
    cache = DynamicCache(config=model.config)
    cache.layers = [
        _PreallocatedLayer(capacity) if type(layer) is DynamicLayer else layer
        for layer in cache.layers
    ]
    return cache


def _sample(
    logits: torch.Tensor, sampling: SamplingConfig, seeds: list[bytes], position: int
) -> tuple[torch.Tensor, torch.Tensor]:
    """One token per row of ``logits`` (n, V), row j's from ``seeds[j]``'s uniform at
    ``position``: greedy, or the seeded pick (``seeded_pick``, with temperature and top-p); and
    the token's log-prob under the temperature-scaled distribution before top-p (what GRPO's
    log-probs compute; for greedy, temperature 1)."""
    logits = logits.float()
    if sampling.temperature == 0:
        tokens = logits.argmax(dim=-1)
        return tokens, _chosen_logprob(logits, tokens)
    u = torch.tensor([uniform(seed, position) for seed in seeds], dtype=torch.float64)
    return seeded_pick(
        logits, u.to(logits.device), temperature=sampling.temperature, top_p=sampling.top_p
    )


def _chosen_logprob(logits: torch.Tensor, tokens: torch.Tensor) -> torch.Tensor:
    """``log_softmax(logits)[tokens]`` per row (n,)."""
    return logits.gather(-1, tokens[:, None]).squeeze(-1) - logits.logsumexp(-1)


def _completion(
    tokenizer: PreTrainedTokenizerBase,
    token_ids: list[int],
    logprobs: list[float],
    reason: FinishReason,
) -> GeneratedCompletion:
    text_ids = token_ids[:-1] if reason == "stop" else token_ids
    return GeneratedCompletion(
        text=decode_completion(tokenizer, text_ids),
        token_ids=tuple(token_ids),
        finish_reason=reason,
        logprobs=tuple(logprobs),
    )


def decode_completion(tokenizer: PreTrainedTokenizerBase, token_ids: Sequence[int]) -> str:
    """The published text of sampled ids (without the stop token): decoded exactly, special
    tokens kept, no clean-up of spaces."""
    return tokenizer.decode(
        list(token_ids), skip_special_tokens=False, clean_up_tokenization_spaces=False
    )


def _check_lengths(
    model: PreTrainedModel, prompt_ids: Sequence[Sequence[int]], max_new_tokens: int
) -> None:
    limit = getattr(model.config, "max_position_embeddings", None)
    for index, prompt in enumerate(prompt_ids):
        if len(prompt) == 0:
            raise ValueError(f"prompt {index} has no tokens")
        if limit is not None and len(prompt) + max_new_tokens > limit:
            raise ValueError(
                f"prompt {index} has {len(prompt)} tokens; with max_new_tokens={max_new_tokens} "
                f"it passes the model's {limit} positions: shorten the prompt or the answer"
            )

"""The GRPO update: scored groups in, one optimizer step on the node's LoRA adapter out.

Reads top to bottom: groups → advantages → token ids → per-token log-probs → clipped loss →
optimizer step.

**What is trained on.** Each sequence is the prompt's token ids then the completion's; only the
completion's ids are targets. A completion comes in one of two forms (``node.learning_data``):

- **this node's own sample** (``GeneratedCompletion``): the prompt ids exactly as fed to
  generation (the group's ``prompt`` is those ids), then exactly the ids sampled. One that stopped
  (finish reason ``"stop"``) ends with the stop token it sampled (EOS or end-of-turn), so the model
  learns to stop; one cut at ``max_new_tokens`` (``"length"``) has nothing appended. Nothing is
  decoded and re-tokenised: a text has many tokenisations, and the log-probs must be those of the
  sequence the policy actually sampled.
- **a text**: a peer's completion (maybe from another model, with another tokenizer), or this
  node's own after a restart (its batch is reloaded from the store as text). Tokenised once with
  this node's tokenizer, no special tokens added. Its finish reason is unknown, so the rule is by
  length: fewer than ``max_completion_tokens`` tokens is taken as a finished answer and gets the
  end-of-turn token (``end_of_turn_id``) appended; ``max_completion_tokens`` or more is taken as
  cut: its first ``max_completion_tokens`` tokens, nothing appended. Its prompt, given as chat
  messages, is encoded as generation encodes it (``encode_prompts``).

Either form is at most ``max_completion_tokens`` long: a sample longer than that (the sampler's
``max_new_tokens`` is larger) is cut to it, losing its stop token.

The variant, exactly (the SAPO paper's setting: GRPO, no KL, clip 0.2 / 0.28):

- **Advantages** are normalised within each group: ``A_i = (r_i - mean(r)) / (std(r) + eps)``
  with the population standard deviation (``scale_rewards=False`` drops the division, as Dr. GRPO
  does). A group whose rewards are all equal, or that has one completion, has no signal: it is
  dropped before anything is computed (DAPO's dynamic-sampling filter), so its tokens do not
  dilute the others' weight. If every group is dropped the step makes no update and says so.
- **Clipping** is PPO's token-level clipped surrogate with decoupled bounds (DAPO's clip-higher):
  ``-min(ρ A, clip(ρ, 1 - ε_low, 1 + ε_high) A)`` with ``ρ = exp(logp - logp_old)``. With
  ``num_iterations = 1`` the old log-probs are the current ones detached, so ``ρ = 1`` and the
  gradient is the plain policy gradient; with more iterations they are computed once before the
  first and clipping acts in the later ones.
- **KL** is optional: ``β · k3`` with ``k3 = exp(ref - logp) - (ref - logp) - 1`` (Schulman's
  unbiased, non-negative estimator) against the base model, obtained by disabling the adapter
  (no second copy of the model). Default ``β = 0``: the paper used no KL.
- **Averaging** is token-level over the whole batch: the summed per-token loss is divided by the
  number of completion tokens of all groups (DAPO). Every token weighs the same whatever the
  length of its completion, so long wrong answers are not under-penalised as they are by GRPO's
  per-sequence mean; and because the divisor is the batch's token count, splitting the batch
  into micro-batches for memory does not change the gradient.

Log-probs of the chosen tokens are computed from the last hidden states in chunks of rows
(``logsumexp`` minus the chosen logit), each chunk recomputed in the backward pass, so the
full-vocabulary logits of the batch never exist at once. This assumes the logits are the output
layer applied to the last hidden state, as in Llama, Qwen, Mistral and SmolLM; models that
soft-cap or rescale logits (Gemma 2+, Cohere) are refused.
"""

from __future__ import annotations

import functools
import logging
import math
import time
from collections.abc import Callable, Sequence
from dataclasses import dataclass

import torch
from peft import PeftModel
from pydantic import BaseModel, ConfigDict, Field
from torch import Tensor, nn
from torch.utils.checkpoint import checkpoint
from transformers import PreTrainedTokenizerBase

from node import interrupt
from node.learning_data import (
    GeneratedCompletion,
    Prompt,
    ScoredGroup,
    StepMetrics,
    TrainedCompletion,
)
from node.policy.adapters import OptimizerSettings, RowAdapters
from node.policy.attention import training_attention
from node.policy.model import encode_prompts, end_of_turn_id
from node.policy.precision import (
    TrainingPrecision,
    frozen_linear_as,
    frozen_weights_as,
    resolve_precision,
    training_autocast,
)
from node.policy.prompt_sharing import TokenizedGroup, shared_prompt_hidden

log = logging.getLogger(__name__)


class GRPOConfig(BaseModel):
    """Settings of one GRPO update; every field's description is its only help text."""

    model_config = ConfigDict(extra="forbid", frozen=True)

    epsilon_low: float = Field(
        0.2, gt=0, lt=1, description="Lower clip range: the ratio is clipped at 1 - epsilon_low."
    )
    epsilon_high: float = Field(
        0.28, gt=0, description="Upper clip range: the ratio is clipped at 1 + epsilon_high."
    )
    beta: float = Field(
        0.0, ge=0, description="Weight of the k3 KL penalty against the base model; 0 = no KL."
    )
    num_iterations: int = Field(
        1, ge=1, description="Optimizer steps on the same groups; clipping acts from the 2nd."
    )
    scale_rewards: bool = Field(
        True, description="Divide advantages by the group's reward std (False: only centre them)."
    )
    advantage_epsilon: float = Field(
        1e-4, gt=0, description="Added to the group's reward std before dividing by it."
    )
    max_completion_tokens: int = Field(
        ...,
        ge=1,
        description="Completion tokens trained on at most. A peer's text of this many tokens or "
        "more is cut to it and gets no end-of-turn; a shorter one gets one. Set it to the "
        "sampler's max_new_tokens, so own samples are never cut and a peer's answer that was cut "
        "is not taught to end there.",
    )
    micro_batch_size: int = Field(
        16,
        ge=1,
        description="Completions per forward/backward pass and share (whole groups; gradients "
        "are accumulated). Shares trained together pass up to this many per share at once.",
    )
    logprob_chunk_tokens: int = Field(
        256, ge=1, description="Rows of full-vocabulary logits materialised at once."
    )
    max_grad_norm: float = Field(1.0, gt=0, description="Gradients are clipped to this norm.")
    temperature: float = Field(
        1.0, gt=0, description="Sampling temperature: logits are divided by it for log-probs."
    )
    share_prompts: bool = Field(
        True,
        description="Run each group's prompt once for its completions (False: every completion "
        "as a full prompt + completion sequence; same result, ~3x the work at G = 4).",
    )
    precision: TrainingPrecision = Field(
        "auto",
        description="Matrix products of the update: 'auto' (bfloat16 autocast where the CPU has "
        "native bf16: AMX or AVX512-BF16), 'bfloat16' or 'float32'. Sampling is always fp32.",
    )


# ---------------------------------------------------------------- advantages


def group_advantages(rewards: Tensor, *, scale: bool = True, eps: float = 1e-4) -> Tensor:
    """``(r - mean) / (std + eps)`` within one group (population std); zeros if all equal."""
    if rewards.numel() < 2 or bool((rewards == rewards[0]).all()):
        return torch.zeros_like(rewards)
    centred = rewards - rewards.mean()
    return centred / (rewards.std(unbiased=False) + eps) if scale else centred


# ---------------------------------------------------------------- tokenisation


@dataclass(frozen=True)
class TokenizedCompletion:
    """Prompt + completion token ids of one sequence, and the advantage of its completion."""

    input_ids: list[int]
    prompt_length: int
    advantage: float


def prompt_token_ids(prompt: Prompt, tokenizer: PreTrainedTokenizerBase) -> list[int]:
    """Token ids of the prompt, ending where the answer begins (as ``generate`` encodes it)."""
    if isinstance(prompt[0], int):
        return list(prompt)  # type: ignore[arg-type]
    return encode_prompts(tokenizer, [prompt])[0]  # type: ignore[list-item]


def completion_token_ids(
    completion: TrainedCompletion, tokenizer: PreTrainedTokenizerBase, max_tokens: int
) -> list[int]:
    """The ids trained on for one completion (the module docstring's rules): a sample's own ids;
    a text's tokens then the end-of-turn token, or its first ``max_tokens`` tokens and no
    end-of-turn when it has ``max_tokens`` or more (it did not end)."""
    if isinstance(completion, GeneratedCompletion):
        return list(completion.token_ids[:max_tokens])
    ids = tokenizer(completion, add_special_tokens=False)["input_ids"]
    if len(ids) >= max_tokens:
        return ids[:max_tokens]
    return ids + [end_of_turn_id(tokenizer)]


def tokenize_groups(
    groups: Sequence[ScoredGroup],
    advantages: Sequence[Tensor],
    tokenizer: PreTrainedTokenizerBase,
    max_completion_tokens: int,
) -> list[TokenizedCompletion]:
    """One ``TokenizedCompletion`` per completion, group by group."""
    sequences = []
    for group, group_adv in zip(groups, advantages, strict=True):
        tokenized = tokenize_group(group, group_adv, tokenizer, max_completion_tokens)
        prompt = tokenized.prompt_ids
        for completion, advantage in zip(tokenized.completions, tokenized.advantages, strict=True):
            sequences.append(TokenizedCompletion(prompt + completion, len(prompt), advantage))
    return sequences


@dataclass(frozen=True)
class MicroBatch:
    """Right-padded sequences; ``target_mask`` marks the completion tokens being predicted."""

    input_ids: Tensor  # (B, T)
    attention_mask: Tensor  # (B, T)
    target_mask: Tensor  # (B, T-1) True where input_ids[:, 1:] is a completion token
    token_advantages: Tensor  # (N,) one per completion token, N = target_mask.sum()

    @property
    def num_tokens(self) -> int:
        return int(self.target_mask.sum())


def collate(
    sequences: Sequence[TokenizedCompletion], pad_token_id: int, device: torch.device
) -> MicroBatch:
    """Pads on the right; prompt and padding are masked out of the targets."""
    length = max(len(s.input_ids) for s in sequences)
    input_ids = torch.full((len(sequences), length), pad_token_id, dtype=torch.long)  # (B, T)
    attention_mask = torch.zeros((len(sequences), length), dtype=torch.long)  # (B, T)
    completion = torch.zeros((len(sequences), length), dtype=torch.bool)  # (B, T)
    for row, seq in enumerate(sequences):
        n = len(seq.input_ids)
        input_ids[row, :n] = torch.tensor(seq.input_ids)
        attention_mask[row, :n] = 1
        completion[row, seq.prompt_length : n] = True
    target_mask = completion[:, 1:]  # (B, T-1): position t predicts token t+1
    advantages = torch.tensor([s.advantage for s in sequences], dtype=torch.float32)  # (B,)
    token_advantages = advantages[:, None].expand_as(target_mask)[target_mask]  # (N,)
    return MicroBatch(
        input_ids.to(device),
        attention_mask.to(device),
        target_mask.to(device),
        token_advantages.to(device),
    )


# ---------------------------------------------------------------- per-token log-probs


def _chunk_logprobs(
    hidden: Tensor, targets: Tensor, *, lm_head: Callable[[Tensor], Tensor], temperature: float
) -> Tensor:
    logits = lm_head(hidden).float()  # (n, V)
    if temperature != 1.0:  # dividing by 1 would only copy the logits
        logits = logits / temperature
    chosen = logits.gather(-1, targets[:, None]).squeeze(-1)  # (n,)
    return chosen - logits.logsumexp(-1)  # (n,)


def chosen_token_logprobs(
    hidden: Tensor,
    targets: Tensor,
    lm_head: Callable[[Tensor], Tensor],
    *,
    chunk_tokens: int,
    temperature: float = 1.0,
) -> Tensor:
    """``log softmax(lm_head(hidden) / T)[targets]`` for (N, H) rows, ``chunk_tokens`` rows at a time.

    With gradients on, each chunk is recomputed in the backward pass (activation checkpointing), so
    at most one chunk of (chunk_tokens, V) logits is alive at any time.
    """
    fn = functools.partial(_chunk_logprobs, lm_head=lm_head, temperature=temperature)
    out = []
    for start in range(0, hidden.shape[0], chunk_tokens):
        h, t = hidden[start : start + chunk_tokens], targets[start : start + chunk_tokens]
        out.append(
            checkpoint(fn, h, t, use_reentrant=False) if torch.is_grad_enabled() else fn(h, t)
        )
    return torch.cat(out) if out else hidden.new_zeros(0, dtype=torch.float32)  # (N,)


def completion_hidden(model: nn.Module, batch: MicroBatch) -> tuple[Tensor, Tensor]:
    """Hidden states (N, H) predicting the micro-batch's completion tokens, and the tokens (N,)."""
    decoder = model.get_decoder()
    hidden = decoder(input_ids=batch.input_ids, attention_mask=batch.attention_mask)[0]  # (B, T, H)
    return hidden[:, :-1][batch.target_mask], batch.input_ids[:, 1:][batch.target_mask]


def completion_logprobs(
    model: nn.Module, batch: MicroBatch, *, chunk_tokens: int, temperature: float = 1.0
) -> Tensor:
    """Log-probs (N,) of the micro-batch's completion tokens, in order, under ``model``."""
    hidden, targets = completion_hidden(model, batch)
    return chosen_token_logprobs(
        hidden,
        targets,
        model.get_output_embeddings(),
        chunk_tokens=chunk_tokens,
        temperature=temperature,
    )


# ---------------------------------------------------------------- loss


def clipped_surrogate(
    logp: Tensor, old_logp: Tensor, advantages: Tensor, *, eps_low: float, eps_high: float
) -> tuple[Tensor, Tensor]:
    """Per-token loss ``-min(ρA, clip(ρ, 1-ε_low, 1+ε_high)A)`` (N,), and where the clip bit (N,)."""
    ratio = torch.exp(logp - old_logp)  # (N,)
    unclipped = ratio * advantages
    clipped = torch.clamp(ratio, 1 - eps_low, 1 + eps_high) * advantages
    was_clipped = clipped < unclipped  # the min chose the clipped term: no gradient
    return -torch.minimum(unclipped, clipped), was_clipped


def k3_kl(logp: Tensor, ref_logp: Tensor) -> Tensor:
    """Per-token ``exp(ref - logp) - (ref - logp) - 1`` (N,): ≥ 0, unbiased for KL(π ‖ ref)."""
    delta = ref_logp - logp
    return torch.exp(delta) - delta - 1


# ---------------------------------------------------------------- the update


def _check_logits_are_plain(model: nn.Module) -> None:
    """Chunked log-probs apply the output layer alone: refuse models that post-process logits."""
    config = model.config
    for name in ("final_logit_softcapping", "logit_scale"):
        if getattr(config, name, None) not in (None, 1.0):
            raise ValueError(
                f"{type(model).__name__} post-processes its logits ({name}); "
                "node.policy.grpo supports models whose logits are the output layer's"
            )


def trainable_parameters(model: nn.Module) -> list[nn.Parameter]:
    """Parameters with gradients on: the active LoRA adapter (the base is frozen)."""
    return [p for p in model.parameters() if p.requires_grad]


@dataclass
class TrainShare:
    """One node's part of a joint update (``train_together``)."""

    groups: Sequence[ScoredGroup]
    optimizer: torch.optim.Optimizer
    adapter: str | None = None
    """Its adapter's name in the ``routing`` of the joint update."""


@dataclass
class _Prepared:
    """A share's groups with signal, tokenised, and its totals for the current pass."""

    share: TrainShare
    mean_reward: float
    groups: list[TokenizedGroup]
    num_tokens: int
    loss: float = 0.0
    clipped_tokens: int = 0
    kl_sum: float = 0.0
    grad_norm: float = 0.0
    stepped: bool = False

    def begin_pass(self) -> None:
        self.loss, self.clipped_tokens, self.kl_sum = 0.0, 0, 0.0
        self.share.optimizer.zero_grad(set_to_none=True)


@dataclass(frozen=True)
class _Batch:
    """One forward/backward pass: whole groups of one or more shares."""

    owners: list[int]  # share index of each group
    groups: list[TokenizedGroup]
    token_owner: Tensor  # (N,) share index of each completion token
    token_advantages: Tensor  # (N,)


def tokenize_group(
    group: ScoredGroup,
    advantages: Tensor,
    tokenizer: PreTrainedTokenizerBase,
    max_completion_tokens: int,
) -> TokenizedGroup:
    """The group's prompt and completion ids (the module docstring's rules)."""
    return TokenizedGroup(
        prompt_ids=prompt_token_ids(group.prompt, tokenizer),
        completions=[
            completion_token_ids(c, tokenizer, max_completion_tokens) for c in group.completions
        ],
        advantages=advantages.tolist(),
    )


def pack_micro_batches(
    items: Sequence[tuple[int, TokenizedGroup]], max_sequences: int, device: torch.device
) -> list[_Batch]:
    """Whole groups in order, at most ``max_sequences`` completions per pass (a larger group
    goes alone)."""
    batches: list[_Batch] = []
    current: list[tuple[int, TokenizedGroup]] = []

    def close() -> None:
        owners = [owner for owner, _ in current]
        groups = [group for _, group in current]
        lengths = [len(c) for g in groups for c in g.completions]
        per_completion = [(o, a) for o, g in current for a in g.advantages]
        batches.append(
            _Batch(
                owners=owners,
                groups=groups,
                token_owner=torch.tensor(
                    [o for (o, _), n in zip(per_completion, lengths) for _ in range(n)],
                    dtype=torch.long,
                    device=device,
                ),
                token_advantages=torch.tensor(
                    [a for (_, a), n in zip(per_completion, lengths) for _ in range(n)],
                    dtype=torch.float32,
                    device=device,
                ),
            )
        )
        current.clear()

    for item in items:
        size = sum(len(g.completions) for _, g in current)
        if current and size + len(item[1].completions) > max_sequences:
            close()
        current.append(item)
    if current:
        close()
    return batches


def train_together(
    model: PeftModel,
    tokenizer: PreTrainedTokenizerBase,
    config: GRPOConfig,
    shares: Sequence[TrainShare],
    *,
    routing: RowAdapters | None = None,
) -> list[StepMetrics]:
    """One GRPO update for each share, in shared forward and backward passes.

    With ``routing`` (``AdapterPool.rows(..., trainable=True)``) each share's rows go through its
    own adapter; without it there must be one share, trained through the active adapter. The
    loss is the sum of the shares' losses, each divided by its own token count; their
    parameters are disjoint, so each share's gradient, clipping and optimizer step are what they
    would be alone (a test checks it).
    """
    if routing is None and len(shares) != 1:
        raise ValueError("several shares train together only with a routing of their adapters")
    if routing is not None and any(share.adapter is None for share in shares):
        raise ValueError("with a routing, every share names its adapter")
    _check_logits_are_plain(model)
    started = time.perf_counter()
    prepared = [_prepare(share, tokenizer, config) for share in shares]
    items = [(k, g) for k, p in enumerate(prepared) for g in p.groups]
    if not items:
        log.info("GRPO step skipped: no group has distinct rewards")
        return [_skipped(p.mean_reward, started) for p in prepared]
    device = next(model.parameters()).device
    # each share with signal brings its own budget of micro_batch_size completions per pass (one
    # share's budget would cut the joint update into as many small, slower passes as shares)
    with_signal = sum(1 for p in prepared if p.groups)
    batches = pack_micro_batches(items, config.micro_batch_size * with_signal, device)
    forward = _Forward(model, tokenizer, config, routing, [s.adapter for s in shares], device)

    # eager attention on the CPU: torch's fused one took ~6 ms per backward call for these short
    # sequences, eager about a quarter of the step's time less
    with training_attention(model, device):
        return _update(model, config, prepared, batches, forward, started)


def _update(
    model: PeftModel,
    config: GRPOConfig,
    prepared: list[_Prepared],
    batches: list[_Batch],
    forward: _Forward,
    started: float,
) -> list[StepMetrics]:
    # --- fixed log-probs: old policy (for clipping in later iterations), base model (for KL)
    was_training = model.training
    model.eval()
    with torch.no_grad(), frozen_weights_as(forward.autocast, model):
        old_logps = [forward(b) for b in batches] if config.num_iterations > 1 else None
        ref_logps = [forward(b, reference=True) for b in batches] if config.beta > 0 else None

    # --- iterations: accumulate micro-batch gradients, clip each share's, step each share
    model.train()
    try:
        with frozen_weights_as(forward.autocast, model):
            for _ in range(config.num_iterations):
                _iteration(forward, config, prepared, batches, old_logps, ref_logps)
    finally:
        model.train(was_training)
    return [_metrics(p, ref_logps is not None, started) for p in prepared]


class _Forward:
    """Per-token log-probs of a micro-batch under the routed adapters (or the base)."""

    def __init__(
        self,
        model: PeftModel,
        tokenizer: PreTrainedTokenizerBase,
        config: GRPOConfig,
        routing: RowAdapters | None,
        adapters: list[str | None],
        device: torch.device,
    ) -> None:
        self.model, self.config, self.routing, self.adapters = model, config, routing, adapters
        self.pad_id = tokenizer.pad_token_id
        self.autocast = resolve_precision(config.precision, device)
        self.device = device

    def __call__(self, batch: _Batch, *, reference: bool = False) -> Tensor:
        adapters = [None if reference else self.adapters[o] for o in batch.owners]
        with training_autocast(self.autocast, self.device):
            if reference and self.routing is None:
                with self.model.disable_adapter():  # the base model, no second copy
                    hidden, targets = self._hidden(batch.groups, adapters)
            else:
                hidden, targets = self._hidden(batch.groups, adapters)
            return chosen_token_logprobs(
                hidden,
                targets,
                frozen_linear_as(self.autocast, self.model.get_output_embeddings()),
                chunk_tokens=self.config.logprob_chunk_tokens,
                temperature=self.config.temperature,
            )

    def _hidden(
        self, groups: list[TokenizedGroup], adapters: list[str | None]
    ) -> tuple[Tensor, Tensor]:
        if self.config.share_prompts:
            return shared_prompt_hidden(
                self.model, groups, self.pad_id, adapters=adapters, routing=self.routing
            )
        sequences = [
            TokenizedCompletion(g.prompt_ids + c, len(g.prompt_ids), a)
            for g in groups
            for c, a in zip(g.completions, g.advantages, strict=True)
        ]
        if self.routing is not None:
            self.routing.set([a for g, a in zip(groups, adapters) for _ in g.completions])
        return completion_hidden(self.model, collate(sequences, self.pad_id, self.device))


def _prepare(
    share: TrainShare, tokenizer: PreTrainedTokenizerBase, config: GRPOConfig
) -> _Prepared:
    """Advantages within each group; groups without signal dropped; the rest tokenised."""
    rewards = [r for g in share.groups for r in g.rewards]
    groups = []
    for group in share.groups:
        advantages = group_advantages(
            torch.tensor(group.rewards, dtype=torch.float32),
            scale=config.scale_rewards,
            eps=config.advantage_epsilon,
        )
        if bool(advantages.any()):
            groups.append(
                tokenize_group(group, advantages, tokenizer, config.max_completion_tokens)
            )
    return _Prepared(
        share=share,
        mean_reward=sum(rewards) / len(rewards) if rewards else 0.0,
        groups=groups,
        num_tokens=sum(g.num_tokens for g in groups),
    )


def _iteration(
    forward: _Forward,
    config: GRPOConfig,
    prepared: list[_Prepared],
    batches: list[_Batch],
    old_logps: list[Tensor] | None,
    ref_logps: list[Tensor] | None,
) -> None:
    """One pass over the micro-batches, then one optimizer step per share."""
    active = [p for p in prepared if p.groups]
    for p in active:
        p.begin_pass()
    divisors = torch.tensor([max(p.num_tokens, 1) for p in prepared], dtype=torch.float32)
    for i, batch in enumerate(batches):
        interrupt.check()  # a Ctrl-C ends the update before its optimizer step
        logp = forward(batch)  # (N,)
        old_logp = old_logps[i] if old_logps is not None else logp.detach()
        per_token, was_clipped = clipped_surrogate(
            logp,
            old_logp,
            batch.token_advantages,
            eps_low=config.epsilon_low,
            eps_high=config.epsilon_high,
        )
        owner, count = batch.token_owner, len(prepared)
        kl_sums = [0.0] * count
        if ref_logps is not None:
            kl = k3_kl(logp, ref_logps[i])  # (N,)
            per_token = per_token + config.beta * kl
            kl_sums = _per_share(count, owner, kl)
        per_token = per_token / divisors.to(per_token.device)[owner]  # token mean per share
        per_token.sum().backward()
        losses = _per_share(count, owner, per_token)
        clipped = _per_share(count, owner, was_clipped.float())
        for p, loss, clips, kl_sum in zip(prepared, losses, clipped, kl_sums, strict=True):
            p.loss += loss
            p.clipped_tokens += round(clips)
            p.kl_sum += kl_sum
    for p in active:
        _optimizer_step(p, config.max_grad_norm)


def _per_share(count: int, owner: Tensor, values: Tensor) -> list[float]:
    """Sums of ``values`` (N,) by share (``owner``, N,): one per share."""
    sums = torch.zeros(count, dtype=torch.float64)
    return sums.index_add_(0, owner.cpu(), values.detach().double().cpu()).tolist()


def _optimizer_step(p: _Prepared, max_grad_norm: float) -> None:
    """Clips the share's gradient to ``max_grad_norm`` and steps its optimizer."""
    params = [x for group in p.share.optimizer.param_groups for x in group["params"]]
    p.grad_norm = float(torch.nn.utils.clip_grad_norm_(params, max_grad_norm))
    if not math.isfinite(p.grad_norm):
        log.warning("GRPO optimizer step skipped: the gradient norm is %s", p.grad_norm)
        p.share.optimizer.zero_grad(set_to_none=True)
        return
    p.share.optimizer.step()
    p.stepped = True


def _metrics(p: _Prepared, with_kl: bool, started: float) -> StepMetrics:
    if not p.groups:
        return _skipped(p.mean_reward, started)
    return StepMetrics(
        loss=p.loss,
        mean_reward=p.mean_reward,
        clip_fraction=p.clipped_tokens / p.num_tokens,
        kl=p.kl_sum / p.num_tokens if with_kl else None,
        grad_norm=p.grad_norm,
        num_tokens=p.num_tokens,
        num_sequences=sum(len(g.completions) for g in p.groups),
        num_groups=len(p.groups),
        skipped=not p.stepped,
        seconds=time.perf_counter() - started,
    )


def _skipped(mean_reward: float, started: float) -> StepMetrics:
    return StepMetrics(
        loss=0.0,
        mean_reward=mean_reward,
        clip_fraction=0.0,
        kl=None,
        grad_norm=0.0,
        num_tokens=0,
        num_sequences=0,
        num_groups=0,
        skipped=True,
        seconds=time.perf_counter() - started,
    )


class GRPOTrainer:
    """One node's GRPO update on its LoRA adapter: ``step(groups) -> StepMetrics``.

    ``model`` is a peft model whose active adapter is the node's (``AdapterPool.activate``);
    ``optimizer`` holds that adapter's parameters (``AdapterPool.optimizer``), or is built as
    AdamW with ``OptimizerSettings()`` over the model's trainable parameters.
    """

    def __init__(
        self,
        model: PeftModel,
        tokenizer: PreTrainedTokenizerBase,
        config: GRPOConfig,
        optimizer: torch.optim.Optimizer | None = None,
    ) -> None:
        self.model = model
        self.tokenizer = tokenizer
        self.config = config
        _check_logits_are_plain(model)
        params = trainable_parameters(model)
        if not params:
            raise ValueError(
                "the model has no trainable parameters: add and activate a LoRA adapter"
            )
        if optimizer is None:
            settings = OptimizerSettings()
            optimizer = torch.optim.AdamW(
                params,
                lr=settings.lr,
                betas=settings.betas,
                weight_decay=settings.weight_decay,
                eps=settings.eps,
            )
        self.optimizer = optimizer

    def step(self, groups: Sequence[ScoredGroup]) -> StepMetrics:
        """One update (``num_iterations`` optimizer steps) on the given groups."""
        share = TrainShare(groups, self.optimizer)
        (metrics,) = train_together(self.model, self.tokenizer, self.config, [share])
        return metrics

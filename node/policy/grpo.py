"""The GRPO update: scored groups in, one optimizer step on the node's LoRA adapter out.

Reads top to bottom: groups → advantages → token ids → per-token log-probs → clipped loss →
optimizer step.

**What is trained on.** Each sequence is the prompt's token ids then the completion's; only the
completion's ids are targets. A completion comes in one of two forms (``node.learning_data``):

- **sampled ids** (``GeneratedCompletion``): this node's own sample, or a peer's whose batch
  carries ids of this node's tokenizer that agree with its text (``node.policy.peer_ids``).
  Exactly the ids sampled: one that stopped (finish reason ``"stop"``) ends with the stop token
  it sampled (EOS or end-of-turn), so the model learns to stop; one cut at ``max_new_tokens``
  (``"length"``) has nothing appended. Nothing is decoded and re-tokenised: a text has many
  tokenisations, and the log-probs must be those of the sequence actually sampled. An own
  sample's prompt is given as the ids fed to generation.
- **a text and its finish reason** (``TextCompletion``): a peer's completion from another
  tokenizer or without ids. Tokenised once with this node's tokenizer, no special tokens added;
  one that stopped gets the end-of-turn token (``end_of_turn_id``) appended, one that was cut
  gets nothing. The finish reason comes from the batch: nothing is guessed from a length. Its
  prompt, given as chat messages, is encoded as generation encodes it (``encode_prompts``).

Either form is at most ``max_completion_tokens`` long: a longer one (a peer's sampler allowed
more, or this node's tokenizer splits the text finer) is cut to it, losing its stop token.

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
- **Peers' groups** (``origin="peer"``) can weigh less; all off by default (peers' groups then
  train exactly as own ones). Each rule scales a peer's token's surrogate term (not the KL term);
  own tokens weigh 1 (``node.policy.peer_weights`` has the numbers):

  - ``peer_weight`` multiplies a peer's group's advantages;
  - ``peer_advantage="positive"``: a peer's completion with advantage <= 0 weighs 0 (advantages
    are still computed over the whole group);
  - ``peer_importance``: each token of a peer's completion whose sender log-probs are known
    (``GeneratedCompletion.logprobs``) weighs ``w = exp(logp_old - logp_sender)``, detached
    (``logp_old``: this policy before the step), ``min(w, cap)`` under ``"truncate"`` (TIS), ``w``
    if ``1/cap <= w <= cap`` else 0 under ``"mask"`` (MIS); other tokens weigh 1;
  - ``peer_logprob_gap``: each group's mean per-token log-prob under the policy before the
    step; a peer's group more than ``gap`` nats below the reference (the mean over the share's
    own groups with signal; without one, over the own groups' sampler log-probs; without those,
    no group is dropped) is removed. With one iteration and no dropout the rule reads the
    update's own passes (a share's own groups go first, so each peer's group is judged against
    all of them) and a dropped group's tokens leave the loss; otherwise a no-grad pass before
    the update judges and the dropped groups are removed before micro-batching;
  - ``peers_only_steps=False``: a share whose groups with signal are all peers' makes no update.

  A token weighted 0 still counts in the divisor; a dropped group's tokens do not (nor does it
  count anywhere else). The metrics give the step's ``kind``, the log-prob gap between own and
  peers' completions trained on, the Kish ESS of the peers' token weights and the groups dropped.

Log-probs of the chosen tokens are computed from the last hidden states in chunks of rows
(``logsumexp`` minus the chosen logit), each chunk's logits recomputed in the backward pass
from its hidden states and log-normalisers (``_ChunkLogprobs``), so the full-vocabulary logits of
the batch never exist at once. This assumes the logits are the output
layer applied to the last hidden state, as in Llama, Qwen, Mistral and SmolLM; models that
soft-cap or rescale logits (Gemma 2+, Cohere) are refused.
"""

from __future__ import annotations

import functools
import itertools
import logging
import math
import time
from collections.abc import Callable, Sequence
from dataclasses import dataclass, field

import torch
from peft import PeftModel
from pydantic import BaseModel, ConfigDict, Field
from torch import Tensor, nn
from torch.utils.checkpoint import checkpoint
from transformers import PreTrainedTokenizerBase

from node import defaults, interrupt
from node.learning_data import (
    GeneratedCompletion,
    Origin,
    Prompt,
    ScoredGroup,
    StepKind,
    StepMetrics,
    TextCompletion,
    TrainedCompletion,
)
from node.policy.adapters import OptimizerSettings, RowAdapters
from node.policy.attention import training_attention
from node.policy.model import encode_prompts, end_of_turn_id
from node.policy.peer_weights import (
    PeerAdvantage,
    PeerImportance,
    completion_weights,
    ess_fraction,
    importance_weights,
    too_unlikely,
)
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
        description="Completion tokens trained on at most; a longer completion is cut to it "
        "(losing its stop token). Set it to the sampler's max_new_tokens, so own samples are "
        "never cut.",
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
        "native bf16, AMX or AVX512-BF16, and it measures faster than fp32), 'bfloat16' or "
        "'float32'. Sampling is always fp32.",
    )
    peer_weight: float = Field(
        1.0, gt=0, le=1, description="Peers' groups' advantages are multiplied by it (own: 1)."
    )
    peers_only_steps: bool = Field(
        defaults.PEERS_ONLY_STEPS,
        description="Step when every group with signal is a peer's (False: no update then).",
    )
    peer_logprob_gap: float | None = Field(
        defaults.PEER_LOGPROB_GAP,
        gt=0,
        description="Drop a peer's group whose mean token log-prob is this many nats below the "
        "own completions' (None: keep all).",
    )
    peer_importance: PeerImportance = Field(
        defaults.PEER_IMPORTANCE,
        description="Peers' token weights exp(logp - sender logp): 'none', 'truncate' (at the "
        "cap) or 'mask' (0 outside [1/cap, cap]).",
    )
    peer_importance_cap: float = Field(
        2.0, gt=1, description="The cap of peer_importance ('truncate' and 'mask')."
    )
    peer_advantage: PeerAdvantage = Field(
        "all",
        description="Peers' completions trained on: 'all', or 'positive' (advantage > 0 only).",
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
    """The ids trained on for one completion (the module docstring's rules), at most
    ``max_tokens``: sampled ids as they are; a text's tokens, then end-of-turn if it stopped."""
    if isinstance(completion, GeneratedCompletion):
        return list(completion.token_ids[:max_tokens])
    if not isinstance(completion, TextCompletion):
        raise TypeError(f"a completion is sampled ids or a TextCompletion, not {completion!r}")
    ids = tokenizer(completion.text, add_special_tokens=False)["input_ids"]
    if completion.finish_reason == "stop":
        ids = ids + [end_of_turn_id(tokenizer)]
    return ids[:max_tokens]


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
    chosen, normaliser = _chosen_and_normaliser(hidden, targets, lm_head, temperature)
    return chosen - normaliser  # (n,)


def _chosen_and_normaliser(
    hidden: Tensor, targets: Tensor, lm_head: Callable[[Tensor], Tensor], temperature: float
) -> tuple[Tensor, Tensor]:
    """The chosen tokens' logits (n,) and ``logsumexp`` of all (n,), divided by ``temperature``."""
    logits = lm_head(hidden).float()  # (n, V)
    if temperature != 1.0:  # dividing by 1 would only copy the logits
        logits = logits / temperature
    return logits.gather(-1, targets[:, None]).squeeze(-1), logits.logsumexp(-1)


class _ChunkLogprobs(torch.autograd.Function):
    """``_chunk_logprobs`` for a frozen ``lm_head``, keeping only the chunk's hidden states and
    log-normalisers: the backward recomputes the logits and turns them into the softmax with
    one subtraction and one exp, where recomputing the whole forward under autograd (activation
    checkpointing) also took the max, the sum and the log again, and its gradient a zeroed
    (n, V) tensor for the gather and another to add it to. Runs under the forward's autocast."""

    @staticmethod
    @torch.amp.custom_fwd(device_type="cpu")
    def forward(  # type: ignore[override]
        ctx: torch.autograd.function.FunctionCtx,
        hidden: Tensor,
        targets: Tensor,
        lm_head: Callable[[Tensor], Tensor],
        temperature: float,
    ) -> Tensor:
        chosen, normaliser = _chosen_and_normaliser(hidden, targets, lm_head, temperature)
        ctx.save_for_backward(hidden, targets, normaliser)
        ctx.lm_head, ctx.temperature = lm_head, temperature  # type: ignore[attr-defined]
        return chosen - normaliser  # (n,)

    @staticmethod
    @torch.amp.custom_bwd(device_type="cpu")
    def backward(  # type: ignore[override]
        ctx: torch.autograd.function.FunctionCtx, grad: Tensor
    ) -> tuple[Tensor, None, None, None]:
        hidden, targets, normaliser = ctx.saved_tensors  # type: ignore[attr-defined]
        lm_head, temperature = ctx.lm_head, ctx.temperature  # type: ignore[attr-defined]
        with torch.enable_grad():
            inputs = hidden.detach().requires_grad_(True)
            logits = lm_head(inputs)  # (n, V)
        # d/dz_j of (z_t - logsumexp z), z = logits / T: ([j = t] - softmax_j) / T
        scaled = logits.detach().float()
        if temperature != 1.0:
            scaled = scaled / temperature
        weight = (grad / temperature)[:, None]  # (n, 1)
        softmax_grad = torch.sub(scaled, normaliser[:, None]).exp_().mul_(-weight)
        softmax_grad.scatter_add_(-1, targets[:, None], weight)
        (hidden_grad,) = torch.autograd.grad(logits, inputs, softmax_grad.to(logits.dtype))
        return hidden_grad, None, None, None


def _frozen(lm_head: Callable[[Tensor], Tensor]) -> bool:
    """Whether ``lm_head`` has no weight to train (a function, or a module without one)."""
    return not isinstance(lm_head, nn.Module) or not any(
        p.requires_grad for p in lm_head.parameters()
    )


def chosen_token_logprobs(
    hidden: Tensor,
    targets: Tensor,
    lm_head: Callable[[Tensor], Tensor],
    *,
    chunk_tokens: int,
    temperature: float = 1.0,
) -> Tensor:
    """``log softmax(lm_head(hidden) / T)[targets]`` for (N, H) rows, ``chunk_tokens`` rows at a time.

    With gradients on, each chunk's logits are recomputed in the backward pass (by
    ``_ChunkLogprobs`` for a frozen head, by activation checkpointing for one that trains), so at
    most one chunk of (chunk_tokens, V) logits is alive at any time.
    """
    fn = functools.partial(_chunk_logprobs, lm_head=lm_head, temperature=temperature)
    out = []
    for start in range(0, hidden.shape[0], chunk_tokens):
        h, t = hidden[start : start + chunk_tokens], targets[start : start + chunk_tokens]
        if not torch.is_grad_enabled():
            out.append(fn(h, t))
        elif _frozen(lm_head):
            out.append(_ChunkLogprobs.apply(h, t, lm_head, temperature))
        else:  # a head that trains: its weight's gradient comes from autograd
            out.append(checkpoint(fn, h, t, use_reentrant=False))
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


@dataclass(frozen=True)
class _TrainGroup:
    """A group with signal as trained on: its ids and advantages, whose it is, and each
    completion's fixed weight and sender log-probs (known ones of a peer's; else None)."""

    tokens: TokenizedGroup
    origin: Origin
    weights: list[float]
    sender_logprobs: list[list[float] | None]

    @property
    def peer(self) -> bool:
        return self.origin == "peer"


#: Columns of ``_Prepared.totals``: own log-prob sum and tokens, peers' log-prob sum and tokens,
#: sums of peers' token weights and of their squares.
_TOTALS = 6


@dataclass
class _Prepared:
    """A share's groups with signal, tokenised, and its totals for the current pass."""

    share: TrainShare
    mean_reward: float
    groups: list[_TrainGroup]
    sampler_reference: float | None = None  # the gap rule's fallback reference (docstring)
    peer_groups_dropped: int = 0
    loss: float = 0.0
    clipped_tokens: int = 0
    kl_sum: float = 0.0
    totals: Tensor = field(default_factory=lambda: torch.zeros(_TOTALS, dtype=torch.float64))
    grad_norm: float = 0.0
    stepped: bool = False

    @property
    def num_tokens(self) -> int:
        return sum(g.tokens.num_tokens for g in self.groups)

    def begin_pass(self) -> None:
        self.loss, self.clipped_tokens, self.kl_sum = 0.0, 0, 0.0
        self.totals = torch.zeros(_TOTALS, dtype=torch.float64)
        self.share.optimizer.zero_grad(set_to_none=True)


@dataclass(frozen=True)
class _Batch:
    """One forward/backward pass: whole groups of one or more shares."""

    items: list[tuple[int, _TrainGroup]]  # (share index, group) of each group, in order
    token_owner: Tensor  # (N,) share index of each completion token
    token_advantages: Tensor  # (N,)
    token_peer: Tensor  # (N,) bool: the token is a peer's completion's
    token_weight: Tensor  # (N,) fixed weight: 1 own; a peer's peer_weight (x positive mask)
    sender_logp: Tensor  # (N,) a peer's sampler log-prob of the token; NaN where unknown
    has_peers: bool

    @property
    def owners(self) -> list[int]:
        return [owner for owner, _ in self.items]

    @property
    def groups(self) -> list[TokenizedGroup]:
        return [group.tokens for _, group in self.items]


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
    items: Sequence[tuple[int, _TrainGroup]], max_sequences: int, device: torch.device
) -> list[_Batch]:
    """Whole groups in order, at most ``max_sequences`` completions per pass (a larger group
    goes alone)."""
    batches: list[_Batch] = []
    current: list[tuple[int, _TrainGroup]] = []
    for item in items:
        size = sum(len(g.tokens.completions) for _, g in current)
        if current and size + len(item[1].tokens.completions) > max_sequences:
            batches.append(_batch(current, device))
            current = []
        current.append(item)
    if current:
        batches.append(_batch(current, device))
    return batches


def _batch(items: list[tuple[int, _TrainGroup]], device: torch.device) -> _Batch:
    """One pass of whole groups, with the owner, advantage and weights of each token."""
    rows = [
        (owner, ids, advantage, group.peer, weight, sender)
        for owner, group in items
        for ids, advantage, weight, sender in zip(
            group.tokens.completions,
            group.tokens.advantages,
            group.weights,
            group.sender_logprobs,
            strict=True,
        )
    ]

    def per_token(column: int, dtype: torch.dtype) -> Tensor:
        return torch.tensor([r[column] for r in rows for _ in r[1]], dtype=dtype, device=device)

    sender = [x for r in rows for x in (r[5] if r[5] is not None else [math.nan] * len(r[1]))]
    return _Batch(
        items=items,
        token_owner=per_token(0, torch.long),
        token_advantages=per_token(2, torch.float32),
        token_peer=per_token(3, torch.bool),
        token_weight=per_token(4, torch.float32),
        sender_logp=torch.tensor(sender, dtype=torch.float32, device=device),
        has_peers=any(group.peer for _, group in items),
    )


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
    device = next(model.parameters()).device
    forward = _Forward(model, tokenizer, config, routing, [s.adapter for s in shares], device)

    # eager attention on the CPU: torch's fused one took ~6 ms per backward call for these short
    # sequences, eager about a quarter of the step's time less
    with training_attention(model, device):
        gap = _GapRule(config, prepared) if config.peer_logprob_gap is not None else None
        if gap is not None and not _gap_rule_in_update(model, config):
            _judge_in_own_passes(model, forward, config, gap)
            gap = None
        batches = _micro_batches(prepared, config, device)
        if not batches:
            return _skip_all(prepared, started)
        return _update(model, config, prepared, batches, forward, started, gap)


def _micro_batches(
    prepared: list[_Prepared], config: GRPOConfig, device: torch.device
) -> list[_Batch]:
    """The shares' groups with signal in passes (none if no group has signal)."""
    items = [(k, g) for k, p in enumerate(prepared) for g in p.groups]
    # each share with signal brings its own budget of micro_batch_size completions per pass
    # (one share's budget would cut the joint update into as many small passes as shares)
    with_signal = sum(1 for p in prepared if p.groups)
    return pack_micro_batches(items, config.micro_batch_size * with_signal, device)


def _skip_all(prepared: list[_Prepared], started: float) -> list[StepMetrics]:
    log.info("GRPO step skipped: no group left to train on (none with signal, or all dropped)")
    return [_skipped(p.mean_reward, started, p.peer_groups_dropped) for p in prepared]


def _update(
    model: PeftModel,
    config: GRPOConfig,
    prepared: list[_Prepared],
    batches: list[_Batch],
    forward: _Forward,
    started: float,
    gap: _GapRule | None,
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
                _iteration(forward, config, prepared, batches, old_logps, ref_logps, gap)
    finally:
        model.train(was_training)
    if not any(p.groups for p in prepared):
        return _skip_all(prepared, started)
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
    """Advantages within each group; groups without signal dropped; the rest tokenised, with
    their weights; none kept if all are peers' and ``peers_only_steps`` is off."""
    rewards = [r for g in share.groups for r in g.rewards]
    groups = []
    for group in share.groups:
        advantages = group_advantages(
            torch.tensor(group.rewards, dtype=torch.float32),
            scale=config.scale_rewards,
            eps=config.advantage_epsilon,
        )
        if bool(advantages.any()):
            groups.append(_train_group(group, advantages, tokenizer, config))
    groups.sort(key=lambda g: g.peer)  # own first: the gap rule's reference comes before peers
    if groups and not config.peers_only_steps and all(g.peer for g in groups):
        log.info("GRPO step skipped: every group with signal is a peer's (peers_only_steps off)")
        groups = []
    reference = None
    if config.peer_logprob_gap is not None:
        reference = _sampler_reference(share.groups, config.max_completion_tokens)
    return _Prepared(
        share=share,
        mean_reward=sum(rewards) / len(rewards) if rewards else 0.0,
        groups=groups,
        sampler_reference=reference,
    )


def _train_group(
    group: ScoredGroup,
    advantages: Tensor,
    tokenizer: PreTrainedTokenizerBase,
    config: GRPOConfig,
) -> _TrainGroup:
    tokens = tokenize_group(group, advantages, tokenizer, config.max_completion_tokens)
    peer = group.origin == "peer"
    weights = completion_weights(
        advantages, peer=peer, peer_weight=config.peer_weight, advantage_rule=config.peer_advantage
    )
    senders = [
        _sampler_logprobs(c, len(ids)) if peer else None  # own tokens always weigh 1
        for c, ids in zip(group.completions, tokens.completions, strict=True)
    ]
    return _TrainGroup(tokens, group.origin, weights.tolist(), senders)


def _sampler_logprobs(completion: TrainedCompletion, length: int) -> list[float] | None:
    """The sampler's log-probs of the first ``length`` ids trained on, where known."""
    if not isinstance(completion, GeneratedCompletion) or completion.logprobs is None:
        return None
    logprobs = list(completion.logprobs[:length])
    return logprobs if len(logprobs) == min(length, len(completion.token_ids)) else None


def _sampler_reference(groups: Sequence[ScoredGroup], max_tokens: int) -> float | None:
    """Mean per-token sampler log-prob of the own completions given (signal or not)."""
    values = [
        x
        for g in groups
        if g.origin == "own"
        for c in g.completions
        for x in _sampler_logprobs(c, max_tokens) or []
    ]
    return sum(values) / len(values) if values else None


class _GapRule:
    """The gap rule (module docstring), judged pass by pass: a pass's own groups add to their
    share's reference, then its peers' groups are held to it. Within a share every own group
    comes before its peers' (``_prepare``), so a peer's group is judged against all of them."""

    def __init__(self, config: GRPOConfig, prepared: list[_Prepared]) -> None:
        assert config.peer_logprob_gap is not None
        self.gap, self.prepared = config.peer_logprob_gap, prepared
        self.judged = {k for k, p in enumerate(prepared) if _has_reference(k, p)}
        self.own = {k: [0.0, 0] for k in self.judged}  # own groups' log-prob sum and tokens
        self.dropped: set[int] = set()  # ids of the dropped groups

    def judge(self, batch: _Batch, logp: Tensor) -> list[bool]:
        """Whether each group of the pass is kept, given the pass's token log-probs (N,)."""
        parts = logp.detach().split([g.num_tokens for g in batch.groups])
        sums = [(float(part.double().sum()), part.numel()) for part in parts]
        for (k, group), (total, count) in zip(batch.items, sums, strict=True):
            if k in self.judged and not group.peer:
                self.own[k][0] += total
                self.own[k][1] += count
        kept = []
        for (k, group), (total, count) in zip(batch.items, sums, strict=True):
            reference = self._reference(k) if k in self.judged and group.peer else None
            drop = (
                reference is not None and count and too_unlikely(total / count, reference, self.gap)
            )
            if drop:
                self.dropped.add(id(group))
            kept.append(not drop)
        return kept

    def _reference(self, k: int) -> float | None:
        total, count = self.own[k]
        return total / count if count else self.prepared[k].sampler_reference

    def apply(self) -> None:
        """The dropped groups removed from their shares."""
        for p in self.prepared:
            kept = [g for g in p.groups if id(g) not in self.dropped]
            p.peer_groups_dropped += len(p.groups) - len(kept)
            p.groups = kept


def _gap_rule_in_update(model: nn.Module, config: GRPOConfig) -> bool:
    """Whether the gap rule can judge the update's own passes: one iteration (so they are the
    policy before the step) and no dropout (so a training pass computes what an evaluation
    pass would)."""
    return config.num_iterations == 1 and not _dropout_active(model)


def _dropout_active(model: nn.Module) -> bool:
    if any(isinstance(m, nn.Dropout) and m.p > 0 for m in model.modules()):
        return True
    return any(
        ("dropout" in name or "pdrop" in name) and isinstance(value, float) and value > 0
        for name, value in model.config.to_dict().items()
    )


def _judge_in_own_passes(
    model: PeftModel, forward: _Forward, config: GRPOConfig, gap: _GapRule
) -> None:
    """The gap rule in no-grad passes of its own over the groups it judges, before the update."""
    items = [(k, g) for k, p in enumerate(gap.prepared) if k in gap.judged for g in p.groups]
    if not items:
        return
    batches = pack_micro_batches(items, config.micro_batch_size * len(gap.judged), forward.device)
    was_training = model.training
    model.eval()
    try:
        with torch.no_grad(), frozen_weights_as(forward.autocast, model):
            for batch in batches:
                interrupt.check()
                gap.judge(batch, forward(batch))
    finally:
        model.train(was_training)
    gap.apply()


def _narrowed(batch: _Batch, kept: list[bool]) -> tuple[_Batch, Tensor]:
    """The pass's kept groups as a batch, and the indices of their tokens in the pass."""
    sizes = [g.num_tokens for g in batch.groups]
    starts = itertools.accumulate(sizes, initial=0)
    index = [
        i
        for start, size, keep in zip(starts, sizes, kept)
        if keep
        for i in range(start, start + size)
    ]
    items = [item for item, keep in zip(batch.items, kept, strict=True) if keep]
    device = batch.token_owner.device
    return _batch(items, device), torch.tensor(index, dtype=torch.long, device=device)


def _has_reference(k: int, p: _Prepared) -> bool:
    """Whether share ``k`` has peers' groups and a reference log-prob to hold them to."""
    if not any(g.peer for g in p.groups):
        return False
    if any(not g.peer for g in p.groups) or p.sampler_reference is not None:
        return True
    log.debug("share %d: no own log-probs for the gap rule; its peers' groups are kept", k)
    return False


def _iteration(
    forward: _Forward,
    config: GRPOConfig,
    prepared: list[_Prepared],
    batches: list[_Batch],
    old_logps: list[Tensor] | None,
    ref_logps: list[Tensor] | None,
    gap: _GapRule | None = None,
) -> None:
    """One pass over the micro-batches, then one optimizer step per share. With ``gap`` (one
    iteration only) the gap rule judges each pass's log-probs before its loss: a dropped
    group's tokens leave the loss (its rows still ran), and as the token counts are known only
    at the end, the gradients and losses are divided by them then."""
    active = [p for p in prepared if p.groups]
    for p in active:
        p.begin_pass()
    divisors = None
    if gap is None:
        divisors = torch.tensor([max(p.num_tokens, 1) for p in prepared], dtype=torch.float32)
    for i, batch in enumerate(batches):
        interrupt.check()  # a Ctrl-C ends the update before its optimizer step
        logp = forward(batch)  # (N,)
        ref_logp = ref_logps[i] if ref_logps is not None else None
        if gap is not None:
            assert old_logps is None, "the gap rule judges the update's passes in one iteration"
            kept = gap.judge(batch, logp)
            if not any(kept):
                continue
            if not all(kept):
                batch, index = _narrowed(batch, kept)
                logp = logp[index]
                ref_logp = ref_logp[index] if ref_logp is not None else None
        old_logp = old_logps[i] if old_logps is not None else logp.detach()
        per_token, was_clipped = clipped_surrogate(
            logp,
            old_logp,
            batch.token_advantages,
            eps_low=config.epsilon_low,
            eps_high=config.epsilon_high,
        )
        owner, count = batch.token_owner, len(prepared)
        weights = _token_weights(config, batch, old_logp)  # (N,)
        if batch.has_peers:
            per_token = per_token * weights  # the surrogate's, not the KL's
        totals = _totals(count, batch, old_logp, weights)  # (count, _TOTALS)
        kl_sums = [0.0] * count
        if ref_logp is not None:
            kl = k3_kl(logp, ref_logp)  # (N,)
            per_token = per_token + config.beta * kl
            kl_sums = _per_share(count, owner, kl)
        if divisors is not None:
            per_token = per_token / divisors.to(per_token.device)[owner]  # token mean per share
        per_token.sum().backward()
        losses = _per_share(count, owner, per_token)
        clipped = _per_share(count, owner, was_clipped.float())
        for k, (p, loss, clips) in enumerate(zip(prepared, losses, clipped, strict=True)):
            p.loss += loss
            p.clipped_tokens += round(clips)
            p.kl_sum += kl_sums[k]
            p.totals += totals[k]
    if gap is not None:
        gap.apply()
        for p in active:
            _divide_by_tokens(p)
    for p in active:
        if p.groups:
            _optimizer_step(p, config.max_grad_norm)


def _divide_by_tokens(p: _Prepared) -> None:
    """The share's summed gradient and loss made its token mean."""
    divisor = max(p.num_tokens, 1)
    p.loss /= divisor
    for group in p.share.optimizer.param_groups:
        for param in group["params"]:
            if param.grad is not None:
                param.grad.div_(divisor)


def _token_weights(config: GRPOConfig, batch: _Batch, old_logp: Tensor) -> Tensor:
    """Weight (N,) of each token's surrogate: 1 for own; a peer's fixed weight times its
    importance weight against the sender, under the policy before the step."""
    if not batch.has_peers:
        return torch.ones_like(batch.token_weight)
    importance = importance_weights(
        old_logp, batch.sender_logp, config.peer_importance, config.peer_importance_cap
    )
    return batch.token_weight * importance


def _totals(count: int, batch: _Batch, logp: Tensor, weights: Tensor) -> Tensor:
    """``_TOTALS`` sums (count, _TOTALS) per share of the batch's tokens (``_Prepared.totals``)."""
    peer = batch.token_peer.double()
    own, lp, w = 1 - peer, logp.detach().double(), weights.double() * peer
    columns = torch.stack([own * lp, own, peer * lp, peer, w, w * w], dim=1).cpu()
    sums = torch.zeros(count, _TOTALS, dtype=torch.float64)
    return sums.index_add_(0, batch.token_owner.cpu(), columns)


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
        return _skipped(p.mean_reward, started, p.peer_groups_dropped)
    own_logp, own_tokens, peer_logp, peer_tokens, weight_sum, weight_sq_sum = p.totals.tolist()
    gap = None
    if own_tokens and peer_tokens:
        gap = own_logp / own_tokens - peer_logp / peer_tokens
    return StepMetrics(
        loss=p.loss,
        mean_reward=p.mean_reward,
        clip_fraction=p.clipped_tokens / p.num_tokens,
        kl=p.kl_sum / p.num_tokens if with_kl else None,
        grad_norm=p.grad_norm,
        num_tokens=p.num_tokens,
        num_sequences=sum(len(g.tokens.completions) for g in p.groups),
        num_groups=len(p.groups),
        skipped=not p.stepped,
        seconds=time.perf_counter() - started,
        kind=_kind(p),
        peer_logprob_gap=gap,
        peer_ess=ess_fraction(weight_sum, weight_sq_sum, round(peer_tokens)),
        peer_groups_dropped=p.peer_groups_dropped,
    )


def _kind(p: _Prepared) -> StepKind:
    """Whose groups the share's step trained on; "none" without a step."""
    if not p.stepped:
        return "none"
    own, peers = any(not g.peer for g in p.groups), any(g.peer for g in p.groups)
    return "mixed" if own and peers else "peers" if peers else "own"


def _skipped(mean_reward: float, started: float, peer_groups_dropped: int = 0) -> StepMetrics:
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
        peer_groups_dropped=peer_groups_dropped,
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

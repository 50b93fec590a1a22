"""What the round and the policy hand each other, without torch: generated and scored groups.

The round (chain, store, peers) and the policy (torch, transformers) meet here. This module imports
neither side, so the protocol code can name these types without loading a model library;
``node.policy`` imports it, never the other way round.

A completion reaches the GRPO step in one of two forms:

- a :class:`GeneratedCompletion`: token ids as they were sampled, why the sampler stopped and,
  where known, the sampler's log-prob of each id; this node's own sample, or a peer's whose batch
  carries ids of this node's tokenizer (``node.policy.peer_ids``). Trained on exactly those ids
  (no decode and re-tokenise);
- a :class:`TextCompletion`: a text and why it ended (a peer's with another tokenizer, or without
  ids); tokenised once by the node's tokenizer.

``node.policy.grpo`` says exactly which token ids each form becomes.
"""

from __future__ import annotations

from collections.abc import Mapping, Sequence
from dataclasses import dataclass
from typing import Literal

Message = Mapping[str, str]
"""One chat message: ``{"role": "system" | "user" | "assistant", "content": text}``."""

FinishReason = Literal["stop", "length"]
"""``"stop"``: the sampler drew a stop token (EOS or end-of-turn); ``"length"``: it reached
``max_new_tokens`` first."""


@dataclass(frozen=True)
class GeneratedCompletion:
    """One sampled answer. ``token_ids`` are the sampled ids, ending with the stop token when
    ``finish_reason`` is ``"stop"`` (so training teaches the model to stop); ``text`` is the
    decoded answer without that stop token (what is published and scored). ``logprobs`` are the
    sampler's log-probs of those ids (after temperature, before top-p), where known."""

    text: str
    token_ids: tuple[int, ...]
    finish_reason: FinishReason
    logprobs: tuple[float, ...] | None = None

    def __post_init__(self) -> None:
        _check_finish_reason(self.finish_reason)
        if self.finish_reason == "stop" and not self.token_ids:
            raise ValueError("a completion that stopped has at least its stop token")
        if self.logprobs is not None and len(self.logprobs) != len(self.token_ids):
            raise ValueError(
                f"{len(self.token_ids)} token ids but {len(self.logprobs)} log-probs"
            )


@dataclass(frozen=True)
class TextCompletion:
    """A completion known by its text and why it ended, not by token ids (tokenised by the
    trainer: ``node.policy.grpo`` says how)."""

    text: str
    finish_reason: FinishReason

    def __post_init__(self) -> None:
        _check_finish_reason(self.finish_reason)


def _check_finish_reason(reason: object) -> None:
    if reason not in ("stop", "length"):
        raise ValueError(f"finish_reason must be 'stop' or 'length', got {reason!r}")


@dataclass(frozen=True)
class GeneratedGroup:
    """The completions sampled for one prompt, with the prompt's token ids as fed to the model."""

    prompt_ids: tuple[int, ...]
    completions: tuple[GeneratedCompletion, ...]

    def __post_init__(self) -> None:
        if not self.prompt_ids:
            raise ValueError("a generated group needs the prompt's token ids")

    @property
    def texts(self) -> tuple[str, ...]:
        return tuple(c.text for c in self.completions)


Prompt = Sequence[Message] | Sequence[int]
"""Chat messages, or prompt token ids of this node's tokenizer."""

TrainedCompletion = GeneratedCompletion | TextCompletion
"""Sampled ids (trained on as sampled) or a text (tokenised by the trainer)."""

StepKind = Literal["own", "mixed", "peers", "none"]

Origin = Literal["own", "peer"]
"""Whose group it is: this node's own samples, or a peer's verified group."""


@dataclass(frozen=True)
class ScoredGroup:
    """One prompt with its completions and their rewards (a local or a peer's group)."""

    prompt: Prompt
    completions: Sequence[TrainedCompletion]
    rewards: Sequence[float]
    origin: Origin = "own"

    def __post_init__(self) -> None:
        if len(self.completions) != len(self.rewards):
            raise ValueError(
                f"{len(self.completions)} completions but {len(self.rewards)} rewards: "
                "give one reward per completion"
            )
        if not self.prompt:
            raise ValueError("empty prompt: give chat messages or at least one prompt token id")
        if isinstance(self.prompt, (str, bytes)):
            raise ValueError("the prompt is a list of chat messages or token ids, not a string")
        if self.origin not in ("own", "peer"):
            raise ValueError(f"origin must be 'own' or 'peer', got {self.origin!r}")

    @classmethod
    def generated(cls, group: GeneratedGroup, rewards: Sequence[float]) -> ScoredGroup:
        """This node's own group: trained on the prompt ids and completion ids as sampled."""
        return cls(list(group.prompt_ids), list(group.completions), list(rewards))


@dataclass(frozen=True)
class StepMetrics:
    """What one GRPO step did; loss, clipping, KL and grad norm are its last iteration."""

    loss: float
    mean_reward: float  # over every completion given, kept or dropped
    clip_fraction: float  # completion tokens whose gradient the clip removed
    kl: float | None  # mean k3 against the base model; None when beta is 0 (not computed)
    grad_norm: float  # before clipping
    num_tokens: int  # completion tokens trained on
    num_sequences: int
    num_groups: int  # groups with a learning signal (others dropped)
    skipped: bool  # no optimizer step was made
    seconds: float
    #: which groups the step trained on: "own", "mixed" (own and peers'), "peers" (peers' only)
    #: or "none" (no step)
    kind: StepKind = "none"
    #: mean per-token log-prob of the own completions trained on minus that of the peers'
    #: completions, under the policy before the step (nats; > 0: peers' are less likely); None
    #: without both
    peer_logprob_gap: float | None = None
    #: Kish effective sample size of the peers' token weights as a fraction of their tokens
    #: ((sum w)^2 / (n sum w^2)); 1.0 when every weight is equal, None without peers' tokens
    peer_ess: float | None = None
    peer_groups_dropped: int = 0  # peers' groups with signal that a weighting rule dropped

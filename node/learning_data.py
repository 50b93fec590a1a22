"""What the round and the policy hand each other, without torch: generated and scored groups.

The round (chain, store, peers) and the policy (torch, transformers) meet here. This module imports
neither side, so the protocol code can name these types without loading a model library;
``node.policy`` imports it, never the other way round.

A completion reaches the GRPO step in one of two forms:

- a :class:`GeneratedCompletion`: this node's own sample, as the token ids it sampled and why it
  ended; trained on exactly those ids (no decode and re-tokenise);
- a ``str``: a peer's text (maybe from another model with another tokenizer), or this node's own
  text reloaded from the store after a restart; tokenised once by the node's tokenizer.

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
    decoded answer without that stop token (what is published and scored)."""

    text: str
    token_ids: tuple[int, ...]
    finish_reason: FinishReason

    def __post_init__(self) -> None:
        if self.finish_reason not in ("stop", "length"):
            raise ValueError(
                f"finish_reason must be 'stop' or 'length', got {self.finish_reason!r}"
            )
        if self.finish_reason == "stop" and not self.token_ids:
            raise ValueError("a completion that stopped has at least its stop token")


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

TrainedCompletion = str | GeneratedCompletion
"""A text (tokenised by the trainer) or this node's own sample (trained on as sampled)."""


@dataclass(frozen=True)
class ScoredGroup:
    """One prompt with its completions and their rewards (a local or a peer's group)."""

    prompt: Prompt
    completions: Sequence[TrainedCompletion]
    rewards: Sequence[float]

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

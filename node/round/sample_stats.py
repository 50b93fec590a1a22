"""What a node's own completions of a round say about its policy: cut and format rates, samples.

Read by the round report (``RoundReport.cut_rate``, ``format_rate``, ``samples``), which the
experiment writes to ``rounds.csv`` and ``samples.csv``: a policy that degenerates (rambles to the
token limit, loses the answer format) shows here before its reward says why.
"""

from __future__ import annotations

from collections.abc import Sequence
from dataclasses import dataclass
from typing import Any

from node.learning_data import FinishReason
from node.round.own import OwnRound
from node.tasks.scoring import strict_answer


@dataclass(frozen=True)
class OwnSample:
    """One own completion of a round: its text, why it ended and its reward."""

    text: str
    finish_reason: FinishReason
    reward: float


def own_samples(own: OwnRound) -> tuple[OwnSample, ...]:
    """Every own completion of the round, group by group, in the order they were generated
    (as sampled, or as reloaded from the store after a restart)."""
    completions: Sequence[Sequence[Any]] = (
        [g.completions for g in own.generated] if own.generated is not None else own.reloaded or ()
    )
    return tuple(
        OwnSample(c.text, c.finish_reason, reward)
        for group, rewards in zip(completions, own.rewards, strict=True)
        for c, reward in zip(group, rewards, strict=True)
    )


def cut_rate(samples: Sequence[OwnSample]) -> float | None:
    """Share of completions that reached the token limit (finish reason ``"length"``); None
    without completions."""
    if not samples:
        return None
    return sum(s.finish_reason == "length" for s in samples) / len(samples)


def format_rate(samples: Sequence[OwnSample]) -> float | None:
    """Share of completions in the strict answer format (``strict_answer``: stopped, one
    ``<answer>...</answer>``, nothing after it); None without completions."""
    if not samples:
        return None
    formatted = sum(strict_answer(s.text, s.finish_reason) is not None for s in samples)
    return formatted / len(samples)

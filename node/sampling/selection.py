"""Choosing the J external groups a node trains on, among peers' verified groups.

Groups whose completions all earned the same reward carry no GRPO signal (zero advantage) and are
dropped first. Then a :class:`SelectionStrategy` picks: :class:`UniformSelection` (the paper's
choice, the default) or :class:`VerifiedHistorySelection`, which prefers peers whose past batches
checked out and scored well. Both draw from a caller-supplied ``random.Random`` so runs repeat.
"""

from __future__ import annotations

import math
import random
from collections import defaultdict
from collections.abc import Iterable, Sequence
from dataclasses import dataclass, field
from typing import Protocol

from node.sampling.verdicts import PeerVerdict, VerifiedGroup


def with_advantage(groups: Iterable[VerifiedGroup]) -> list[VerifiedGroup]:
    """The groups with at least two different rewards."""
    return [group for group in groups if group.has_advantage]


class SelectionStrategy(Protocol):
    """Picks up to ``count`` groups from ``candidates`` (all with advantage)."""

    def select(
        self, candidates: Sequence[VerifiedGroup], count: int, rng: random.Random
    ) -> list[VerifiedGroup]: ...


class UniformSelection:
    """Every candidate group equally likely, without replacement."""

    def select(
        self, candidates: Sequence[VerifiedGroup], count: int, rng: random.Random
    ) -> list[VerifiedGroup]:
        return rng.sample(list(candidates), min(count, len(candidates)))


@dataclass
class PeerHistory:
    """Running record of a peer's verified batches (agreement rate and verified reward)."""

    checked: int = 0
    agreed: int = 0
    verified_reward_milli: int = 0

    @property
    def agreement_rate(self) -> float:
        return self.agreed / self.checked if self.checked else 0.0

    @property
    def mean_reward(self) -> float:
        return self.verified_reward_milli / 1000 / self.checked if self.checked else 0.0


@dataclass
class VerifiedHistorySelection:
    """Weights each group by its peer's history: ``agreement_rate ** sharpness * (floor + reward)``.

    A peer with a wrong claim in its history loses weight fast; a peer never seen gets
    ``unknown_weight``. Sampling without replacement by Efraimidis-Spirakis keys ``u ** (1 / w)``.
    """

    sharpness: float = 4.0
    reward_floor: float = 0.1
    unknown_weight: float = 0.5
    history: dict[str, PeerHistory] = field(default_factory=lambda: defaultdict(PeerHistory))

    def record(self, verdicts: Iterable[PeerVerdict]) -> None:
        """Adds a round's attestable verdicts to the history."""
        for verdict in verdicts:
            if verdict.attestable:
                entry = self.history[verdict.peer]
                entry.checked += verdict.checked
                entry.agreed += verdict.agreed
                entry.verified_reward_milli += verdict.verified_reward_milli

    def weight(self, peer: str) -> float:
        entry = self.history.get(peer)
        if entry is None or entry.checked == 0:
            return self.unknown_weight
        return entry.agreement_rate**self.sharpness * (self.reward_floor + entry.mean_reward)

    def select(
        self, candidates: Sequence[VerifiedGroup], count: int, rng: random.Random
    ) -> list[VerifiedGroup]:
        keyed = []
        for group in candidates:
            weight = self.weight(group.peer)
            if weight > 0:
                keyed.append((math.log(1.0 - rng.random()) / weight, group))
        keyed.sort(key=lambda pair: pair[0], reverse=True)
        return [group for _, group in keyed[:count]]


def select_external(
    groups: Iterable[VerifiedGroup],
    count: int,
    rng: random.Random,
    strategy: SelectionStrategy | None = None,
) -> list[VerifiedGroup]:
    """Drops zero-advantage groups, then lets the strategy pick ``count`` of the rest."""
    if count <= 0:
        return []
    candidates = with_advantage(groups)
    return (strategy or UniformSelection()).select(candidates, count, rng)

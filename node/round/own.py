"""This node's own batch of a round: what is published, and what the node trains on from it."""

from __future__ import annotations

import random
from dataclasses import dataclass

from node.policy.grpo import ScoredGroup
from node.rollouts.schema import SignedBatch
from node.tasks import TaskItem, build_messages


@dataclass(frozen=True)
class BatchToPublish:
    """Stored bytes and the numbers ``publishRollouts`` commits."""

    data: bytes
    digest: bytes
    groups: int
    completions: int
    reward_sum: int


@dataclass(frozen=True)
class OwnRound:
    """This node's tasks of a round with its completions and their rewards (for training)."""

    tasks: tuple[TaskItem, ...]
    texts: tuple[tuple[str, ...], ...]
    rewards: tuple[tuple[float, ...], ...]

    @property
    def mean_reward(self) -> float | None:
        flat = [r for group in self.rewards for r in group]
        return sum(flat) / len(flat) if flat else None

    def scored_groups(self) -> list[ScoredGroup]:
        return [
            ScoredGroup(build_messages(task), list(texts), list(rewards))
            for task, texts, rewards in zip(self.tasks, self.texts, self.rewards)
        ]

    @classmethod
    def from_batch(cls, batch: SignedBatch, tasks: list[TaskItem]) -> OwnRound:
        """The groups of a stored batch, with the tasks they answer (by the groups' indexes)."""
        groups = batch.body.groups
        return cls(
            tasks=tuple(tasks[g.task.index] for g in groups),
            texts=tuple(tuple(c.text for c in g.completions) for g in groups),
            rewards=tuple(tuple(c.reward for c in g.completions) for g in groups),
        )


def pick_local(own: OwnRound, count: int, rng: random.Random) -> list[ScoredGroup]:
    """Up to ``count`` of the node's own groups, those with a learning signal first."""
    groups = own.scored_groups()
    with_signal = [g for g in groups if len(set(g.rewards)) > 1]
    rng.shuffle(with_signal)
    return with_signal[:count]

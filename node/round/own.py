"""This node's own batch of a round: what is published, and what the node trains on from it.

Freshly generated, the node trains on its samples' token ids as sampled; reloaded from the store
after a restart, only the published texts exist, and it trains on them as it would on a peer's
(tokenised once, see ``node.policy.grpo``).
"""

from __future__ import annotations

import random
from collections.abc import Sequence
from dataclasses import dataclass

from node.learning_data import GeneratedGroup, ScoredGroup
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
    generated: tuple[GeneratedGroup, ...] | None = None
    """The samples behind ``texts`` (token ids, finish reasons); None when reloaded as text."""

    def __post_init__(self) -> None:
        if self.generated is not None and tuple(g.texts for g in self.generated) != self.texts:
            raise ValueError("the generated groups' texts are not the batch's texts")

    @classmethod
    def from_generated(
        cls,
        tasks: Sequence[TaskItem],
        generated: Sequence[GeneratedGroup],
        rewards: Sequence[Sequence[float]],
    ) -> OwnRound:
        """A freshly sampled round: trained on as sampled."""
        return cls(
            tasks=tuple(tasks),
            texts=tuple(g.texts for g in generated),
            rewards=tuple(tuple(r) for r in rewards),
            generated=tuple(generated),
        )

    @property
    def mean_reward(self) -> float | None:
        flat = [r for group in self.rewards for r in group]
        return sum(flat) / len(flat) if flat else None

    def scored_groups(self) -> list[ScoredGroup]:
        """Each group for training: the samples' ids when known, else the texts."""
        if self.generated is not None:
            return [
                ScoredGroup.generated(group, rewards)
                for group, rewards in zip(self.generated, self.rewards, strict=True)
            ]
        return [
            ScoredGroup(build_messages(task), list(texts), list(rewards))
            for task, texts, rewards in zip(self.tasks, self.texts, self.rewards, strict=True)
        ]

    @classmethod
    def from_batch(cls, batch: SignedBatch, tasks: list[TaskItem]) -> OwnRound:
        """The groups of a stored batch, with the tasks they answer (by the groups' indexes);
        texts only, so they are trained on like a peer's."""
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

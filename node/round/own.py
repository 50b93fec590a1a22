"""This node's own batch of a round: what is published, and what the node trains on from it.

Freshly generated, the node trains on its samples' token ids as sampled; reloaded from the store
after a restart, it trains on the batch as it would on a peer's (``node.policy.peer_ids``): the
published ids, which are its own tokenizer's, or the texts where they are missing.
"""

from __future__ import annotations

import random
from collections.abc import Callable, Sequence
from dataclasses import dataclass

from node.learning_data import GeneratedGroup, ScoredGroup, TrainedCompletion
from node.rollouts.schema import Completion, SignedBatch
from node.tasks import TaskItem, build_messages


@dataclass(frozen=True)
class BatchToPublish:
    """Stored bytes and the numbers ``publishRollouts`` commits."""

    data: bytes
    digest: bytes
    groups: int
    completions: int
    reward_sum: int
    adapter: bytes | None = None
    """The address of the adapter the batch names (None: the batch names none of ours)."""


@dataclass(frozen=True)
class OwnRound:
    """This node's tasks of a round with its completions and their rewards (for training)."""

    tasks: tuple[TaskItem, ...]
    texts: tuple[tuple[str, ...], ...]
    rewards: tuple[tuple[float, ...], ...]
    generated: tuple[GeneratedGroup, ...] | None = None
    """The samples behind ``texts`` (prompt and token ids); None when reloaded from the store."""
    reloaded: tuple[tuple[TrainedCompletion, ...], ...] | None = None
    """What is trained on when reloaded from the store (``from_batch``)."""

    def __post_init__(self) -> None:
        if (self.generated is None) == (self.reloaded is None):
            raise ValueError("an own round is either generated or reloaded from the store")
        if self.generated is not None and tuple(g.texts for g in self.generated) != self.texts:
            raise ValueError("the generated groups' texts are not the batch's texts")
        if self.reloaded is not None and (
            tuple(tuple(c.text for c in g) for g in self.reloaded) != self.texts
        ):
            raise ValueError("the reloaded completions' texts are not the batch's texts")

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
        """Each group for training: as sampled, or as reloaded from the store."""
        if self.generated is not None:
            return [
                ScoredGroup.generated(group, rewards)
                for group, rewards in zip(self.generated, self.rewards, strict=True)
            ]
        assert self.reloaded is not None  # __post_init__: one of the two
        return [
            ScoredGroup(build_messages(task), list(completions), list(rewards))
            for task, completions, rewards in zip(
                self.tasks, self.reloaded, self.rewards, strict=True
            )
        ]

    @classmethod
    def from_batch(
        cls, batch: SignedBatch, tasks: list[TaskItem], *, trained: AsTrained
    ) -> OwnRound:
        """The groups of a stored batch, with the tasks they answer (by the groups' indexes),
        trained on as ``trained`` turns them (``PeerIds.trained``: like a peer's)."""
        groups = batch.body.groups
        tokenizer = batch.body.model.tokenizer
        return cls(
            tasks=tuple(tasks[g.task.index] for g in groups),
            texts=tuple(tuple(c.text for c in g.completions) for g in groups),
            rewards=tuple(tuple(c.reward for c in g.completions) for g in groups),
            reloaded=tuple(tuple(trained(g.completions, tokenizer)) for g in groups),
        )


AsTrained = Callable[[Sequence[Completion], str | None], Sequence[TrainedCompletion]]
"""A batch's completions and its tokenizer digest -> what is trained on (``PeerIds.trained``)."""


def pick_local(own: OwnRound, count: int, rng: random.Random) -> list[ScoredGroup]:
    """Up to ``count`` of the node's own groups, those with a learning signal first."""
    groups = own.scored_groups()
    with_signal = [g for g in groups if len(set(g.rewards)) > 1]
    rng.shuffle(with_signal)
    return with_signal[:count]

"""What a peer's batch earned in intake: the verdict, its ballot item, and the groups kept."""

from __future__ import annotations

from collections import Counter
from dataclasses import dataclass, field

from node.chain.models import VerdictItem
from node.rollouts.reasons import RejectReason
from node.rollouts.schema import Completion, ModelInfo
from node.tasks import TaskItem


def to_milli(reward: float) -> int:
    """Milli-units: ``round(reward * 1000)`` (docs/PROTOCOL.md, "Rewards in milli-units")."""
    return round(reward * 1000)


@dataclass(frozen=True)
class VerifiedGroup:
    """A peer's group whose every claimed reward matched this node's own score: the completions
    as the batch holds them, this node's scores, and the model the batch says sampled them
    (None only in tests of selection, which never look at it)."""

    peer: str
    round: int
    task: TaskItem
    completions: tuple[Completion, ...]
    rewards: tuple[float, ...]
    model: ModelInfo | None = None

    @property
    def tokenizer(self) -> str | None:
        """The digest of the tokenizer the completions' token ids belong to."""
        return None if self.model is None else self.model.tokenizer

    @property
    def texts(self) -> tuple[str, ...]:
        return tuple(c.text for c in self.completions)

    @property
    def has_advantage(self) -> bool:
        """False when every completion has the same reward: GRPO learns nothing from it."""
        return len(set(self.rewards)) > 1


@dataclass(frozen=True)
class PeerVerdict:
    """The outcome of one peer's batch for one round.

    ``reason`` is None for a batch that passed every check. ``attestable`` says whether the batch's
    bytes were the committed ones (digest matched): only then is the peer accountable for what they
    hold, and only then does this node vote on it (``checked`` / ``agreed`` /
    ``verified_reward_milli``). A fetch failure is not the peer's provable fault, so it is counted
    but never voted on.
    """

    peer: str
    round: int
    digest: bytes
    reason: RejectReason | None
    detail: str = ""
    attestable: bool = False
    checked: int = 0
    agreed: int = 0
    verified_reward_milli: int = 0
    groups: tuple[VerifiedGroup, ...] = ()

    @property
    def accepted(self) -> bool:
        return self.reason is None

    def item(self) -> VerdictItem | None:
        """This verdict as a ballot item, or None when there is nothing to vote."""
        if not self.attestable or self.checked == 0:
            return None
        return VerdictItem(
            subject=self.peer,
            checked=self.checked,
            agreed=self.agreed,
            verified_reward_sum=self.verified_reward_milli,
        )


@dataclass
class IntakeReport:
    """One round's intake: every verdict, rejection counts by reason, the groups kept."""

    round: int
    verdicts: list[PeerVerdict] = field(default_factory=list)

    @property
    def rejections(self) -> Counter[str]:
        return Counter(v.reason.value for v in self.verdicts if v.reason is not None)

    @property
    def groups(self) -> list[VerifiedGroup]:
        return [group for verdict in self.verdicts for group in verdict.groups]

    def items(self) -> list[VerdictItem]:
        """The votable verdicts as ballot items, in the contract's order (by subject)."""
        found = [a for a in (v.item() for v in self.verdicts) if a is not None]
        return sorted(found, key=VerdictItem.sort_key)

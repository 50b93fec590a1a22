"""The judging steps of a round as pure functions: seats, ballots, reveals, settlements, reports.

A node decides from what the chain says (seal, weights, ballot slots, verdict states) and what its
state file holds (judged batches, saved ballots, flags); these functions hold every such decision
so they can be tested without a chain, and :class:`~node.round.node.SwarmNode` only carries them
out. The rules are the contract's (docs/PROTOCOL.md): round d is sealed and committed on during
``phases.commit_phase(d)``, revealed during ``phases.reveal_phase(d)``, settled from
``phases.settleable_from(d)``.
"""

from __future__ import annotations

import random
from collections.abc import Iterable, Mapping, Sequence
from dataclasses import dataclass
from typing import TypeVar

from node.chain.committee import reveal_receipt, sort_items, vote_weight
from node.chain.models import Phases, SealInfo, VerdictItem
from node.round.state import Ballot, Judged

T = TypeVar("T")


def sample(items: Sequence[T], count: int, rng: random.Random) -> list[T]:
    """Up to ``count`` of ``items`` drawn at random, in their original order (the node fetches
    only the peers it may train on, not every batch: verification is O(sample), not O(N))."""
    if count >= len(items):
        return list(items)
    chosen = set(rng.sample(range(len(items)), count))
    return [item for i, item in enumerate(items) if i in chosen]


def rounds_to_judge(phases: Phases, current: int, decided: Iterable[int]) -> list[int]:
    """The rounds whose commit phase holds ``current`` and that this node has not decided yet."""
    done = set(decided)
    return [d for d in phases.committing_rounds(current) if d not in done]


def seats(
    seal: SealInfo, committee_size: int, attester: str, weight: int, subjects: Iterable[str]
) -> dict[str, int]:
    """The subjects on whose committee ``attester`` sits, with its vote weight on each."""
    found = {}
    for subject in subjects:
        vote = vote_weight(
            seal.beacon, seal.total_weight, committee_size, subject, attester, weight
        )
        if vote > 0:
            found[subject] = vote
    return found


def ballot_items(seated: Iterable[str], judged: Mapping[str, Judged]) -> list[VerdictItem]:
    """The sorted ballot of one round: a verdict on each seated subject this node could judge."""
    items = []
    for subject in seated:
        verdict = judged.get(subject)
        item = verdict.item(subject) if verdict is not None else None
        if item is not None:
            items.append(item)
    return sort_items(items)


def limit_flags(items: Sequence[VerdictItem], bondable: int | None) -> list[VerdictItem]:
    """The ballot without the flags past the first ``bondable`` (None: no limit). The contract
    ignores a flag its attester's free stake cannot bond in full, so a node never casts one: the
    agreements all stay, the first flags in subject order are kept."""
    if bondable is None:
        return list(items)
    kept, flags = [], 0
    for item in items:
        if item.is_flag:
            flags += 1
            if flags > bondable:
                continue
        kept.append(item)
    return kept


@dataclass(frozen=True)
class RevealPlan:
    due: list[Ballot]  # reveal now
    waiting: list[Ballot]  # committed, reveal phase not begun
    expired: list[Ballot]  # reveal phase over without a reveal: the ballot is lost


def plan_reveals(ballots: Iterable[Ballot], phases: Phases, current: int) -> RevealPlan:
    """Sorts committed, unrevealed ballots by what their round's phase allows now."""
    due, waiting, expired = [], [], []
    for ballot in ballots:
        if not ballot.committed or ballot.revealed:
            continue
        phase = phases.reveal_phase(ballot.round)
        if current in phase:
            due.append(ballot)
        elif current < phase.start:
            waiting.append(ballot)
        else:
            expired.append(ballot)
    return RevealPlan(due, waiting, expired)


def ballot_slot(ballot: Ballot, commitment: bytes, slot: bytes) -> str:
    """What the chain's ballot slot says about ``ballot``: "empty" (never committed),
    "committed" (our commitment, to reveal), "revealed" (our receipt) or "other" (a commitment this
    state file does not hold: an earlier run committed and lost its ballot)."""
    if slot == bytes(32):
        return "empty"
    if slot == commitment:
        return "committed"
    if slot == reveal_receipt(ballot.items):
        return "revealed"
    return "other"


def settleable(
    flags: Iterable[tuple[int, str]], phases: Phases, current: int
) -> tuple[list[tuple[int, str]], list[tuple[int, str]]]:
    """Splits this node's flags into those whose round may be settled now and those that wait."""
    due, later = [], []
    for round, subject in flags:
        (due if current >= phases.settleable_from(round) else later).append((round, subject))
    return due, later


@dataclass(frozen=True)
class AgreementReport:
    """An agreement to report: ``items[index]`` of ``attester``'s reveal agreed with ``subject``."""

    attester: str
    items: list[VerdictItem]
    index: int


def agreement_reports(
    reveals: Mapping[str, Sequence[VerdictItem]],
    counted: Mapping[str, frozenset[str]],
    subject: str,
    reporter: str,
) -> list[AgreementReport]:
    """Every counted agreement on ``subject`` by an attester other than ``reporter``, with the
    attester's full revealed item list (the contract checks it against the reveal receipt)."""
    found = []
    for attester in sorted(reveals):
        if attester == reporter or subject not in counted.get(attester, frozenset()):
            continue
        items = list(reveals[attester])
        for index, item in enumerate(items):
            if item.subject == subject and not item.is_flag:
                found.append(AgreementReport(attester, items, index))
    return found

"""A committee seat's provenance duty, as pure functions (docs/PROTOCOL.md, "Who recomputes, and
the tolerances").

In the first round of a round's commit phase, each seat that recomputes a batch
(:func:`~node.provenance.choice.recomputes`) recomputes its c chosen groups and, when the batch
fails, posts the evidence on-chain. In the phase's last round every seat re-checks the groups
that other recomputing seats posted evidence on, then commits. What a recompute found becomes the
seat's verdict (:func:`amended`):

- a completion below the hard tolerance, an adapter that is not the batch's, or a copied one: a
  flag (the subject can be slashed: the adapter and the tokens prove it);
- an adapter nobody serves: an agreement worth nothing (the reward is forfeit, nobody is
  slashed: unavailability cannot be proven on-chain);
- completions below the soft tolerance only: an agreement without their rewards.
"""

from __future__ import annotations

from collections.abc import Iterable, Mapping
from dataclasses import dataclass

from node.chain.events import RolloutsPublished
from node.chain.models import Rules, SealInfo
from node.provenance.choice import CHECKED_GROUPS, checked_groups, recomputes
from node.provenance.peer_check import BatchProvenance
from node.rollouts.reasons import PROVEN_BY_RECOMPUTE, RejectReason
from node.round.state import Judged
from node.round.view import PostedEvidence
from node.sampling.verdicts import VerifiedGroup, to_milli


@dataclass(frozen=True)
class CommitteeSeat:
    """What a node knows of one round it judges: its seal, rules, the subjects it sits on and
    the round's commitments."""

    round: int
    seal: SealInfo
    rules: Rules
    seated: list[str]
    commitments: list[RolloutsPublished]


def duties(
    beacon: bytes, committee_size: int, attester: str, seated: Iterable[str], groups: int
) -> dict[str, list[int]]:
    """The seated subjects whose batch ``attester`` recomputes, with the group indexes it
    recomputes of each (``groups``: the round's groups per batch)."""
    count = min(CHECKED_GROUPS, groups)
    return {
        subject: checked_groups(beacon, subject, attester, groups, count)
        for subject in seated
        if recomputes(beacon, subject, attester, committee_size)
    }


def rechecks(
    evidence: Iterable[PostedEvidence],
    beacon: bytes,
    committee_size: int,
    attester: str,
    seated: Iterable[str],
    groups: int,
) -> dict[str, list[int]]:
    """The groups to re-check before committing: those that another recomputing seat posted
    evidence on, of a batch ``attester`` sits on. Evidence from anyone else, on a group the
    round does not have, or repeated, costs nothing."""
    mine = set(seated)
    found: dict[str, set[int]] = {}
    for e in evidence:
        if e.subject not in mine or e.poster == attester or not 0 <= e.group < groups:
            continue
        if recomputes(beacon, e.subject, e.poster, committee_size):
            found.setdefault(e.subject, set()).add(e.group)
    return {subject: sorted(g) for subject, g in sorted(found.items())}


def evidence_of(outcome: BatchProvenance, checked: list[int]) -> tuple[int, int, int] | None:
    """(group, completion, token) to post for a failed recompute; None when it passed (or the
    check itself failed here: a ``verifier_error`` is this node's problem, not the batch's)."""
    if outcome.reason is None or outcome.reason == RejectReason.VERIFIER_ERROR:
        return None
    result = outcome.result
    if result is not None and result.evidence is not None:
        e = result.evidence
        return e.group, e.completion, e.position
    return (checked[0] if checked else 0), 0, 0


def amended(
    judged: Judged, outcome: BatchProvenance, groups: Mapping[int, VerifiedGroup]
) -> Judged:
    """This seat's verdict on the batch after the recompute of ``groups`` (by group index)."""
    if judged.checked == 0 or outcome.reason == RejectReason.VERIFIER_ERROR:
        return judged
    if outcome.reason in PROVEN_BY_RECOMPUTE:
        return judged.model_copy(update={"agreed": 0, "verified_reward_sum": 0})
    if judged.agreed < judged.checked:
        return judged  # a flag already: re-scoring found the batch invalid
    if outcome.reason == RejectReason.ADAPTER_MISSING:
        return judged.model_copy(update={"verified_reward_sum": 0})
    excluded = outcome.result.excluded if outcome.result is not None else frozenset()
    lost = sum(to_milli(groups[g].rewards[c]) for g, c in excluded if g in groups)
    return judged.model_copy(
        update={"verified_reward_sum": max(0, judged.verified_reward_sum - lost)}
    )

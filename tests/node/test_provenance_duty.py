"""A committee seat's provenance duty (node/round/provenance_duty.py): which batches it
recomputes, which evidence it re-checks, what it posts and what its verdict becomes."""

from __future__ import annotations

from node.provenance.check import Evidence, ProvenanceResult
from node.provenance.choice import RECOMPUTING_SEATS, recomputes
from node.provenance.peer_check import BatchProvenance
from node.rollouts import RejectReason
from node.round.provenance_duty import amended, duties, evidence_of, rechecks
from node.round.state import Judged
from node.round.view import PostedEvidence
from node.sampling.verdicts import VerifiedGroup
from tests.rollouts.factories import PEER
from tests.sampling.batches import tasks_for

BEACON = bytes(range(20))
MEMBERS = [f"0x{i:040x}" for i in range(1, 41)]
ADAPTER = "0x" + "ab" * 32
JUDGED = Judged(checked=16, agreed=16, verified_reward_sum=6_000, adapter=ADAPTER)  # type: ignore[arg-type]


def _outcome(reason: RejectReason | None, result: ProvenanceResult | None = None) -> BatchProvenance:
    return BatchProvenance(PEER.address, 3, reason, "", result)


def _result(excluded: set[tuple[int, int]], evidence: Evidence | None = None) -> ProvenanceResult:
    return ProvenanceResult((0, 1), frozenset(excluded), evidence, -0.5 if evidence else 0.0)


def _group(index: int, rewards: tuple[float, ...]) -> VerifiedGroup:
    return VerifiedGroup(PEER.address, 3, tasks_for(PEER.address)[index], (), rewards, None)


def test_a_seat_recomputes_only_the_batches_its_draw_picks_and_c_groups_of_each() -> None:
    attester = MEMBERS[0]
    found = duties(BEACON, 64, attester, MEMBERS[1:], groups=8)
    expected = {s for s in MEMBERS[1:] if recomputes(BEACON, s, attester, 64)}
    assert set(found) == expected
    assert all(len(g) == 2 and g == sorted(g) and all(0 <= i < 8 for i in g) for g in found.values())
    everyone = duties(BEACON, RECOMPUTING_SEATS, attester, MEMBERS[1:5], groups=1)
    assert everyone == {s: [0] for s in MEMBERS[1:5]}  # k <= m: every seat, at most all groups


def test_only_evidence_from_recomputing_seats_on_seated_batches_is_re_checked() -> None:
    me, subject = MEMBERS[0], MEMBERS[1]
    posters = [p for p in MEMBERS[2:] if recomputes(BEACON, subject, p, 64)]
    idle = next(p for p in MEMBERS[2:] if not recomputes(BEACON, subject, p, 64))
    assert posters, "the draw picks some seats among 38"
    evidence = [
        PostedEvidence(3, subject, posters[0], 5, 0, 0),
        PostedEvidence(3, subject, posters[-1], 5, 1, 2),  # the same group again: once
        PostedEvidence(3, subject, idle, 1, 0, 0),  # not a recomputing seat
        PostedEvidence(3, subject, posters[0], 99, 0, 0),  # no such group
        PostedEvidence(3, MEMBERS[5], posters[0], 2, 0, 0),  # not seated there
        PostedEvidence(3, subject, me, 4, 0, 0),  # its own
    ]
    assert rechecks(evidence, BEACON, 64, me, [subject], groups=8) == {subject: [5]}


def test_a_failed_recompute_posts_where_it_fails_and_flags() -> None:
    failing = _result({(1, 3)}, Evidence(1, 3, 7, -0.2, -0.9))
    outcome = _outcome(RejectReason.PROVENANCE, failing)
    assert evidence_of(outcome, [1, 4]) == (1, 3, 7)
    assert amended(JUDGED, outcome, {}) == JUDGED.model_copy(update={"agreed": 0, "verified_reward_sum": 0})
    assert amended(JUDGED, outcome, {}).adapter == bytes.fromhex("ab" * 32)  # kept: copies are looked for
    mismatch = _outcome(RejectReason.ADAPTER_MISMATCH)
    assert evidence_of(mismatch, [4, 6]) == (4, 0, 0)
    assert amended(JUDGED, mismatch, {}).agreed == 0


def test_a_missing_adapter_forfeits_the_reward_without_a_flag() -> None:
    outcome = _outcome(RejectReason.ADAPTER_MISSING)
    assert evidence_of(outcome, [2, 5]) == (2, 0, 0)  # so that every other seat tries to fetch it
    assert amended(JUDGED, outcome, {}) == JUDGED.model_copy(update={"verified_reward_sum": 0})


def test_soft_exclusions_cost_their_rewards_and_a_passing_batch_keeps_its_verdict() -> None:
    groups = {0: _group(0, (1.0, 0.0, 1.0, 0.0)), 1: _group(1, (0.5, 1.0, 0.0, 0.0))}
    outcome = _outcome(None, _result({(0, 2), (1, 1)}))
    assert evidence_of(outcome, [0, 1]) is None
    assert amended(JUDGED, outcome, groups).verified_reward_sum == 6_000 - 2_000
    assert amended(JUDGED, _outcome(None, _result(set())), groups) == JUDGED


def test_a_verifier_error_changes_nothing_and_posts_nothing() -> None:
    outcome = _outcome(RejectReason.VERIFIER_ERROR)
    assert evidence_of(outcome, [0]) is None
    assert amended(JUDGED, outcome, {}) == JUDGED
    flagged = Judged(checked=16, agreed=12, verified_reward_sum=3_000)
    assert amended(flagged, _outcome(RejectReason.ADAPTER_MISSING), {}) == flagged

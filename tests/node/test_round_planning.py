"""The round's pure decisions: which verdicts to attest now, which own groups to train on."""

from __future__ import annotations

import random

from node.chain.models import Attestation
from node.round.attestations import plan_attestations
from node.round.own import OwnRound, pick_local
from node.tasks import DEFAULT_PRESET_NAME, derive_tasks, get_preset

SUBJECTS = (
    "0x90F79bf6EB2c4f870365E785982E1f101E93b906",
    "0x3C44CdDdB6a900fa2b585dd299e03d12FA4293BC",
    "0x70997970C51812dc3A010C7d01b50e0d17dc79C8",
)


def verdict(round: int, subject: str) -> Attestation:
    return Attestation(
        round=round, subject=subject, digest=b"\x02" * 32, checked=8, agreed=8,
        verified_reward_sum=1000,
    )  # fmt: skip


def test_due_verdicts_go_out_in_the_contracts_order() -> None:
    pending = [verdict(5, s) for s in SUBJECTS] + [verdict(4, SUBJECTS[0])]
    plan = plan_attestations(pending, next_round=4, current=5, window=2, final_round=5)
    assert [(a.round, int(a.subject, 16)) for a in plan.due] == sorted(
        (a.round, int(a.subject, 16)) for a in pending
    )
    assert plan.later == [] and plan.expired == []


def test_a_round_that_may_still_get_commitments_waits() -> None:
    pending = [verdict(5, SUBJECTS[0]), verdict(6, SUBJECTS[1])]
    plan = plan_attestations(pending, next_round=0, current=6, window=2, final_round=5)
    assert plan.due == [pending[0]] and plan.later == [pending[1]]


def test_verdicts_behind_next_attest_round_or_out_of_the_window_expire() -> None:
    behind, stale, fine = verdict(3, SUBJECTS[0]), verdict(4, SUBJECTS[1]), verdict(6, SUBJECTS[2])
    plan = plan_attestations(
        [behind, stale, fine], next_round=4, current=7, window=2, final_round=7
    )
    assert plan.expired == [behind, stale] and plan.due == [fine]


def own_round(rewards: list[tuple[float, ...]]) -> OwnRound:
    tasks = derive_tasks(b"\x07" * 32, SUBJECTS[0], get_preset(DEFAULT_PRESET_NAME))[: len(rewards)]
    texts = tuple(tuple(f"t{i}" for i in range(len(r))) for r in rewards)
    return OwnRound(tasks=tuple(tasks), texts=texts, rewards=tuple(rewards))


def test_local_groups_are_those_with_a_learning_signal() -> None:
    own = own_round([(0.0, 0.0), (1.0, 0.0), (1.0, 1.0), (0.0, 1.0)])
    picked = pick_local(own, 4, random.Random(0))
    assert sorted(tuple(g.rewards) for g in picked) == [(0.0, 1.0), (1.0, 0.0)]
    assert len(pick_local(own, 1, random.Random(0))) == 1
    assert own.mean_reward == 0.5

"""The round's pure decisions: which peers to fetch, seats, ballots, reveals, settlements,
agreement reports, and which own groups to train on."""

from __future__ import annotations

import random

import pytest

from node.chain.committee import ballot_commitment, reveal_receipt, vote_weight
from node.chain.models import Phases, SealInfo, VerdictItem
from node.round.ballots import (
    agreement_reports,
    ballot_items,
    limit_flags,
    ballot_slot,
    plan_reveals,
    sample,
    seats,
    settleable,
)
from node.learning_data import TextCompletion
from node.round.own import OwnRound, pick_local
from node.round.state import Ballot, Judged
from node.tasks import DEFAULT_PRESET_NAME, derive_tasks, get_preset

ME = "0x70997970C51812dc3A010C7d01b50e0d17dc79C8"
SUBJECTS = (
    "0x90F79bf6EB2c4f870365E785982E1f101E93b906",
    "0x3C44CdDdB6a900fa2b585dd299e03d12FA4293BC",
    "0x15d34AAf54267DB7D7c367839AAf71A00a2C6A65",
)
PHASES = Phases(grace_rounds=1, commit_rounds=2, reveal_rounds=2)
SEAL = SealInfo(beacon=b"\x42" * 20, total_weight=100 * 10**18)


def item(subject: str, agreed: int = 8) -> VerdictItem:
    return VerdictItem(subject=subject, checked=8, agreed=agreed, verified_reward_sum=1000)


def ballot(round: int, *, committed: bool = True, revealed: bool = False) -> Ballot:
    return Ballot(
        round=round, items=[item(SUBJECTS[0])], salt=b"\x01" * 32, committed=committed,
        revealed=revealed,
    )  # fmt: skip


def test_the_fetch_sample_is_random_bounded_and_keeps_order() -> None:
    peers = list(range(20))
    chosen = sample(peers, 8, random.Random(1))
    assert len(chosen) == 8 and chosen == sorted(chosen)
    assert chosen != sample(peers, 8, random.Random(2))
    assert sample(peers[:3], 8, random.Random(1)) == [0, 1, 2]
    assert sample(peers, 0, random.Random(1)) == []


def test_phases_give_the_rounds_to_commit_reveal_and_settle() -> None:
    # g=1, c=2, v=2: verdicts on d are committed in d+2..d+3, revealed in d+4..d+5.
    assert list(PHASES.committing_rounds(10)) == [7, 8]
    assert list(PHASES.revealing_rounds(10)) == [5, 6]
    assert PHASES.settleable_from(4) == 10


def test_a_large_stake_holds_every_seat_a_small_one_some() -> None:
    heavy = seats(SEAL, 64, ME, 10 * 10**18, SUBJECTS)
    assert heavy == {s: 10 * 10**18 for s in SUBJECTS}  # k * w >= T
    assert seats(SEAL, 64, ME, 0, SUBJECTS) == {}
    assert ME not in seats(SEAL, 64, ME, 10**20, [ME, *SUBJECTS])
    subjects = [f"0x{i:040x}" for i in range(1, 400)]
    light = seats(SEAL, 64, ME, 10**18, subjects)  # p = 64 / 100 per seat
    assert 0.5 < len(light) / len(subjects) < 0.8
    assert set(light.values()) == {SEAL.total_weight // 64}
    for subject, weight in light.items():  # the same function as the contract's rule
        assert vote_weight(SEAL.beacon, SEAL.total_weight, 64, subject, ME, 10**18) == weight


def test_a_ballot_votes_on_the_seated_subjects_it_could_judge_sorted() -> None:
    judged = {
        SUBJECTS[0]: Judged(checked=8, agreed=8, verified_reward_sum=500),
        SUBJECTS[1]: Judged(checked=8, agreed=2, verified_reward_sum=100),
        SUBJECTS[2]: Judged(),  # not judgeable here (unknown preset): no vote
    }
    items = ballot_items([SUBJECTS[0], SUBJECTS[1], SUBJECTS[2], ME], judged)
    assert [i.subject for i in items] == sorted(SUBJECTS[:2], key=lambda s: int(s, 16))
    assert [i.is_flag for i in items] == [s == SUBJECTS[1] for s in [i.subject for i in items]]
    assert ballot_items([SUBJECTS[0]], {}) == []


def test_reveals_wait_for_their_phase_and_expire_after_it() -> None:
    ballots = [ballot(3), ballot(5), ballot(6), ballot(4, committed=False), ballot(2, revealed=True)]
    plan = plan_reveals(ballots, PHASES, current=9)  # reveal phase of 5: 9..10
    assert [b.round for b in plan.due] == [5]
    assert [b.round for b in plan.waiting] == [6]
    assert [b.round for b in plan.expired] == [3]


def test_the_ballot_slot_tells_committed_revealed_and_foreign() -> None:
    saved = ballot(5)
    commitment = ballot_commitment(ME, 5, saved.items, saved.salt)
    assert ballot_slot(saved, commitment, bytes(32)) == "empty"
    assert ballot_slot(saved, commitment, commitment) == "committed"
    assert ballot_slot(saved, commitment, reveal_receipt(saved.items)) == "revealed"
    other = ballot_commitment(ME, 5, saved.items, b"\x02" * 32)  # a lost run's salt
    assert ballot_slot(saved, commitment, other) == "other"


def test_flags_are_settled_from_their_settleable_round() -> None:
    flags = [(3, SUBJECTS[0]), (4, SUBJECTS[1]), (5, SUBJECTS[2])]
    due, later = settleable(flags, PHASES, current=10)
    assert due == flags[:2] and later == flags[2:]


def test_counted_agreements_of_others_are_reported_with_their_full_ballot() -> None:
    cheat = SUBJECTS[0]
    friend = [item(cheat), item(SUBJECTS[1])]
    late = [item(cheat)]  # its item was ignored (no seat any more): not penalizable
    mine = [item(cheat)]
    flagger = [item(cheat, agreed=0)]
    reveals = {SUBJECTS[2]: friend, ME: mine, SUBJECTS[1]: late, "0x" + "11" * 20: flagger}
    counted = {
        SUBJECTS[2]: frozenset({cheat, SUBJECTS[1]}),
        ME: frozenset({cheat}),
        SUBJECTS[1]: frozenset(),
        "0x" + "11" * 20: frozenset({cheat}),
    }
    found = agreement_reports(reveals, counted, cheat, ME)
    assert [(r.attester, r.index) for r in found] == [(SUBJECTS[2], 0)]
    assert found[0].items == friend


@pytest.mark.parametrize("checked,agreed,vote", [(8, 8, True), (8, 3, True), (0, 0, False)])
def test_a_cached_verdict_is_a_ballot_item_when_it_checked_something(
    checked: int, agreed: int, vote: bool
) -> None:
    judged = Judged(checked=checked, agreed=agreed, verified_reward_sum=7)
    found = judged.item(SUBJECTS[0])
    assert (found is not None) is vote
    if found is not None:
        assert found.is_flag is (agreed < checked)


def own_round(rewards: list[tuple[float, ...]]) -> OwnRound:
    tasks = derive_tasks(b"\x07" * 32, SUBJECTS[0], get_preset(DEFAULT_PRESET_NAME))[: len(rewards)]
    texts = tuple(tuple(f"t{i}" for i in range(len(r))) for r in rewards)
    reloaded = tuple(tuple(TextCompletion(t, "stop") for t in group) for group in texts)
    return OwnRound(tasks=tuple(tasks), texts=texts, rewards=tuple(rewards), reloaded=reloaded)


def test_local_groups_are_those_with_a_learning_signal() -> None:
    own = own_round([(0.0, 0.0), (1.0, 0.0), (1.0, 1.0), (0.0, 1.0)])
    picked = pick_local(own, 4, random.Random(0))
    assert sorted(tuple(g.rewards) for g in picked) == [(0.0, 1.0), (1.0, 0.0)]
    assert len(pick_local(own, 1, random.Random(0))) == 1
    assert own.mean_reward == 0.5


def test_limit_flags_keeps_every_agreement_and_the_first_bondable_flags() -> None:
    items = [
        VerdictItem(subject=s, checked=8, agreed=8 if i % 2 else 3, verified_reward_sum=0)
        for i, s in enumerate(sorted(SUBJECTS))
    ]
    flags = [i for i in items if i.is_flag]
    agreements = [i for i in items if not i.is_flag]
    assert len(flags) >= 2 and agreements
    kept = limit_flags(items, 1)
    assert [i for i in kept if not i.is_flag] == agreements
    assert [i for i in kept if i.is_flag] == flags[:1]
    assert [i.subject for i in kept] == sorted(i.subject for i in kept)  # still in ballot order
    assert limit_flags(items, 0) == agreements
    assert limit_flags(items, len(flags)) == items == limit_flags(items, None)

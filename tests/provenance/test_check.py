"""A seat's provenance check: which groups it draws, the odds, and the two tolerances."""

from __future__ import annotations

import math

import pytest
import torch

from node.provenance.check import HARD_TOLERANCE, SOFT_TOLERANCE, judge
from node.provenance.choice import RECOMPUTING_SEATS, checked_groups, escape_odds, recomputes
from node.provenance.recompute import CompletionMargins, GroupToCheck, batch_margins
from tests.provenance.helpers import G, sample, seeds_for

SUBJECT = "0xf39Fd6e51aad88F6F4ce6aB8827279cffFb92266"
SEATS = [f"0x{i:040x}" for i in range(1, 9)]
BEACON = bytes(range(20))


def test_each_seat_draws_its_own_groups_and_the_beacon_changes_them() -> None:
    draws = [checked_groups(BEACON, SUBJECT, seat, 8, 2) for seat in SEATS]
    assert all(len(d) == 2 and d == sorted(d) and set(d) <= set(range(8)) for d in draws)
    assert len({tuple(d) for d in draws}) > 3
    assert draws[0] == checked_groups(BEACON, SUBJECT, SEATS[0], 8, 2)  # anyone can recompute it
    other = [checked_groups(bytes(20), SUBJECT, seat, 8, 2) for seat in SEATS]
    assert other != draws
    assert checked_groups(BEACON, SUBJECT, SEATS[0], 3, 5) == [0, 1, 2]


def test_over_many_beacons_every_group_is_drawn_about_equally() -> None:
    counts = [0] * 8
    for b in range(400):
        for i in checked_groups(b.to_bytes(20, "big"), SUBJECT, SEATS[0], 8, 1):
            counts[i] += 1
    assert min(counts) > 30 and max(counts) < 70  # 50 expected each, sd 6.6


def test_escape_odds() -> None:
    assert escape_odds(8, 0, 1, 3) == 1.0
    assert escape_odds(8, 8, 1, 3) == 0.0
    assert escape_odds(8, 1, 1, 3) == pytest.approx((7 / 8) ** 3)
    assert escape_odds(8, 2, 2, 1) == pytest.approx(math.comb(6, 2) / math.comb(8, 2))
    with pytest.raises(ValueError):
        escape_odds(8, 9, 1, 1)


def margins(*worst: float) -> list[CompletionMargins]:
    return [CompletionMargins(w, 3, (0.5, 0.5, 0.5, w)) for w in worst]


def test_the_soft_tolerance_excludes_and_the_hard_one_flags_with_the_worst_evidence() -> None:
    result = judge(
        {
            5: margins(0.01, -SOFT_TOLERANCE / 2, -2 * SOFT_TOLERANCE),
            2: margins(-2 * HARD_TOLERANCE, -0.5, 0.2),
        }
    )
    assert result.checked == (2, 5)
    assert result.excluded == {(5, 2), (2, 0), (2, 1)}
    assert result.flagged and (result.evidence.group, result.evidence.completion) == (2, 1)
    assert result.evidence.position == 3 and result.worst_margin == -0.5
    honest = judge({0: margins(1e-6, -1e-6)})
    assert not honest.flagged and not honest.excluded and honest.worst_margin == -1e-6


def test_a_nan_margin_counts_as_a_miss() -> None:
    result = judge({0: [CompletionMargins.of(torch.tensor([0.2, float("-inf")]))]})
    assert result.flagged and result.excluded == {(0, 0)}


def test_the_check_passes_honest_groups_and_flags_a_forged_one(peaked, tokenizer, prompts) -> None:  # type: ignore[no-untyped-def]
    seeds = seeds_for(6)
    completions = sample(peaked, tokenizer, prompts, seeds)
    groups = [GroupToCheck(prompts[i], completions[i], seeds[i]) for i in range(len(prompts))]
    honest = judge(dict(enumerate(batch_margins(peaked, groups))))
    assert not honest.flagged and not honest.excluded and honest.worst_margin > -SOFT_TOLERANCE
    answer = tokenizer("<answer>5</answer>", add_special_tokens=False)["input_ids"]
    forged_group = list(completions[2])
    forged_group[1] = answer + [tokenizer.eos_token_id]
    groups[2] = GroupToCheck(prompts[2], forged_group, seeds[2])
    forged = judge(dict(enumerate(batch_margins(peaked, groups))))
    assert forged.flagged and (forged.evidence.group, forged.evidence.completion) == (2, 1)
    assert forged.excluded == {(2, 1)}
    assert G == len(forged_group)


def test_about_m_seats_per_batch_recompute_whatever_the_committee_size() -> None:
    assert all(recomputes(BEACON, SUBJECT, seat, RECOMPUTING_SEATS) for seat in SEATS)
    seats = [f"0x{i:040x}" for i in range(1, 6401)]
    chosen = sum(recomputes(BEACON, SUBJECT, seat, 64) for seat in seats)
    assert abs(chosen / 100 - RECOMPUTING_SEATS) < 0.5  # 100 committees of 64: sd 0.17 per batch


def test_the_evidence_is_the_first_failing_position_of_the_worst_completion() -> None:
    later_worse = CompletionMargins(-0.9, 3, (0.1, -0.05, 0.2, -0.9))
    result = judge({1: [later_worse]})
    assert result.evidence is not None
    assert (result.evidence.position, result.evidence.margin, result.evidence.worst) == (1, -0.05, -0.9)

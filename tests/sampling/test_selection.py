"""Choosing external groups: zero-advantage filter, uniform and history-weighted strategies."""

from __future__ import annotations

import random
from collections import Counter

from node.rollouts import RejectReason
from node.sampling.selection import (
    UniformSelection,
    VerifiedHistorySelection,
    select_external,
    with_advantage,
)
from node.sampling.verdicts import PeerVerdict, VerifiedGroup
from tests.rollouts.factories import OTHER, PEER
from tests.sampling.batches import ROUND, tasks_for

TASK = tasks_for(PEER.address)[0]


def group(peer: str, rewards: tuple[float, ...]) -> VerifiedGroup:
    return VerifiedGroup(peer, ROUND, TASK, tuple("t" for _ in rewards), rewards)


def test_zero_advantage_groups_are_dropped() -> None:
    flat = group(PEER.address, (1.0, 1.0, 1.0))
    zero = group(PEER.address, (0.0, 0.0))
    useful = group(PEER.address, (0.0, 1.0))
    assert with_advantage([flat, zero, useful]) == [useful]
    assert select_external([flat, zero], 4, random.Random(0)) == []


def test_uniform_selection_is_seeded_and_without_replacement() -> None:
    groups = [group(PEER.address, (0.0, i / 10 + 0.05)) for i in range(10)]
    first = select_external(groups, 4, random.Random(7))
    assert first == select_external(groups, 4, random.Random(7))
    assert len(first) == len(set(map(id, first))) == 4
    assert len(select_external(groups, 40, random.Random(7), UniformSelection())) == 10
    assert select_external(groups, 0, random.Random(7)) == []


def test_uniform_selection_covers_every_group() -> None:
    groups = [group(PEER.address, (0.0, 1.0)) for _ in range(6)]
    rng = random.Random(1)
    counts = Counter(id(g) for _ in range(600) for g in select_external(groups, 2, rng))
    assert len(counts) == 6 and min(counts.values()) > 120  # expected 200 each


def _verdict(peer: str, checked: int, agreed: int, reward_milli: int) -> PeerVerdict:
    reason = None if agreed == checked else RejectReason.REWARD_MISMATCH
    return PeerVerdict(
        peer,
        ROUND,
        b"\x01" * 32,
        reason,
        attestable=True,
        checked=checked,
        agreed=agreed,
        verified_reward_milli=reward_milli,
    )


def test_history_selection_prefers_peers_whose_claims_checked_out() -> None:
    strategy = VerifiedHistorySelection()
    strategy.record(
        [_verdict(PEER.address, 32, 32, 16_000), _verdict(OTHER.address, 32, 16, 16_000)]
    )
    assert strategy.weight(PEER.address) > 10 * strategy.weight(OTHER.address)
    groups = [group(PEER.address, (0.0, 1.0)) for _ in range(5)]
    groups += [group(OTHER.address, (0.0, 1.0)) for _ in range(5)]
    rng = random.Random(3)
    picked = Counter(g.peer for _ in range(300) for g in strategy.select(groups, 2, rng))
    assert picked[PEER.address] > 4 * picked[OTHER.address]


def test_history_selection_ignores_unattestable_verdicts_and_weighs_unknown_peers() -> None:
    strategy = VerifiedHistorySelection(unknown_weight=0.5)
    strategy.record([PeerVerdict(PEER.address, ROUND, b"\x01" * 32, RejectReason.FETCH_TIMEOUT)])
    assert strategy.weight(PEER.address) == 0.5
    strategy.record([_verdict(PEER.address, 8, 8, 0)])
    assert strategy.weight(PEER.address) == strategy.reward_floor  # agreed, but reward 0

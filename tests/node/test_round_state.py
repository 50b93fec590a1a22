"""The node's protocol state file and the store retry: round trips, damage, pruning, backoff."""

from __future__ import annotations

from pathlib import Path

import pytest

from node.chain.models import VerdictItem
from node.chain.rpc import RetryPolicy
from node.round.errors import StateError
from node.round.retry import retry_store
from node.round.state import (
    STATE_FILE,
    Ballot,
    ChainIdentity,
    Judged,
    NodeState,
    OwnBatch,
    load_state,
    save_state,
)
from node.storage import NotFound, StoreUnavailable

PEER = "0x70997970C51812dc3A010C7d01b50e0d17dc79C8"
OTHER = "0x3C44CdDdB6a900fa2b585dd299e03d12FA4293BC"
IDENTITY = ChainIdentity(
    chain_id=31337,
    coordinator="0x5FbDB2315678afecb367f032d93F642f64180aa3",
    deployment_block_hash="0x" + "ab" * 32,
)


def full_state() -> NodeState:
    state = NodeState(peer=PEER, chain=IDENTITY, last_round=7)
    for r in (5, 6, 7):
        state.batches[r] = OwnBatch(
            round=r, digest=bytes([r]) * 32, groups=4, completions=16, reward_sum=r * 100,
            published=r < 7,
        )  # fmt: skip
        state.record(r, OTHER, Judged(checked=4, agreed=3 if r == 6 else 4, verified_reward_sum=2))
    item = VerdictItem(subject=OTHER, checked=4, agreed=3, verified_reward_sum=2000)
    state.ballots[5] = Ballot(round=5, items=[item], salt=b"\x09" * 32, committed=True)
    state.abstained.append(4)
    state.flags.append((3, OTHER))
    return state


def test_the_state_survives_a_save_and_load(tmp_path: Path) -> None:
    state = full_state()
    save_state(tmp_path, state)
    loaded = load_state(tmp_path)
    assert loaded == state
    assert loaded.batches[5].digest == b"\x05" * 32 and not loaded.batches[7].published
    assert loaded.verdict(6, OTHER).agreed == 3 and loaded.verdict(6, PEER) is None
    assert loaded.ballots[5].salt == b"\x09" * 32 and loaded.ballots[5].items[0].is_flag
    assert loaded.decided(5) and loaded.decided(4) and not loaded.decided(6)
    assert list(tmp_path.iterdir()) == [tmp_path / STATE_FILE]  # no temporary file left


def test_no_state_file_means_a_fresh_node(tmp_path: Path) -> None:
    assert load_state(tmp_path) is None


@pytest.mark.parametrize("damage", ["{not json", '{"format": "swarm.node-state/1"}', ""])
def test_a_damaged_state_file_is_an_error_that_says_what_to_do(tmp_path: Path, damage: str) -> None:
    (tmp_path / STATE_FILE).write_text(damage)
    with pytest.raises(StateError, match="move it aside"):
        load_state(tmp_path)


def test_prune_forgets_rounds_nothing_can_be_done_with_but_keeps_flags() -> None:
    state = full_state()
    state.prune(6)
    assert sorted(state.batches) == [6, 7] and sorted(state.judged) == [6, 7]
    assert state.ballots == {} and state.abstained == []
    assert state.flags == [(3, OTHER)]  # until settled and resolved


def test_a_v1_state_file_is_refused_with_what_to_do(tmp_path: Path) -> None:
    (tmp_path / STATE_FILE).write_text('{"format": "swarm.node-state/1", "pending": []}')
    with pytest.raises(StateError, match="protocol v2.*move it aside"):
        load_state(tmp_path)


FAST = RetryPolicy(attempts=3, initial_delay=0.01, max_delay=0.01)


def test_a_transient_store_failure_is_retried_until_it_succeeds() -> None:
    failures = [StoreUnavailable("down"), StoreUnavailable("still down")]
    slept: list[float] = []

    def flaky() -> bytes:
        if failures:
            raise failures.pop(0)
        return b"ok"

    assert retry_store(flaky, what="put", policy=FAST, sleep=slept.append) == b"ok"
    assert len(slept) == 2


def test_store_retries_give_up_and_permanent_errors_are_not_retried() -> None:
    calls: list[int] = []

    def down() -> bytes:
        calls.append(1)
        raise StoreUnavailable("down")

    with pytest.raises(StoreUnavailable):
        retry_store(down, what="put", policy=FAST, sleep=lambda s: None)
    assert len(calls) == 3

    def missing() -> bytes:
        calls.append(1)
        raise NotFound("no such blob")

    with pytest.raises(NotFound):
        retry_store(missing, what="get", policy=FAST, sleep=lambda s: None)
    assert len(calls) == 4

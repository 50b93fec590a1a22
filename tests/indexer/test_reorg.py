"""Reorgs produced on the real Anvil: blocks replaced (``anvil_reorg``, snapshot/revert plus new
transactions) or removed (``anvil_rollback``). After each, the indexer's tables must equal those of
a fresh indexer that only ever saw the final chain; a reorg deeper than the kept window must stop
ingestion without touching the database.

Each test reverts its chain to the ``chain`` fixture's snapshot afterwards as usual: the reorgs
here only replace blocks above that snapshot.
"""

from __future__ import annotations

import pytest
from sqlalchemy import select

from coordinator_indexer import schema
from coordinator_indexer.errors import ReorgTooDeep
from node.chain.committee import ballot_commitment, new_salt
from node.chain.models import VerdictItem
from tests.indexer.scenario import (
    CLAIMS,
    EXPECTED_VERIFIED,
    NAMES,
    commit_all,
    digest,
    play,
    publish_round,
    reveal_all,
    settle_all,
)

pytestmark = pytest.mark.integration


def tables(store) -> dict:
    """Everything but the kept block hashes (which depend on the history of polls)."""
    dump = store.dump()
    dump.pop("blocks")
    return dump


def claims(store) -> dict[str, int]:
    with store.engine.connect() as conn:
        return {row.name: row.claimed_milli for row in conn.execute(select(schema.peers))}


def verified(store) -> dict[str, int]:
    with store.engine.connect() as conn:
        return {row.name: row.verified_milli for row in conn.execute(select(schema.peers))}


def sync_kinds(indexer) -> list[str]:
    kinds: list[str] = []
    indexer.sync(on_step=lambda result: kinds.append(result.kind))
    return kinds


def test_blocks_replaced_by_other_transactions_are_rolled_back_and_reapplied(
    chain, client_for, dev_accounts, make_indexer
) -> None:
    swarm = play(chain, client_for, dev_accounts[1:], phases=0)  # six peers registered
    chain.warp_to_round(swarm.round)
    before_publishing = chain.snapshot()
    publish_round(swarm.clients, swarm.round, 0)
    indexer = make_indexer(confirmations=20)
    indexer.sync()
    assert claims(indexer.store)["carol"] == CLAIMS["carol"][0]
    old_head = chain.w3.eth.block_number

    chain.revert(before_publishing)  # the four publications never happened...
    for name, reward in (("alice", 1111), ("carol", 2222)):  # ...these did, in other blocks
        account = dev_accounts[1 + list(swarm.clients).index(name)]
        client_for(account).publish_rollouts(
            swarm.round, digest(name, swarm.round, "other"), groups=1, completions=8,
            reward_sum=reward,
        )  # fmt: skip
    assert chain.w3.eth.block_number < old_head

    kinds = sync_kinds(indexer)
    assert kinds[0] == "reorg"
    assert claims(indexer.store) == {
        **{name: 0 for name in NAMES},
        "alice": 1111,
        "carol": 2222,
    }
    fresh = make_indexer(confirmations=20)
    fresh.sync()
    assert tables(indexer.store) == tables(fresh.store)


def test_changed_votes_recompute_verdicts_duty_and_peers(
    chain, client_for, dev_accounts, make_indexer
) -> None:
    """The seals, commits and reveals replaced by others: seal weights, votes, verdicts and
    duty are those of the new chain."""
    snapshots: dict[int, str] = {}
    swarm = play(
        chain,
        client_for,
        dev_accounts[1:],
        phases=4,
        between=lambda phase: snapshots.setdefault(phase, chain.snapshot()),
    )
    indexer = make_indexer(confirmations=60)
    indexer.sync()
    assert verified(indexer.store)["carol"] == 1200 + 8000  # flagged, not settled yet

    chain.revert(snapshots[1])  # back to before the seals and the commits
    fresh_clients = {name: client_for(c.sender.account) for name, c in swarm.clients.items()}
    r, carol = swarm.round, swarm.address("carol")
    chain.warp_to_round(r + 3)
    fresh_clients["erin"].seal_round(r)
    item = VerdictItem(subject=carol, checked=8, agreed=8, verified_reward_sum=9000)
    salts = {name: new_salt() for name in ("alice", "bob")}
    for name in salts:  # this time two peers vouch for carol's 9.0 and nothing else
        commitment = ballot_commitment(swarm.address(name), r, [item], salts[name])
        fresh_clients[name].commit_verdicts(r, commitment)
    chain.warp_to_round(r + 5)
    for name in salts:
        fresh_clients[name].reveal_verdicts(r, [item], salts[name])
    chain.mine(5)
    assert "reorg" in sync_kinds(indexer)
    with indexer.store.engine.connect() as conn:
        peers = {row.name: row for row in conn.execute(select(schema.peers))}
        (carol_batch,) = conn.execute(
            select(schema.publications).where(
                schema.publications.c.peer == carol, schema.publications.c.round == r
            )
        ).all()
        duties = conn.execute(select(schema.duties)).all()
    assert (carol_batch.attestations, carol_batch.flags, carol_batch.verified_milli) == (2, 0, 9000)
    assert peers["carol"].verified_milli == 9000 and peers["alice"].verified_milli == 0
    assert peers["alice"].attestations_given == 1
    assert {row.round for row in duties} == {r}  # round r+1 is no longer sealed
    fresh = make_indexer(confirmations=60)
    fresh.sync()
    assert tables(indexer.store) == tables(fresh.store)


def test_anvil_reorg_replacing_the_last_blocks_is_repaired(
    chain, client_for, dev_accounts, make_indexer
) -> None:
    play(chain, client_for, dev_accounts[1:], phases=2)  # registrations, two rounds published
    indexer = make_indexer(confirmations=10)
    indexer.sync()
    assert indexer.store.counts()["publications"] == 8
    head = chain.w3.eth.block_number

    chain.rpc("anvil_reorg", 3, [])  # the last three blocks (three publications) replaced
    assert chain.w3.eth.block_number == head
    kinds = sync_kinds(indexer)
    assert kinds[0] == "reorg"
    state = indexer.store.state()
    assert state.cursor_block == head
    assert state.cursor_hash == "0x" + bytes(chain.w3.eth.get_block(head)["hash"]).hex()
    fresh = make_indexer(confirmations=10)
    fresh.sync()
    assert tables(indexer.store) == tables(fresh.store)
    assert indexer.store.counts()["publications"] == fresh.store.counts()["publications"] == 5


def test_anvil_rollback_removes_rows_then_new_blocks_apply(
    chain, client_for, dev_accounts, make_indexer
) -> None:
    swarm = play(chain, client_for, dev_accounts[1:], phases=1)
    indexer = make_indexer(confirmations=10)
    indexer.sync()
    assert indexer.store.counts()["publications"] == 4

    chain.rpc("anvil_rollback", 2)  # dave's and carol's publications are gone, head is lower
    kinds = sync_kinds(indexer)
    assert kinds[0] == "reorg"
    assert indexer.store.counts()["publications"] == 2
    assert indexer.store.state().cursor_block == chain.w3.eth.block_number

    client_for(dev_accounts[4]).publish_rollouts(  # dave publishes again, differently
        swarm.round, digest("dave", swarm.round, "again"), groups=2, completions=16, reward_sum=77
    )
    indexer.sync()
    assert claims(indexer.store)["dave"] == 77 and claims(indexer.store)["carol"] == 0
    assert claims(indexer.store)["alice"] == CLAIMS["alice"][0]
    fresh = make_indexer(confirmations=10)
    fresh.sync()
    assert tables(indexer.store) == tables(fresh.store)


def test_a_reorg_deeper_than_the_window_stops_and_changes_nothing(
    chain, client_for, dev_accounts, make_indexer
) -> None:
    play(chain, client_for, dev_accounts[1:], phases=2)
    indexer = make_indexer(confirmations=2)
    indexer.sync()
    kept = [b.number for b in indexer.store.kept_blocks()]
    head = chain.w3.eth.block_number
    assert kept == [head, head - 1, head - 2]  # the unconfirmed window and the newest final block
    before = indexer.store.dump()

    chain.rpc("anvil_reorg", 6, [])
    with pytest.raises(ReorgTooDeep, match="re-index into a new database|Re-index") as caught:
        indexer.step()
    assert caught.value.oldest_kept == head - 2
    assert indexer.store.dump() == before


def test_votes_applied_in_a_later_range_update_earlier_batches(
    chain, client_for, dev_accounts, make_indexer
) -> None:
    """Derived rows of old rounds change when their seals, votes and settlements arrive ranges
    later."""
    indexer = make_indexer(confirmations=3)
    swarm = play(chain, client_for, dev_accounts[1:], phases=2, between=lambda _: indexer.sync())
    chain.warp_to_round(swarm.round + 3)
    commit_all(swarm)
    chain.warp_to_round(swarm.round + 5)
    reveal_all(swarm)
    chain.warp_to_round(swarm.round + 7)
    settle_all(swarm)
    chain.mine(5)
    indexer.sync()
    assert verified(indexer.store) == EXPECTED_VERIFIED

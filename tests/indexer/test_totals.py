"""The leaderboard totals kept with each peer (derive, "Leaderboard totals"): rank, duty seats,
done and missed, pending batches. Kept up to date as rows are applied, as the indexed round moves
without a new event, and through reorgs, they must equal both a fresh index of the final chain and
the totals worked out here from the event-derived tables directly (the aggregation the leaderboard
used to run on every request), on SQLite and Postgres.
"""

from __future__ import annotations

import pytest
from sqlalchemy import select, text

from coordinator_indexer import schema
from coordinator_indexer.store import Store
from tests.indexer.postgres import postgres_server, postgres_url  # noqa: F401 - fixtures
from tests.indexer.scenario import play
from tests.indexer.test_reorg import tables

pytestmark = pytest.mark.integration

KEPT = ("rank", "duty_seats", "duty_done", "duty_missed", "pending_batches")


def kept_totals(store: Store) -> dict[str, tuple[int, ...]]:
    with store.engine.connect() as conn:
        rows = conn.execute(select(schema.peers)).all()
    return {row.address: tuple(getattr(row, column) for column in KEPT) for row in rows}


def worked_out_totals(store: Store) -> dict[str, tuple[int, ...]]:
    """The same totals from the publications and duties tables and the cursor, in plain Python."""
    state = store.state()
    closed = state.closed_before(state.genesis, state.round_duration)
    with store.engine.connect() as conn:
        peers = conn.execute(select(schema.peers)).all()
        batches = conn.execute(select(schema.publications)).all()
        duties = conn.execute(select(schema.duties)).all()
    order = sorted(
        peers, key=lambda p: (-p.verified_milli, -p.claimed_milli, int(p.address, 16))
    )
    rank = {peer.address: position for position, peer in enumerate(order, start=1)}
    totals = {}
    for peer in peers:
        own = [d for d in duties if d.peer == peer.address]
        missed = sum(d.seats - d.done for d in own if closed is not None and d.round < closed)
        pending = sum(
            1
            for b in batches
            if b.peer == peer.address
            and not b.settled
            and (closed is None or b.round >= closed or b.flags > 0)
        )
        seats, done = sum(d.seats for d in own), sum(d.done for d in own)
        totals[peer.address] = (rank[peer.address], seats, done, missed, pending)
    return totals


def assert_as_rebuilt(store: Store) -> None:
    """The derived rows, kept up to date range by range, equal a rebuild from the event tables
    (``Store.rebuild``: every key recomputed from scratch)."""
    kept = tables(store)
    store.rebuild()
    assert tables(store) == kept


def assert_totals_hold(store: Store, make_indexer, confirmations: int) -> None:
    """The kept totals equal the plain recount, and a fresh index of the chain holds the same."""
    fresh = make_indexer(confirmations=confirmations)
    fresh.sync()
    kept = kept_totals(store)
    assert kept == worked_out_totals(store)
    assert kept == kept_totals(fresh.store)
    assert tables(store) == tables(fresh.store)


@pytest.fixture(params=["sqlite", "postgres"])
def database_url(request, sqlite_url):
    if request.param == "postgres":
        return request.getfixturevalue("postgres_url")
    return sqlite_url("totals")


def test_totals_follow_each_phase_and_the_indexed_round(
    chain, client_for, dev_accounts, make_indexer, database_url
) -> None:
    """Synced after every phase of the scenario and after the reveal phase ends with no new
    event: seats turn into missed duty and unsettled batches stop being pending only as the
    cursor's round moves, and the kept totals say so each time."""
    indexer = make_indexer(database_url, confirmations=2)
    seen = []

    def synced(phase: int) -> None:
        indexer.sync()
        seen.append(kept_totals(indexer.store))
        assert kept_totals(indexer.store) == worked_out_totals(indexer.store)
        assert_as_rebuilt(indexer.store)

    swarm = play(chain, client_for, dev_accounts[1:], phases=4, between=synced)
    missed_at_reveal = sum(t[3] for t in seen[-1].values())
    chain.warp_to_round(swarm.round + 9)  # past both rounds' reveal phases: nothing new happens
    chain.mine(2)
    indexer.sync()
    after = kept_totals(indexer.store)
    assert after == worked_out_totals(indexer.store)
    assert sum(t[3] for t in after.values()) > missed_at_reveal  # unrevealed seats now missed
    assert sum(t[4] for t in after.values()) < sum(t[4] for t in seen[-1].values())
    assert sorted(t[0] for t in after.values()) == list(range(1, len(after) + 1))
    assert_totals_hold(indexer.store, make_indexer, confirmations=2)


def test_one_block_per_range_equals_a_rebuild(
    chain, client_for, dev_accounts, make_indexer, database_url
) -> None:
    """Every block its own range, read ahead or in line: every derived row moved forward one
    block at a time (``advance``) equals a rebuild, after each phase and at the end."""
    indexers = [
        make_indexer(database_url, max_range=1, read_ahead=1, max_events=1),
        make_indexer(max_range=1, read_ahead=0),
    ]

    def synced(phase: int) -> None:
        for indexer in indexers:
            indexer.sync()
            assert_as_rebuilt(indexer.store)

    swarm = play(chain, client_for, dev_accounts[1:], between=synced)
    chain.warp_to_round(swarm.round + 9)
    chain.mine(2)
    synced(-1)
    assert tables(indexers[0].store) == tables(indexers[1].store)
    assert kept_totals(indexers[0].store) == worked_out_totals(indexers[0].store)


def test_batches_and_their_votes_in_one_range_equal_a_rebuild(
    chain, client_for, dev_accounts, make_indexer, database_url
) -> None:
    """Indexed once after the first publications, then everything else in one range: round
    r+1's batches arrive with their votes and settlements, which the range must not count as
    changes to batches that were there before."""
    indexer = make_indexer(database_url, read_ahead=0)

    def first_phase_only(phase: int) -> None:
        if phase == 0:
            indexer.sync()

    swarm = play(chain, client_for, dev_accounts[1:], between=first_phase_only)
    chain.warp_to_round(swarm.round + 9)
    chain.mine(2)
    kinds: list[str] = []
    indexer.sync(on_step=lambda result: kinds.append(result.kind))
    assert kinds == ["applied"]
    assert_totals_hold(indexer.store, make_indexer, confirmations=6)
    assert_as_rebuilt(indexer.store)


def test_totals_through_a_reorg_equal_a_fresh_index(
    chain, client_for, dev_accounts, make_indexer, database_url
) -> None:
    """The last reveals replaced by empty blocks, and the cursor's round moved back with them."""
    swarm = play(chain, client_for, dev_accounts[1:], phases=4)
    chain.warp_to_round(swarm.round + 9)
    chain.mine(2)
    indexer = make_indexer(database_url, confirmations=12)
    indexer.sync()
    before = kept_totals(indexer.store)
    chain.rpc("anvil_reorg", 6, [])  # the newest blocks, the last reveals among them, replaced
    kinds: list[str] = []
    indexer.sync(on_step=lambda result: kinds.append(result.kind))
    assert kinds[0] == "reorg"
    assert kept_totals(indexer.store) != before
    assert_totals_hold(indexer.store, make_indexer, confirmations=12)
    assert_as_rebuilt(indexer.store)


def test_migration_8_leaves_a_rank_and_the_next_run_keeps_the_totals(
    chain, client_for, dev_accounts, make_indexer, database_url
) -> None:
    """A version-7 database has no kept totals: migrated, every peer has a rank at once, and the
    indexer's next start computes the rest as a fresh index would."""
    play(chain, client_for, dev_accounts[1:])
    indexer = make_indexer(database_url)
    indexer.sync()
    expected = indexer.store.dump()
    with indexer.store.engine.begin() as conn:
        conn.execute(text("DROP INDEX ix_peers_rank"))
        for table, column in (
            ("peers", "rank"),
            ("peers", "duty_seats"),
            ("peers", "duty_done"),
            ("peers", "duty_missed"),
            ("peers", "pending_batches"),
            ("indexer_state", "genesis"),
            ("indexer_state", "round_duration"),
            ("indexer_state", "totals_closed_before"),
            ("indexer_state", "state_version"),  # migration 9's
        ):
            conn.execute(text(f"ALTER TABLE {table} DROP COLUMN {column}"))
        conn.execute(text("DELETE FROM schema_migrations WHERE version >= 8"))
    indexer.store.close()

    store = Store.open(database_url)  # migrated, not yet started by an indexer
    try:
        assert store.state().totals_closed_before is None
        assert all(totals[0] is not None for totals in kept_totals(store).values())
    finally:
        store.close()
    again = make_indexer(database_url)
    assert again.store.dump() == expected

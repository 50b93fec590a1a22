"""The store on both databases: migrations, and the same chain giving the same rows on SQLite and
PostgreSQL (ingestion, reorg repair and the API through the very same code)."""

from __future__ import annotations

import time

import pytest
import requests
from sqlalchemy import inspect, select, text

from coordinator_indexer import schema
from coordinator_indexer.errors import ConfigError, IndexerError
from coordinator_indexer.migrations import LATEST_VERSION, current_version, migrate
from coordinator_indexer.store import Store, create_db_engine
from node.chain.models import weighted_median_milli
from tests.indexer import schema_v3
from tests.indexer.postgres import postgres_server, postgres_url  # noqa: F401 - fixtures
from tests.indexer.scenario import TIE_CLAIMS, TIE_MEDIAN, play, play_tie, settle_tie
from tests.indexer.test_api import assert_out_of_range_input_is_a_422, caught_up
from tests.indexer.test_reorg import tables
from tests.waiting import wait_for

ETHER = 10**18


def test_weighted_median_rule() -> None:
    equal = [(value, 1) for value in (1000, 9000, 1200)]
    assert weighted_median_milli([]) is None
    assert weighted_median_milli([(7, ETHER)]) == 7
    assert weighted_median_milli(equal) == 1200  # equal weights: the plain median
    assert weighted_median_milli([(6000, 5), (5800, 5)]) == 5900  # exactly half: the mean
    assert weighted_median_milli([(-3, 1), (0, 1)]) == -2  # floored, also below zero
    # stake decides: 2 ETH of honest values outweigh 1 ETH lying high and 1 ETH lying low
    lying = [(5000, 2 * ETHER), (100, ETHER), (9000, ETHER)]
    assert weighted_median_milli(lying) == 5000
    assert weighted_median_milli([(1000, 2), (1200, 2), (9000, 1)]) == 1200
    assert weighted_median_milli([(5, 0)]) is None  # no weight, no median


def test_migrations_are_recorded_and_idempotent(sqlite_url) -> None:
    url = sqlite_url()
    store = Store.open(url)
    assert current_version(store.engine) == LATEST_VERSION
    assert migrate(store.engine) == []
    with store.engine.connect() as conn:
        mode = conn.execute(text("PRAGMA journal_mode")).scalar()
    assert mode == "wal"
    store.close()


@pytest.mark.integration
def test_migration_2_renames_and_migration_4_recounts_verified_batches(
    chain, client_for, dev_accounts, make_indexer, sqlite_url
) -> None:
    """A version-1 database counted a peer's batches anyone attested (``verified_rounds``): carol's
    slashed batch counted. Opening it renames the column (2) and recounts it as verified (4)."""
    play(chain, client_for, dev_accounts[1:])
    url = sqlite_url("v1")
    indexer = make_indexer(url)
    indexer.sync()
    expected = indexer.store.dump()
    with indexer.store.engine.begin() as conn:  # back to the version-1 shape and meaning
        conn.execute(text("ALTER TABLE peers RENAME COLUMN verified_batches TO verified_rounds"))
        conn.execute(text("UPDATE peers SET verified_rounds = rounds"))
        conn.execute(text("DELETE FROM schema_migrations WHERE version >= 2"))
    indexer.store.close()

    store = Store.open(url)
    try:
        assert current_version(store.engine) == LATEST_VERSION
        assert store.dump() == expected
        with store.engine.connect() as conn:
            carol = conn.execute(
                text("SELECT rounds, verified_batches FROM peers WHERE name = 'carol'")
            ).one()
    finally:
        store.close()
    assert tuple(carol) == (2, 1)


def test_a_database_from_a_newer_indexer_is_refused(sqlite_url) -> None:
    url = sqlite_url()
    store = Store.open(url)
    with store.engine.begin() as conn:
        conn.execute(
            text("INSERT INTO schema_migrations VALUES (:v, 'from the future', 0)"),
            {"v": LATEST_VERSION + 1},
        )
    store.close()
    with pytest.raises(IndexerError, match="newer than this indexer"):
        Store.open(url)


V1_PEER = "0x" + "0a" * 20


def make_v3_database(url: str, *, with_rows: bool) -> None:
    """A database as the last release before protocol v2 left it (schema version 3)."""
    engine = create_db_engine(url)
    with engine.begin() as conn:
        schema_v3.metadata.create_all(conn)
        conn.execute(
            text(
                "CREATE TABLE schema_migrations (version INTEGER PRIMARY KEY, "
                "name VARCHAR(200) NOT NULL, applied_at BIGINT NOT NULL)"
            )
        )
        for version in (1, 2, 3):
            conn.execute(
                text("INSERT INTO schema_migrations VALUES (:v, 'v1 release', :t)"),
                {"v": version, "t": int(time.time())},
            )
        if with_rows:
            _v1_rows(conn)
    engine.dispose()


def _v1_rows(conn) -> None:
    position = {"block_number": 7, "log_index": 0, "tx_hash": "0x" + "ab" * 32}
    conn.execute(
        schema_v3.registrations.insert().values(
            peer=V1_PEER, name="old", stake_wei=str(ETHER), **position
        )
    )
    conn.execute(
        schema_v3.publications.insert().values(
            round=3,
            peer=V1_PEER,
            digest="0x" + "cd" * 32,
            groups=4,
            completions=32,
            claimed_milli=5000,
            relayer=None,
            attestations=3,
            agreements=2,
            flags=1,
            verified_milli=4900,
            settled=True,
            slashed=False,
            **position,
        )
    )
    conn.execute(schema_v3.peers.insert().values(
        address=V1_PEER, name="old", registered_block=7, status="active",
        stake_wei=str(ETHER), stake_gwei=10**9, withdrawable_at=None, rounds=1,
        verified_batches=0, claimed_milli=5000, verified_milli=4900, flags_received=1,
        attestations_given=0, slashes=0, slashed_wei="0", last_round=3))  # fmt: skip


@pytest.mark.parametrize("database", ["sqlite", "postgres"])
def test_migration_4_brings_a_v1_release_database_forward(sqlite_url, request, database) -> None:
    """Schema version 3 (protocol v1) -> 4: the v2 tables and columns appear, v1 rows stay with
    their meaning (a v1 batch's verified flag and outcome from its v1 columns), the v1-only
    tables stay untouched, and a second open changes nothing."""
    url = request.getfixturevalue("postgres_url") if database == "postgres" else sqlite_url()
    make_v3_database(url, with_rows=True)
    store = Store.open(url)
    try:
        assert current_version(store.engine) == LATEST_VERSION == 9
        names = set(inspect(store.engine).get_table_names())
        assert {t.name for t in schema.metadata.sorted_tables} <= names
        assert set(schema.LEGACY_TABLES) <= names
        with store.engine.connect() as conn:
            batch = conn.execute(select(schema.publications)).one()
            peer = conn.execute(select(schema.peers)).one()
        assert (batch.verified, batch.outcome, batch.verified_milli) == (True, "rejected", 4900)
        assert (batch.agree_weight_wei, batch.ignored) == ("0", 0)
        assert (peer.verified_batches, peer.verified_milli) == (1, 4900)
        before = store.dump()
        assert migrate(store.engine) == []
        assert store.dump() == before
    finally:
        store.close()


@pytest.mark.parametrize("database", ["sqlite", "postgres"])
def test_migration_5_counts_rewards_only_in_range(sqlite_url, request, database) -> None:
    """An older database summed every value: a claim of 10^12 (a billion reward) and a verified
    reward of 2^63 - 1 made their peer's totals. Migration 5 flags them out of range, no longer
    counts the batch as verified and recounts the totals without it."""
    url = request.getfixturevalue("postgres_url") if database == "postgres" else sqlite_url()
    make_v3_database(url, with_rows=True)
    engine = create_db_engine(url)
    with engine.begin() as conn:
        conn.execute(text(f"UPDATE publications SET claimed_milli = {10**12}"))
        conn.execute(text(f"UPDATE publications SET verified_milli = {2**63 - 1}"))
        conn.execute(text(f"UPDATE peers SET claimed_milli = {10**12}, verified_milli = 0"))
    engine.dispose()
    store = Store.open(url)
    try:
        with store.engine.connect() as conn:
            batch = conn.execute(select(schema.publications)).one()
            peer = conn.execute(select(schema.peers)).one()
        before = store.dump()
        assert migrate(store.engine) == []
        assert store.dump() == before
    finally:
        store.close()
    assert (batch.reward_max_milli, batch.claimed_in_range, batch.verified_in_range) == (
        2_048_000,
        False,
        False,
    )
    assert (batch.verified, peer.verified_batches) == (False, 0)
    assert (peer.claimed_milli, peer.verified_milli, peer.out_of_range_batches) == (0, 0, 1)


def back_to_version_5(engine, sam: str, oli: str) -> None:
    """The tie's database as schema version 5 left it: no settlements.outcome (the tie kept as
    not slashed, so rejected: verified with its median), no n and G in the rules, every batch
    judged by the protocol's bound (oli's claim of 16,001 in range), and the totals of that."""
    bound = 2_048_000
    with engine.begin() as conn:
        for table, column in (
            ("settlements", "outcome"),
            ("rules", "tasks_per_round"),
            ("rules", "group_size"),
        ):
            conn.execute(text(f"ALTER TABLE {table} DROP COLUMN {column}"))
        conn.execute(
            text(
                "UPDATE publications SET reward_max_milli = :bound, claimed_in_range = true, "
                "verified_in_range = CASE WHEN verified_milli IS NULL THEN NULL ELSE true END"
            ),
            {"bound": bound},
        )
        conn.execute(
            text(
                "UPDATE publications SET outcome = 'rejected', verified = true, "
                "verified_milli = :median WHERE peer = :sam"
            ),
            {"median": TIE_MEDIAN, "sam": sam},
        )
        conn.execute(
            text("UPDATE peers SET verified_milli = :m, verified_batches = 1 WHERE address = :p"),
            {"m": TIE_MEDIAN, "p": sam},
        )
        conn.execute(
            text(
                "UPDATE peers SET claimed_milli = :c, out_of_range_batches = 0 WHERE address = :p"
            ),
            {"c": TIE_CLAIMS["oli"], "p": oli},
        )
        conn.execute(
            text(
                "UPDATE rounds SET verified_milli = :m, claimed_milli = :c, "
                "out_of_range_batches = 0"
            ),
            {"m": TIE_MEDIAN, "c": sum(TIE_CLAIMS.values())},
        )
        conn.execute(text("DELETE FROM schema_migrations WHERE version >= 6"))


@pytest.mark.integration
@pytest.mark.parametrize("database", ["sqlite", "postgres"])
def test_migration_6_settles_a_tie_inconclusive_and_the_indexer_reads_n_and_g_again(
    chain, client_for, dev_accounts, make_indexer, sqlite_url, request, database
) -> None:
    """A version-5 database took the tie (scenario.play_tie) for rejected and counted its median,
    and judged every batch by the protocol's bound. Migration 6 works the outcome out from the
    settlement's weights (inconclusive: not verified, 0) and recounts the totals; the indexer then
    reads n and G from the ParametersScheduled log again, and the database is what a new index of
    the chain gives."""
    url = request.getfixturevalue("postgres_url") if database == "postgres" else sqlite_url("v5")
    swarm = play_tie(chain, client_for, dev_accounts[1:])
    settle_tie(swarm)
    indexer = make_indexer(url)
    indexer.sync()
    expected = indexer.store.dump()
    sam, oli = swarm.address("sam"), swarm.address("oli")
    back_to_version_5(indexer.store.engine, sam, oli)
    indexer.store.close()

    store = Store.open(url)  # migrated, not yet prepared: n and G are still unknown
    try:
        assert current_version(store.engine) == LATEST_VERSION == 9
        with store.engine.connect() as conn:
            (settled,) = conn.execute(select(schema.settlements)).all()
            rules = conn.execute(select(schema.rules)).all()
            batches = {row.peer: row for row in conn.execute(select(schema.publications))}
            peers = {row.address: row for row in conn.execute(select(schema.peers))}
    finally:
        store.close()
    assert (settled.outcome, settled.slashed) == (4, False)
    assert [(row.tasks_per_round, row.group_size) for row in rules] == [(None, None)]
    assert (batches[sam].outcome, batches[sam].verified, batches[sam].verified_milli) == (
        "inconclusive",
        False,
        0,
    )
    assert (peers[sam].verified_milli, peers[sam].verified_batches) == (0, 0)
    assert batches[oli].reward_max_milli == 2_048_000 and batches[oli].claimed_in_range

    prepared = make_indexer(url)  # reads the deployment's ParametersScheduled again
    assert prepared.store.dump() == expected
    with prepared.store.engine.connect() as conn:
        (rules,) = conn.execute(select(schema.rules)).all()
    assert (rules.tasks_per_round, rules.group_size) == (4, 4)


@pytest.mark.integration
@pytest.mark.parametrize("database", ["sqlite", "postgres"])
def test_a_migrated_database_indexes_v2_like_a_new_one(
    chain, client_for, dev_accounts, make_indexer, sqlite_url, request, database
) -> None:
    url = request.getfixturevalue("postgres_url") if database == "postgres" else sqlite_url("v3")
    make_v3_database(url, with_rows=False)
    play(chain, client_for, dev_accounts[1:])
    migrated = make_indexer(url)
    migrated.sync()
    fresh = make_indexer()
    fresh.sync()
    assert tables(migrated.store) == tables(fresh.store)
    assert migrated.store.state().judging_rounds == 5


@pytest.mark.parametrize(
    ("url", "message"),
    [
        ("sqlite://", "in-memory SQLite"),
        ("mysql://u@h/x", "unsupported database"),
        ("not a url", "not a database URL"),
        ("postgresql://nobody:s3cret@127.0.0.1:1/none", "cannot open the database"),
    ],
)
def test_unusable_database_urls_are_config_errors(url, message) -> None:
    with pytest.raises(ConfigError, match=message) as caught:
        Store.open(url)
    assert "s3cret" not in str(caught.value)


@pytest.mark.integration
def test_postgres_holds_the_same_rows_as_sqlite(
    chain,
    client_for,
    dev_accounts,
    make_indexer,
    postgres_url,  # noqa: F811 - fixture
) -> None:
    play(chain, client_for, dev_accounts[1:])
    on_postgres = make_indexer(postgres_url, max_range=3)
    on_postgres.sync()
    on_sqlite = make_indexer(max_range=3)
    on_sqlite.sync()
    assert on_postgres.store.dump() == on_sqlite.store.dump()
    assert on_postgres.store.counts()["votes"] == 25
    assert on_postgres.store.counts()["duties"] == 12
    assert current_version(on_postgres.store.engine) == LATEST_VERSION


@pytest.mark.integration
def test_postgres_reorg_repair(
    chain,
    client_for,
    dev_accounts,
    make_indexer,
    postgres_url,  # noqa: F811 - fixture
) -> None:
    play(chain, client_for, dev_accounts[1:], phases=4)  # through the reveals
    indexer = make_indexer(postgres_url, confirmations=10)
    indexer.sync()
    assert indexer.store.counts()["votes"] == 25
    chain.rpc("anvil_reorg", 4, [])  # the last four reveals replaced by empty blocks
    kinds: list[str] = []
    indexer.sync(on_step=lambda result: kinds.append(result.kind))
    assert kinds[0] == "reorg"
    fresh = make_indexer(confirmations=10)
    fresh.sync()
    assert tables(indexer.store) == tables(fresh.store)
    assert indexer.store.counts()["votes"] < 25


@pytest.mark.integration
def test_the_api_serves_from_postgres(
    chain,
    client_for,
    dev_accounts,
    deployment,
    tmp_path,
    postgres_url,  # noqa: F811
) -> None:
    from coordinator_indexer.ingest import IngestSettings
    from coordinator_indexer.service import IndexerService, ServiceSettings

    swarm = play(chain, client_for, dev_accounts[1:])
    settings = ServiceSettings(
        rpc_url=chain.w3.provider.endpoint_uri,
        deployment=deployment.save(tmp_path / "deployment.json"),
        db_url=postgres_url,
        port=0,
        ingest=IngestSettings(confirmations=6, poll_interval=0.05),
    )
    with IndexerService(settings) as service:
        head = chain.w3.eth.block_number
        wait_for(lambda: caught_up(service, head), what="the indexer on Postgres")
        board = requests.get(service.url + "api/leaderboard", timeout=10).json()
        stats = requests.get(service.url + "api/stats", timeout=10).json()
        assert_out_of_range_input_is_a_422(service)
    names = swarm.names_by_address()
    assert [names[e["address"]] for e in board["entries"]] == swarm.ranking()
    assert stats["verified_batches"] == 7 and stats["batches"] == 8
    assert sum(e["verified_batches"] for e in board["entries"]) == 7


def test_migration_7_adds_the_evidence_table_and_each_batchs_count(sqlite_url) -> None:
    """Schema version 6 -> 7: the ``evidence`` table and ``publications.evidence`` (0 for every
    batch: no older database holds a ProvenanceEvidence) appear; the batches stay."""
    url = sqlite_url()
    store = Store.open(url)
    with store.engine.begin() as conn:
        conn.execute(
            schema.publications.insert().values(
                round=3, peer="0x" + "11" * 20, digest="0x" + "22" * 32, groups=1, completions=2,
                claimed_milli=500, block_number=9, log_index=0, tx_hash="0x" + "33" * 32,
            )
        )  # fmt: skip
        conn.execute(text("DROP TABLE evidence"))
        conn.execute(text("ALTER TABLE publications DROP COLUMN evidence"))
        conn.execute(text("DELETE FROM schema_migrations WHERE version >= 7"))
    store.close()

    store = Store.open(url)
    try:
        assert current_version(store.engine) == LATEST_VERSION == 9
        assert "evidence" in inspect(store.engine).get_table_names()
        with store.engine.connect() as conn:
            (batch,) = conn.execute(select(schema.publications)).all()
        assert (batch.round, batch.claimed_milli, batch.evidence) == (3, 500, 0)
    finally:
        store.close()

"""The store on both databases: migrations, and the same chain giving the same rows on SQLite and
PostgreSQL (ingestion, reorg repair and the API through the very same code)."""

from __future__ import annotations

import pytest
import requests
from sqlalchemy import text

from node.chain.models import median_milli
from coordinator_indexer.errors import ConfigError, IndexerError
from coordinator_indexer.migrations import LATEST_VERSION, current_version, migrate
from coordinator_indexer.store import Store
from tests.indexer.postgres import postgres_server, postgres_url  # noqa: F401 - fixtures
from tests.indexer.scenario import EXPECTED_RANKING, play
from tests.indexer.test_api import assert_out_of_range_input_is_a_422, caught_up
from tests.waiting import wait_for
from tests.indexer.test_reorg import tables


def test_median_rule() -> None:
    assert median_milli([]) is None
    assert median_milli([7]) == 7
    assert median_milli([1000, 9000, 1200]) == 1200
    assert median_milli([6000, 5800]) == 5900
    assert median_milli([-3, 0]) == -2  # floored, also below zero


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
def test_migration_2_renames_and_recomputes_verified_batches(
    chain, client_for, dev_accounts, make_indexer, sqlite_url
) -> None:
    """A version-1 database counted a peer's batches anyone attested (``verified_rounds``): carol's
    slashed batch counted. Opening it renames the column and recomputes it as verified."""
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
    assert on_postgres.store.counts()["attestations"] == 21
    assert current_version(on_postgres.store.engine) == LATEST_VERSION


@pytest.mark.integration
def test_postgres_reorg_repair(
    chain,
    client_for,
    dev_accounts,
    make_indexer,
    postgres_url,  # noqa: F811 - fixture
) -> None:
    play(chain, client_for, dev_accounts[1:], phases=3)
    indexer = make_indexer(postgres_url, confirmations=10)
    indexer.sync()
    chain.rpc("anvil_reorg", 4, [])  # four attestation batches replaced by empty blocks
    kinds: list[str] = []
    indexer.sync(on_step=lambda result: kinds.append(result.kind))
    assert kinds[0] == "reorg"
    fresh = make_indexer(confirmations=10)
    fresh.sync()
    assert tables(indexer.store) == tables(fresh.store)
    assert indexer.store.counts()["attestations"] == 0


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
    assert [names[e["address"]] for e in board["entries"]] == EXPECTED_RANKING
    assert stats["verified_batches"] == 7 and stats["batches"] == 8
    assert sum(e["verified_batches"] for e in board["entries"]) == 7

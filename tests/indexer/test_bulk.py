"""Many rows through one statement (coordinator_indexer.bulk): the same rows as SQLAlchemy's own
executemany writes, defaults included, on SQLite (positional parameters) and Postgres (named)."""

from __future__ import annotations

import pytest
from sqlalchemy import bindparam, select

from coordinator_indexer import schema
from coordinator_indexer.bulk import execute_many
from coordinator_indexer.store import Store
from tests.indexer.postgres import postgres_server, postgres_url  # noqa: F401 - fixtures

pytestmark = pytest.mark.integration


@pytest.fixture(params=["sqlite", "postgres"])
def store(request, sqlite_url, open_store) -> Store:
    url = request.getfixturevalue("postgres_url") if request.param == "postgres" else sqlite_url()
    return open_store(url)


def publication(round_: int, peer: str, claimed: int) -> dict:
    """A publication row with only the event's columns: the verdict columns take their defaults."""
    return {
        "block_number": round_,
        "log_index": int(peer[-1], 16),
        "tx_hash": "0x" + "ab" * 32,
        "round": round_,
        "peer": peer,
        "digest": "0x" + "cd" * 32,
        "groups": 4,
        "completions": 16,
        "claimed_milli": claimed,
        "relayer": peer,
        "verified_milli": None,
        "outcome": None,
        "verified_in_range": None,
    }


def rows(store: Store) -> list[dict]:
    with store.engine.connect() as conn:
        query = select(schema.publications).order_by(schema.publications.c.peer)
        return [row._asdict() for row in conn.execute(query)]


def test_rows_and_defaults_are_written_as_sqlalchemy_writes_them(store, open_store, sqlite_url):
    batch = [publication(3, f"0x{i:040x}", 1000 * i) for i in range(1, 6)]
    with store.engine.begin() as conn:
        execute_many(conn, schema.publications.insert(), batch)
    reference = open_store(sqlite_url("reference"))
    with reference.engine.begin() as conn:
        conn.execute(schema.publications.insert(), batch)
    assert rows(store) == rows(reference)
    assert {row["evidence"] for row in rows(store)} == {0}  # a column's default
    assert {row["claimed_milli"] for row in rows(store)} == {1000, 2000, 3000, 4000, 5000}


def test_an_update_by_named_parameters_moves_each_row_by_its_own(store):
    p = schema.publications
    with store.engine.begin() as conn:
        execute_many(conn, p.insert(), [publication(3, f"0x{i:040x}", 100) for i in range(1, 4)])
        add = p.update().where(p.c.peer == bindparam("k_peer"))
        add = add.values(claimed_milli=p.c.claimed_milli + bindparam("d_claimed"))
        execute_many(
            conn, add, [{"k_peer": f"0x{i:040x}", "d_claimed": 10 * i} for i in range(1, 4)]
        )
        execute_many(conn, add, [])  # nothing to do: no statement
    assert [row["claimed_milli"] for row in rows(store)] == [110, 120, 130]

"""Versioned schema migrations: a ``schema_migrations`` table lists what was applied, and
``migrate`` applies the missing steps in order, each in its own transaction.

A step is a function of a connection. Step 1 creates the tables of the current ``schema``; a later
change to the schema adds a step (``ALTER TABLE ...``) that brings a database made by an older
release forward and leaves one that step 1 just created as it is, so fresh and upgraded databases
end up alike and none is ever recreated. A database newer than this software is refused: silently
serving a schema it does not understand would be worse.
"""

from __future__ import annotations

import time
from collections.abc import Callable

from sqlalchemy import (
    BigInteger,
    Column,
    Connection,
    Engine,
    Integer,
    MetaData,
    String,
    Table,
    inspect,
    text,
)

from coordinator_indexer import schema
from coordinator_indexer.derive import recompute_all_peers
from coordinator_indexer.errors import IndexerError

_bookkeeping = MetaData()
schema_migrations = Table(
    "schema_migrations",
    _bookkeeping,
    Column("version", Integer, primary_key=True),
    Column("name", String(200), nullable=False),
    Column("applied_at", BigInteger, nullable=False),
)


def _create_v1_tables(conn: Connection) -> None:
    schema.metadata.create_all(conn, checkfirst=True)


def _verified_batches(conn: Connection) -> None:
    """peers.verified_rounds (batches anyone attested) becomes verified_batches (derive.is_verified,
    the definition /api/stats uses), recomputed for every peer."""
    columns = {column["name"] for column in inspect(conn).get_columns("peers")}
    if "verified_rounds" in columns:
        conn.execute(text("ALTER TABLE peers RENAME COLUMN verified_rounds TO verified_batches"))
    recompute_all_peers(conn)


def _endpoints(conn: Connection) -> None:
    """The table of EndpointAnnounced events (an older indexer's ABI did not know the event, so
    there is nothing to move into it)."""
    schema.endpoints.create(conn, checkfirst=True)


#: (version, name, step), in order; versions are 1, 2, 3... with no gaps.
MIGRATIONS: tuple[tuple[int, str, Callable[[Connection], None]], ...] = (
    (1, "event tables, derived peers/rounds, cursor and block window", _create_v1_tables),
    (2, "peers.verified_batches: one definition of a verified batch", _verified_batches),
    (3, "endpoints: the store endpoints peers announced", _endpoints),
)
LATEST_VERSION = MIGRATIONS[-1][0]


def current_version(engine: Engine) -> int:
    """The highest applied migration (0 for an empty database)."""
    with engine.connect() as conn:
        if not engine.dialect.has_table(conn, schema_migrations.name):
            return 0
        versions = conn.execute(schema_migrations.select()).all()
    return max((row.version for row in versions), default=0)


def migrate(engine: Engine) -> list[int]:
    """Applies the missing migrations; returns the versions applied now (empty if up to date)."""
    with engine.begin() as conn:
        _bookkeeping.create_all(conn, checkfirst=True)
    found = current_version(engine)
    if found > LATEST_VERSION:
        raise IndexerError(
            f"the database has schema version {found}, newer than this indexer's "
            f"{LATEST_VERSION}: upgrade the indexer or use another database"
        )
    applied = []
    for version, name, step in MIGRATIONS:
        if version <= found:
            continue
        with engine.begin() as conn:
            step(conn)
            conn.execute(
                schema_migrations.insert().values(
                    version=version, name=name, applied_at=int(time.time())
                )
            )
        applied.append(version)
    return applied

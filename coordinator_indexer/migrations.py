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
from coordinator_indexer.errors import IndexerError
from coordinator_indexer.round_rules import PROTOCOL_MAX_BATCH_MILLI

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
    the definition /api/stats uses); step 4 recounts it (it needs step 4's columns)."""
    columns = {column["name"] for column in inspect(conn).get_columns("peers")}
    if "verified_rounds" in columns:
        conn.execute(text("ALTER TABLE peers RENAME COLUMN verified_rounds TO verified_batches"))


def _endpoints(conn: Connection) -> None:
    """The table of EndpointAnnounced events (an older indexer's ABI did not know the event, so
    there is nothing to move into it)."""
    schema.endpoints.create(conn, checkfirst=True)


#: Columns protocol v2 adds to tables of schema version 3: (table, column, NOT NULL default or None).
_V2_COLUMNS: tuple[tuple[str, str, str | None], ...] = (
    ("indexer_state", "judging_rounds", None),
    ("stake_changes", "counts_from_round", None),
    ("stake_changes", "exit_round", None),
    ("publications", "agree_weight_wei", "'0'"),
    ("publications", "flag_weight_wei", "'0'"),
    ("publications", "ignored", "0"),
    ("publications", "outcome", None),
    ("publications", "verified", "false"),
    ("rounds", "sealed", "false"),
    ("rounds", "seats", "0"),
    ("rounds", "seats_done", "0"),
)


def _add_column(conn: Connection, table: str, name: str, default: str | None) -> None:
    column = schema.metadata.tables[table].c[name]
    kind = column.type.compile(dialect=conn.dialect)
    tail = f" NOT NULL DEFAULT {default}" if default is not None else ""
    conn.execute(text(f"ALTER TABLE {table} ADD COLUMN {name} {kind}{tail}"))


def _protocol_v2(conn: Connection) -> None:
    """Protocol v2: the new event tables (seals and their weights, commits, votes, settlements,
    flag resolutions, agreement penalties, rules, claims) and derived ``duties``; v2 columns of
    the existing tables. Rows of v1 keep their values: a v1 batch's ``verified`` and ``outcome``
    follow from its v1 columns (the v1 predicate), peers' verified_batches are recounted with it.
    The v1-only tables (schema.LEGACY_TABLES) stay as they are; nothing reads them."""
    schema.metadata.create_all(conn, checkfirst=True)
    inspector = inspect(conn)
    for table, name, default in _V2_COLUMNS:
        if name not in {c["name"] for c in inspector.get_columns(table)}:
            _add_column(conn, table, name, default)
    conn.execute(
        text(
            "UPDATE publications SET verified = (agreements > 0 AND agreements >= flags "
            "AND NOT slashed), outcome = CASE WHEN slashed THEN 'upheld' WHEN settled THEN "
            "'rejected' ELSE NULL END WHERE verified_milli IS NOT NULL AND outcome IS NULL"
        )
    )
    conn.execute(
        text(
            "UPDATE peers SET verified_batches = (SELECT count(*) FROM publications p "
            "WHERE p.peer = peers.address AND p.verified)"
        )
    )


#: Columns step 5 adds: (table, column, NOT NULL default or None).
_RANGE_COLUMNS: tuple[tuple[str, str, str | None], ...] = (
    ("publications", "reward_max_milli", "0"),
    ("publications", "claimed_in_range", "false"),
    ("publications", "verified_in_range", None),
    ("peers", "out_of_range_batches", "0"),
    ("rounds", "out_of_range_batches", "0"),
)

#: The totals step 5 recounts over a peer's or a round's batches: the claim and verified reward
#: that count (in range), and the batches with one that does not.
_RANGE_TOTALS = {
    "claimed_milli": "CASE WHEN p.claimed_in_range THEN p.claimed_milli ELSE 0 END",
    "verified_milli": "CASE WHEN p.verified_in_range THEN p.verified_milli ELSE 0 END",
    "out_of_range_batches": "CASE WHEN NOT p.claimed_in_range OR NOT p.verified_in_range "
    "THEN 1 ELSE 0 END",
}


def _add_missing_columns(
    conn: Connection, columns: tuple[tuple[str, str, str | None], ...]
) -> None:
    inspector = inspect(conn)
    for table, name, default in columns:
        if name not in {c["name"] for c in inspector.get_columns(table)}:
            _add_column(conn, table, name, default)


def _reward_ranges(conn: Connection) -> None:
    """Rewards count only within [0, batch maximum]: ``unapplied_events``, each batch's maximum
    and range flags, no batch verified with its verified reward out of range, and the peers' and
    rounds' totals recounted (SQL, not derive's code, so that a later schema cannot break this
    step). Every batch of a database this old (its maximum 0: not derived yet, since derive never
    stores 0) is judged by the protocol's limits (round_rules.PROTOCOL_MAX_BATCH_MILLI)."""
    schema.metadata.create_all(conn, checkfirst=True)
    _add_missing_columns(conn, _RANGE_COLUMNS)
    conn.execute(
        text(
            "UPDATE publications SET reward_max_milli = :top, "
            "claimed_in_range = (claimed_milli BETWEEN 0 AND :top), "
            "verified_in_range = CASE WHEN verified_milli IS NULL THEN NULL "
            "ELSE (verified_milli BETWEEN 0 AND :top) END WHERE reward_max_milli = 0"
        ),
        {"top": PROTOCOL_MAX_BATCH_MILLI},
    )
    conn.execute(text("UPDATE publications SET verified = false WHERE NOT verified_in_range"))
    _recount_totals(conn)


def _recount_totals(conn: Connection) -> None:
    """The peers' and rounds' totals over their batches' columns (``_RANGE_TOTALS``) and the
    peers' verified batches."""
    verified = {"verified_batches": "CASE WHEN p.verified THEN 1 ELSE 0 END"}
    for table, key, column, totals in (
        ("peers", "address", "peer", {**_RANGE_TOTALS, **verified}),
        ("rounds", "round", "round", _RANGE_TOTALS),
    ):
        assignments = ", ".join(
            f"{name} = (SELECT coalesce(sum({value}), 0) FROM publications p "
            f"WHERE p.{column} = {table}.{key})"
            for name, value in totals.items()
        )
        conn.execute(text(f"UPDATE {table} SET {assignments}"))


#: Columns step 6 adds: (table, column, NOT NULL default or None).
_V3_COLUMNS: tuple[tuple[str, str, str | None], ...] = (
    ("settlements", "outcome", "0"),
    ("rules", "tasks_per_round", None),
    ("rules", "group_size", None),
)
_UPHELD, _REJECTED, _INCONCLUSIVE = 2, 3, 4  # VerdictState (docs/PROTOCOL.md, "Outcome")


def _settled_outcome(slashed: bool, flag_weight: str, agree_weight: str) -> int:
    """The outcome of a settlement kept without it: the contract's rule, upheld when slashed,
    else rejected when the agreements outweighed the flags, else inconclusive."""
    if slashed:
        return _UPHELD
    return _REJECTED if int(agree_weight) > int(flag_weight) else _INCONCLUSIVE


def _inconclusive(conn: Connection) -> None:
    """Protocol v3: ``settlements.outcome`` (an older indexer kept only whether the flags won, and
    took a tie for rejected), worked out from the weights each settlement was decided on; an
    inconclusive batch is no longer verified and earns 0 verified reward, and the peers' and
    rounds' totals are recounted. ``rules`` gains n and G, unknown here (NULL: the protocol's
    bound, which every batch of a database this old has): ``Indexer.prepare`` reads them from
    the events again. SQL and Python of its own, not derive's code (see step 5)."""
    _add_missing_columns(conn, _V3_COLUMNS)
    kept = conn.execute(
        text(
            "SELECT round, subject, slashed, flag_weight_wei, agree_weight_wei FROM settlements "
            "WHERE outcome = 0"
        )
    ).all()
    for row in kept:
        conn.execute(
            text("UPDATE settlements SET outcome = :o WHERE round = :r AND subject = :s"),
            {"o": _settled_outcome(bool(row[2]), row[3], row[4]), "r": row[0], "s": row[1]},
        )
    conn.execute(
        text(
            "UPDATE publications SET outcome = 'inconclusive', verified = false, "
            "verified_milli = 0, verified_in_range = true WHERE EXISTS (SELECT 1 FROM "
            "settlements s WHERE s.round = publications.round AND s.subject = publications.peer "
            "AND s.outcome = :o)"
        ),
        {"o": _INCONCLUSIVE},
    )
    _recount_totals(conn)


def _provenance_evidence(conn: Connection) -> None:
    """Committee recompute: the ``evidence`` table (ProvenanceEvidence) and each batch's count of
    it. No older database holds such an event: the count starts at 0."""
    schema.metadata.create_all(conn, checkfirst=True)
    _add_missing_columns(conn, (("publications", "evidence", "0"),))


#: Columns step 8 adds: (table, column, NOT NULL default or None).
_TOTALS_COLUMNS: tuple[tuple[str, str, str | None], ...] = (
    ("indexer_state", "genesis", None),
    ("indexer_state", "round_duration", None),
    ("indexer_state", "totals_closed_before", None),
    ("peers", "rank", None),
    ("peers", "duty_seats", "0"),
    ("peers", "duty_done", "0"),
    ("peers", "duty_missed", "0"),
    ("peers", "pending_batches", "0"),
)


def _leaderboard_totals(conn: Connection) -> None:
    """The leaderboard's totals kept with each peer (rank, duty, pending). They depend on the
    deployment's round phases, which this database has not kept: ``totals_closed_before`` stays
    NULL, and ``Store.start`` (every indexer run begins with it) fills the phases and computes
    every peer's totals; until then each peer has a rank (near enough: by lower-cased address
    after the rewards, whatever the collation)."""
    _add_missing_columns(conn, _TOTALS_COLUMNS)
    conn.execute(text("CREATE INDEX IF NOT EXISTS ix_peers_rank ON peers (rank)"))
    conn.execute(
        text(
            "UPDATE peers SET rank = (SELECT r FROM (SELECT address, row_number() OVER (ORDER BY "
            "verified_milli DESC, claimed_milli DESC, lower(address)) AS r FROM peers) ranked "
            "WHERE ranked.address = peers.address)"
        )
    )


def _state_version(conn: Connection) -> None:
    """A count of the writes of indexed data, which tells a server when the answers it keeps
    (``queries.PerState``) are out of date."""
    _add_missing_columns(conn, (("indexer_state", "state_version", "0"),))


#: (version, name, step), in order; versions are 1, 2, 3... with no gaps.
MIGRATIONS: tuple[tuple[int, str, Callable[[Connection], None]], ...] = (
    (1, "event tables, derived peers/rounds, cursor and block window", _create_v1_tables),
    (2, "peers.verified_batches: one definition of a verified batch", _verified_batches),
    (3, "endpoints: the store endpoints peers announced", _endpoints),
    (4, "protocol v2: seals, votes, settlements, duties and the v2 columns", _protocol_v2),
    (5, "rewards count only within [0, batch maximum]; unapplied events", _reward_ranges),
    (6, "protocol v3: inconclusive settlements, n and G of the rules", _inconclusive),
    (7, "provenance evidence: its table and each batch's count", _provenance_evidence),
    (8, "leaderboard totals kept with each peer: rank, duty, pending", _leaderboard_totals),
    (9, "indexer_state.state_version: a count of the writes of indexed data", _state_version),
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

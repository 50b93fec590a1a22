"""The database: opening it (SQLite or Postgres, migrated), the cursor, and the two writes the
indexer makes, each one transaction:

- ``apply_range``: the rows of a block range, their derived rows, the window's block hashes and the
  new cursor, all committed together (or not at all). A crash at any moment leaves the database at
  the end of some earlier range, and the next run continues from exactly there: every log takes
  effect exactly once.
- ``rollback_to``: after a reorg, every event row above the common ancestor deleted, the derived
  rows they touched recomputed, and the cursor moved back to the ancestor.

Both check that the cursor is where this writer left it (optimistic concurrency), so a second
indexer on the same database fails with a clear error instead of double-applying.

SQLite runs in WAL mode, so the HTTP API reads while the indexer writes.
"""

from __future__ import annotations

import time
from collections.abc import Sequence
from dataclasses import dataclass
from pathlib import Path
from typing import Any

from sqlalchemy import Connection, Engine, create_engine, event, func, or_, select
from sqlalchemy.engine import make_url
from sqlalchemy.exc import ArgumentError, OperationalError

from coordinator_indexer import schema
from coordinator_indexer.advance import apply_rows
from coordinator_indexer.derive import Phase, recompute
from coordinator_indexer.errors import ConcurrentWriter, ConfigError, DeploymentMismatch
from coordinator_indexer.migrations import migrate
from coordinator_indexer.recent import RecentRounds
from coordinator_indexer.records import Records, Touched
from coordinator_indexer.round_rules import SCHEDULED
from node.chain.deployment import Deployment


@dataclass(frozen=True)
class BlockRef:
    """A block header's identity: enough to detect that the chain changed under us."""

    number: int
    hash: str
    parent_hash: str
    timestamp: int


@dataclass(frozen=True)
class IndexerState:
    """The cursor row: the last block fully applied, and what the indexer last saw."""

    chain_id: int
    coordinator: str
    deployment_block: int
    cursor_block: int
    cursor_hash: str
    cursor_timestamp: int
    chain_head: int
    confirmations: int
    updated_at: int
    judging_rounds: int | None = None
    genesis: int | None = None
    round_duration: int | None = None
    totals_closed_before: int | None = None
    state_version: int = 0

    def closed_before(self, genesis: int, round_duration: int) -> int | None:
        """Rounds below this one are past their reveal phase at the indexed block (their
        committee duty is final); None before genesis or without the phases."""
        return closed_before_at(self.cursor_timestamp, genesis, round_duration, self.judging_rounds)

    @property
    def lag(self) -> int:
        return max(0, self.chain_head - self.cursor_block)

    @property
    def final_block(self) -> int:
        """Highest indexed block at least ``confirmations`` deep (rows up to it are final)."""
        return min(self.cursor_block, self.chain_head - self.confirmations)


def closed_before_at(
    timestamp: int, genesis: int | None, round_duration: int | None, judging_rounds: int | None
) -> int | None:
    """The first round whose reveal phase is not over at ``timestamp``; None before genesis or
    without the phases."""
    if judging_rounds is None or genesis is None or not round_duration or timestamp < genesis:
        return None
    current = (timestamp - genesis) // round_duration
    return max(0, current - judging_rounds)


#: ``indexer_state.totals_closed_before`` for totals kept without a closed round (None).
_NONE_CLOSED = -1


def _phase(conn: Connection) -> Phase:
    """Where the cursor's ``closed_before`` is, and the one the peers' totals were kept for."""
    state = conn.execute(select(schema.indexer_state)).one()
    now = closed_before_at(
        state.cursor_timestamp, state.genesis, state.round_duration, state.judging_rounds
    )
    kept = state.totals_closed_before
    return Phase(now=now, kept=None if kept == _NONE_CLOSED else kept, stale=kept is None)


def _recompute(conn: Connection, touched: Touched) -> None:
    """``derive.recompute`` at the cursor as it stands in this transaction (see ``_note``)."""
    phase = _phase(conn)
    recompute(conn, touched, phase)
    _note(conn, phase)


def _note(conn: Connection, phase: Phase) -> int:
    """Notes the ``closed_before`` the peers' totals are now kept for, and counts the write;
    returns the new ``state_version``."""
    kept = _NONE_CLOSED if phase.now is None else phase.now
    state = schema.indexer_state
    conn.execute(
        state.update().values(totals_closed_before=kept, state_version=state.c.state_version + 1)
    )
    return _state_version(conn)


def _state_version(conn: Connection) -> int:
    return conn.execute(select(schema.indexer_state.c.state_version)).scalar_one()


def normalise_url(url: str) -> str:
    """Database URL with the drivers this package installs (psycopg 3 for Postgres)."""
    if url.startswith("postgres://"):
        url = "postgresql://" + url[len("postgres://") :]
    if url.startswith("postgresql://"):
        url = "postgresql+psycopg://" + url[len("postgresql://") :]
    return url


def create_db_engine(url: str) -> Engine:
    """An engine for ``url`` (``sqlite:///path.db`` or ``postgresql://...``), SQLite set to WAL."""
    try:
        parsed = make_url(normalise_url(url))
    except ArgumentError:
        raise ConfigError(
            f"not a database URL: {url!r} (examples: sqlite:///indexer.db, "
            "postgresql://user:password@host/dbname)"
        ) from None
    if parsed.get_backend_name() == "sqlite":
        database = parsed.database or ""
        if database in ("", ":memory:") or database.startswith("file:"):
            raise ConfigError(
                "an in-memory SQLite database cannot be shared by the indexer and the API: "
                "give a file, e.g. sqlite:///indexer.db"
            )
        Path(database).expanduser().parent.mkdir(parents=True, exist_ok=True)
        engine = create_engine(
            parsed, connect_args={"timeout": 30, "check_same_thread": False}, pool_pre_ping=False
        )
        event.listen(engine, "connect", _sqlite_pragmas)
        return engine
    if parsed.get_backend_name() == "postgresql":
        return create_engine(parsed, pool_pre_ping=True)
    raise ConfigError(f"unsupported database {parsed.get_backend_name()!r}: use SQLite or Postgres")


def _sqlite_pragmas(dbapi_connection: Any, _record: Any) -> None:
    cursor = dbapi_connection.cursor()
    cursor.execute("PRAGMA journal_mode=WAL")  # readers never block the writer, nor it them
    cursor.execute("PRAGMA synchronous=NORMAL")  # durable at checkpoints; WAL keeps it consistent
    cursor.execute("PRAGMA busy_timeout=30000")
    cursor.close()


class Store:
    """One indexer database."""

    def __init__(self, engine: Engine) -> None:
        self.engine = engine
        self.recent = RecentRounds()  # the rounds the last ranges touched (``recent``)

    @classmethod
    def open(cls, url: str) -> Store:
        """Connects and applies missing migrations; ConfigError when the database is unreachable."""
        engine = create_db_engine(url)
        try:
            migrate(engine)
        except OperationalError as exc:
            engine.dispose()
            raise ConfigError(f"cannot open the database {_safe(url)}: {exc.orig}") from None
        return cls(engine)

    def close(self) -> None:
        self.engine.dispose()

    # ------------------------------------------------------------------------------- the cursor

    def state(self) -> IndexerState | None:
        """The cursor row, or None before the first ``start``."""
        with self.engine.connect() as conn:
            row = conn.execute(select(schema.indexer_state)).first()
        if row is None:
            return None
        data = row._asdict()
        data.pop("id")
        return IndexerState(**data)

    def start(self, deployment: Deployment, anchor: BlockRef, confirmations: int) -> IndexerState:
        """Binds an empty database to ``deployment`` with the cursor just below its first block;
        an existing one must belong to the same coordinator on the same chain."""
        existing = self.state()
        if existing is not None:
            if (existing.chain_id, existing.coordinator) != (
                deployment.chain_id,
                deployment.coordinator,
            ):
                raise DeploymentMismatch(
                    f"this database indexes coordinator {existing.coordinator} on chain "
                    f"{existing.chain_id}, not {deployment.coordinator} on chain "
                    f"{deployment.chain_id}: use another database for this deployment"
                )
            phases = {"genesis": deployment.genesis, "round_duration": deployment.round_duration}
            kept = (existing.confirmations, existing.genesis, existing.round_duration)
            fresh = existing.totals_closed_before is not None
            if fresh and kept == (confirmations, *phases.values()):
                return existing
            with self.engine.begin() as conn:
                state = schema.indexer_state.update().values(confirmations=confirmations, **phases)
                conn.execute(state)
                _recompute(conn, Touched())
            return self.state()  # type: ignore[return-value]
        with self.engine.begin() as conn:
            conn.execute(
                schema.indexer_state.insert().values(
                    id=1,
                    chain_id=deployment.chain_id,
                    coordinator=deployment.coordinator,
                    deployment_block=deployment.deployment_block,
                    cursor_block=anchor.number,
                    cursor_hash=anchor.hash,
                    cursor_timestamp=anchor.timestamp,
                    chain_head=anchor.number,
                    confirmations=confirmations,
                    updated_at=int(time.time()),
                    genesis=deployment.genesis,
                    round_duration=deployment.round_duration,
                    totals_closed_before=_NONE_CLOSED,
                )
            )
            conn.execute(schema.blocks.insert().values(**_block_row(anchor)))
        return self.state()  # type: ignore[return-value]

    def note_judging_rounds(self, judging_rounds: int) -> IndexerState:
        """Records the deployment's J (graceRounds + commitRounds + revealRounds), which tells
        when a round's committee duty is final."""
        with self.engine.begin() as conn:
            conn.execute(schema.indexer_state.update().values(judging_rounds=judging_rounds))
            _recompute(conn, Touched())
        return self.state()  # type: ignore[return-value]

    def kept_blocks(self) -> list[BlockRef]:
        """The block hashes kept for reorg detection, newest first."""
        with self.engine.connect() as conn:
            rows = conn.execute(select(schema.blocks).order_by(schema.blocks.c.number.desc()))
            return [BlockRef(r.number, r.hash, r.parent_hash, 0) for r in rows]

    def registered_peers(self) -> set[str]:
        """Every peer registered as far as indexed."""
        with self.engine.connect() as conn:
            return set(conn.execute(select(schema.registrations.c.peer)).scalars())

    def rules_without_shape(self) -> list[tuple[int, int, str]]:
        """(block, log index, tx hash) of the rules rows whose n and G are not known (indexed
        before migration 6)."""
        r = schema.rules
        query = select(r.c.block_number, r.c.log_index, r.c.tx_hash).where(
            or_(r.c.tasks_per_round.is_(None), r.c.group_size.is_(None))
        )
        with self.engine.connect() as conn:
            return [tuple(row) for row in conn.execute(query)]  # type: ignore[misc]

    def fill_rules_shapes(self, shapes: dict[tuple[int, int, str], tuple[int, int]]) -> None:
        """Sets n and G of the rules rows at (block, log index, tx hash), as their events say, and
        recomputes the batch maxima they change (one transaction)."""
        if not shapes:
            return
        r = schema.rules
        with self.engine.begin() as conn:
            for (block, index, tx_hash), (tasks, group) in shapes.items():
                where = (r.c.block_number == block, r.c.log_index == index, r.c.tx_hash == tx_hash)
                shape = {"tasks_per_round": tasks, "group_size": group}
                conn.execute(r.update().where(*where).values(shape))
            _recompute(conn, Touched(rules=True))

    def note_head(self, head: int) -> None:
        """Records the chain head seen at a poll that had nothing new to apply (for the lag)."""
        with self.engine.begin() as conn:
            conn.execute(
                schema.indexer_state.update().values(chain_head=head, updated_at=int(time.time()))
            )

    # ------------------------------------------------------------------------------ the writes

    def apply_range(
        self,
        expected_cursor: int,
        records: Records,
        headers: Sequence[BlockRef],
        end: BlockRef,
        head: int,
        keep_from: int,
    ) -> None:
        """Applies one block range in one transaction (see the module docstring).

        ``headers`` are the range's blocks inside the unconfirmed window (their hashes are kept);
        ``end`` is the range's last block (the new cursor); hashes below ``keep_from`` are pruned.
        """
        recent = self.recent
        try:
            with self.engine.begin() as conn:
                self._move_cursor(conn, expected_cursor, end, head)
                phase = _phase(conn)
                recent.keep_for(_state_version(conn))
                apply_rows(conn, records, phase, recent)
                version = _note(conn, phase)
                self._keep_blocks(conn, headers, end, keep_from)
        except BaseException:
            recent.clear()  # it may hold rows the database did not take
            raise
        recent.version = version

    @staticmethod
    def _keep_blocks(
        conn: Connection, headers: Sequence[BlockRef], end: BlockRef, keep_from: int
    ) -> None:
        kept = {b.number: b for b in (*headers, end)}
        if kept:
            conn.execute(schema.blocks.delete().where(schema.blocks.c.number.in_(list(kept))))
            conn.execute(schema.blocks.insert(), [_block_row(b) for b in kept.values()])
        conn.execute(
            schema.blocks.delete().where(schema.blocks.c.number < min(keep_from, end.number))
        )

    def rollback_to(self, expected_cursor: int, ancestor: BlockRef, head: int) -> Touched:
        """Deletes every event row above ``ancestor`` and recomputes what they touched."""
        touched = Touched()
        with self.engine.begin() as conn:
            self._move_cursor(conn, expected_cursor, ancestor, head)
            touched = _touched_above(conn, ancestor.number)
            for table in schema.EVENT_TABLES:
                conn.execute(table.delete().where(table.c.block_number > ancestor.number))
            _recompute(conn, touched)
            conn.execute(schema.blocks.delete().where(schema.blocks.c.number > ancestor.number))
        return touched

    def rebuild(self) -> None:
        """Recomputes every derived row from the event tables, from scratch: what a fresh index
        of the same chain holds (a check of the rows kept up to date range by range)."""
        with self.engine.begin() as conn:
            everything = _touched_above(conn, -1)
            conn.execute(schema.indexer_state.update().values(totals_closed_before=None))
            _recompute(conn, everything)

    def _move_cursor(self, conn: Connection, expected: int, to: BlockRef, head: int) -> None:
        state = schema.indexer_state
        result = conn.execute(
            state.update()
            .where(state.c.id == 1, state.c.cursor_block == expected)
            .values(
                cursor_block=to.number,
                cursor_hash=to.hash,
                cursor_timestamp=to.timestamp,
                chain_head=head,
                updated_at=int(time.time()),
            )
        )
        if result.rowcount != 1:
            raise ConcurrentWriter(
                f"the database's cursor is no longer at block {expected}: another indexer is "
                "writing to it; run one indexer per database"
            )

    # ------------------------------------------------------------------------------- reading

    def counts(self) -> dict[str, int]:
        """Rows per data table (progress output and tests)."""
        with self.engine.connect() as conn:
            return {
                table.name: int(conn.execute(select(func.count()).select_from(table)).scalar_one())
                for table in schema.DATA_TABLES
            }

    def dump(self) -> dict[str, list[tuple[Any, ...]]]:
        """Every data table's rows, sorted, without the columns that record when a write happened
        (for comparing two databases that indexed the same chain)."""
        volatile = {"updated_at", "chain_head", "state_version"}
        out = {}
        with self.engine.connect() as conn:
            for table in schema.DATA_TABLES:
                columns = [c for c in table.columns if c.name not in volatile]
                rows = conn.execute(select(*columns)).all()
                out[table.name] = sorted(tuple(row) for row in rows)
        return out


def _block_row(block: BlockRef) -> dict[str, Any]:
    return {"number": block.number, "hash": block.hash, "parent_hash": block.parent_hash}


def _touched_above(conn: Connection, number: int) -> Touched:
    """The derived keys that rows above block ``number`` contribute to."""
    touched = Touched()
    for table, column in (
        (schema.registrations, "peer"),
        (schema.stake_changes, "peer"),
        (schema.commits, "attester"),
        (schema.flag_resolutions, "flagger"),
        (schema.agreement_penalties, "attester"),
    ):
        touched.peers.update(
            conn.execute(select(table.c[column]).where(table.c.block_number > number)).scalars()
        )
    touched.rounds.update(
        conn.execute(
            select(schema.seals.c.round).where(schema.seals.c.block_number > number)
        ).scalars()
    )
    p, v, d = schema.publications, schema.votes, schema.settlements
    for row in conn.execute(select(p.c.round, p.c.peer).where(p.c.block_number > number)):
        touched.batch(row.round, row.peer)
    for row in conn.execute(
        select(v.c.round, v.c.subject, v.c.attester).where(v.c.block_number > number)
    ):
        touched.batch(row.round, row.subject, row.attester)
    for table in (d, schema.evidence):
        query = select(table.c.round, table.c.subject).where(table.c.block_number > number)
        for row in conn.execute(query):
            touched.batch(row.round, row.subject)
    touched.rules = _rules_above(conn, number)
    return touched


def _rules_above(conn: Connection, number: int) -> bool:
    """Whether a ParametersScheduled, kept or refused, lies above block ``number``."""
    r, u = schema.rules, schema.unapplied_events
    kept = select(r.c.block_number).where(r.c.block_number > number)
    refused = select(u.c.block_number).where(u.c.block_number > number, u.c.event == SCHEDULED)
    return any(conn.execute(query.limit(1)).first() is not None for query in (kept, refused))


def _safe(url: str) -> str:
    """The URL without its password, for messages."""
    try:
        return make_url(normalise_url(url)).render_as_string(hide_password=True)
    except ArgumentError:
        return "(invalid URL)"

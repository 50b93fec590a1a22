"""The batch maximum of each round: n x G x 1000 of ``rulesAt(round)``, rebuilt from the
``ParametersScheduled`` events the indexer keeps (the ``rules`` table, with each schedule's n and
G), so that no call of the contract is needed and a reorg takes the rules back with their events.

The contract keeps a history of rules entries: the constructor's, from round 0, then one per
``scheduleParameters``, from ``currentRound() + J + 1``, which replaces the last entry instead when
that one has not started yet. An event carries only its ``fromRound``, so the round it was
scheduled in is ``fromRound - J - 1`` (J from ``indexer_state``), and it replaced the entry before
it when that entry's ``fromRound`` is above that round. ``rulesAt(r)`` is the last entry with
``fromRound <= r``.

Where the indexer does not know a round's n and G, its batch maximum is the format's bound,
64 x 32 x 1000 = 2,048,000 (docs/PROTOCOL.md, "Limits"), which no rules exceed: rounds before any
rules, n or G outside the contract's bounds, a rules row indexed before migration 6 until the
indexer reads its event again (``Indexer.prepare``), and a ``ParametersScheduled`` the decoder
refused (kept in ``unapplied_events``): its rules start from its ``fromRound`` all the same, with
n and G unknown.
"""

from __future__ import annotations

import json
from collections.abc import Iterable
from dataclasses import dataclass

from sqlalchemy import Connection, select

from coordinator_indexer import schema
from coordinator_indexer.schema import INT64_MAX
from node.chain.models import max_reward_milli

#: The format's bounds on n (tasksPerRound) and G (groupSize), as the contract checks them
#: (node.chain.models.Rules).
TASKS_PER_ROUND = (1, 64)
GROUP_SIZE = (2, 32)
#: The most a batch can be worth by the protocol's limits: 64 groups x 32 completions x 1000
#: milli-units (docs/PROTOCOL.md, "Limits").
PROTOCOL_MAX_BATCH_MILLI = max_reward_milli(TASKS_PER_ROUND[1], GROUP_SIZE[1])
SCHEDULED = "ParametersScheduled"


def batch_reward_max_milli(tasks_per_round: int | None, group_size: int | None) -> int:
    """The largest reward, in milli-units, that a batch under rules with n = ``tasks_per_round``
    and G = ``group_size`` can claim or be verified (the one definition of the batch maximum):
    n x G x 1000, or the protocol's bound when n or G is unknown (None) or out of bounds."""
    if tasks_per_round is None or group_size is None:
        return PROTOCOL_MAX_BATCH_MILLI
    if not (TASKS_PER_ROUND[0] <= tasks_per_round <= TASKS_PER_ROUND[1]):
        return PROTOCOL_MAX_BATCH_MILLI
    if not (GROUP_SIZE[0] <= group_size <= GROUP_SIZE[1]):
        return PROTOCOL_MAX_BATCH_MILLI
    return max_reward_milli(tasks_per_round, group_size)


@dataclass(frozen=True)
class Entry:
    """One entry of the rules history: from which round, and its batch maximum."""

    from_round: int
    max_milli: int


@dataclass(frozen=True)
class Scheduled:
    """One ParametersScheduled where it sits in the chain."""

    block_number: int
    log_index: int
    entry: Entry


@dataclass(frozen=True)
class RulesHistory:
    """The contract's rules history as the indexer knows it, oldest entry first."""

    entries: tuple[Entry, ...] = ()

    def batch_max_milli(self, round_: int) -> int:
        """The batch maximum of ``round_`` (``rulesAt(round_)``'s n x G x 1000)."""
        for entry in reversed(self.entries):
            if entry.from_round <= round_:
                return entry.max_milli
        return PROTOCOL_MAX_BATCH_MILLI


def read_rules_history(conn: Connection) -> RulesHistory:
    """The rules history from the kept and the refused ParametersScheduled events."""
    scheduled = [*_kept(conn), *_refused(conn)]
    scheduled.sort(key=lambda s: (s.block_number, s.log_index))
    judging = conn.execute(select(schema.indexer_state.c.judging_rounds)).scalar()
    return RulesHistory(history(scheduled, judging))


def history(scheduled: Iterable[Scheduled], judging_rounds: int | None) -> tuple[Entry, ...]:
    """The entries that ``scheduled`` (chain order) leave, the contract's way: a schedule made
    while the last entry had not started replaces it (J unknown: every schedule appends)."""
    entries: list[Entry] = []
    for item in scheduled:
        if entries and _replaces(item.entry, entries[-1], judging_rounds):
            entries[-1] = item.entry
        else:
            entries.append(item.entry)
    return tuple(entries)


def _replaces(entry: Entry, last: Entry, judging_rounds: int | None) -> bool:
    """Whether ``entry`` was scheduled (in round fromRound - J - 1, at least 0) before ``last``
    started."""
    if judging_rounds is None:
        return False
    return last.from_round > max(0, entry.from_round - judging_rounds - 1)


def _kept(conn: Connection) -> list[Scheduled]:
    r = schema.rules
    query = select(
        r.c.block_number, r.c.log_index, r.c.from_round, r.c.tasks_per_round, r.c.group_size
    )
    return [
        Scheduled(
            row.block_number,
            row.log_index,
            Entry(row.from_round, batch_reward_max_milli(row.tasks_per_round, row.group_size)),
        )
        for row in conn.execute(query)
    ]


def _refused(conn: Connection) -> list[Scheduled]:
    u = schema.unapplied_events
    query = select(u.c.block_number, u.c.log_index, u.c.data).where(u.c.event == SCHEDULED)
    found = []
    for row in conn.execute(query):
        from_round = refused_from_round(row.data)
        if from_round is not None:
            entry = Entry(from_round, PROTOCOL_MAX_BATCH_MILLI)
            found.append(Scheduled(row.block_number, row.log_index, entry))
    return found


def refused_from_round(data: str) -> int | None:
    """The ``fromRound`` (its indexed topic, capped at 2^63 - 1 like every round that keys
    nothing) of a refused ParametersScheduled kept as ``{"topics": [...], "data": ...}``; None
    when the log has no such topic."""
    try:
        topic = json.loads(data)["topics"][1]
        return min(int(topic, 16), INT64_MAX)
    except (ValueError, TypeError, KeyError, IndexError):
        return None

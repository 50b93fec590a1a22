"""Derived rows, recomputed from the event tables for the keys a change touched.

Definitions (the leaderboard's meaning; README "Indexer and leaderboard"):

- A batch's **claimed reward** is its publisher's ``rewardSum`` (``RolloutsPublished``).
- A batch's **verified reward** is the *median* of the ``verifiedRewardSum`` values that other
  peers attested for it (``Attested``; the contract refuses self-attestation); for an even number
  of attestations, the mean of the two middle values rounded down to a whole milli-unit. The median
  is used, not the mean, so that one attester lying high or low cannot move it. A batch nobody
  attested has no verified reward (NULL), and counts 0 towards its peer's total.
- A peer's **verified reward** is the sum of its batches' verified rewards; its **claimed reward**
  the sum of its claims. Both are int64 milli-units, reward x 1000
  (docs/PROTOCOL.md, "Rewards in milli-units").
- A batch is **verified** when at least one attester agreed, agreements are at least the flags,
  and it was not slashed (:func:`is_verified`). A peer's ``verified_batches`` and the swarm's
  ``/api/stats`` count batches with exactly this predicate.

Everything here is recomputed from scratch for the touched keys (delete, then insert), so adding
rows and rolling them back after a reorg go through the same code and cannot drift apart.
"""

from __future__ import annotations

from collections import defaultdict
from collections.abc import Iterable, Iterator, Sequence
from typing import Any, TypeVar

from sqlalchemy import ColumnElement, Connection, and_, bindparam, case, false, func, select, tuple_

from coordinator_indexer import schema
from coordinator_indexer.records import Touched
from node.chain.models import median_milli

T = TypeVar("T")
_CHUNK = 400  # keys per IN (...) list: well under every database's parameter limit
_GWEI = 10**9


def is_verified(publications: Any = schema.publications) -> ColumnElement[bool]:
    """The one definition of a *verified* batch, as a SQL predicate over ``publications``.

    A slash needs more flags than agreements, so ``agreements >= flags`` already excludes one; the
    ``slashed`` test states the rule outright."""
    p = publications
    return and_(p.c.agreements > 0, p.c.agreements >= p.c.flags, p.c.slashed == false())


def count_verified(publications: Any = schema.publications) -> ColumnElement[int]:
    """How many of the selected batches are verified (0 for none)."""
    return func.coalesce(func.sum(case((is_verified(publications), 1), else_=0)), 0)


def recompute(conn: Connection, touched: Touched) -> None:
    """Brings every derived row of ``touched`` in line with the event tables."""
    batches = set(touched.batches)
    _recompute_verdicts(conn, batches)
    _recompute_peers(conn, touched.peers)
    _recompute_rounds(conn, touched.rounds)


def _chunks(items: Iterable[T]) -> Iterator[list[T]]:
    chunk: list[T] = []
    for item in sorted(items):  # type: ignore[type-var]
        chunk.append(item)
        if len(chunk) == _CHUNK:
            yield chunk
            chunk = []
    if chunk:
        yield chunk


# ------------------------------------------------------------------------------------ verdicts


def _recompute_verdicts(conn: Connection, batches: set[tuple[int, str]]) -> None:
    a, d, p = schema.attestations, schema.disputes, schema.publications
    update = (
        p.update()
        .where(and_(p.c.round == bindparam("k_round"), p.c.peer == bindparam("k_peer")))
        .values(
            attestations=bindparam("attestations"),
            agreements=bindparam("agreements"),
            flags=bindparam("flags"),
            verified_milli=bindparam("verified_milli"),
            settled=bindparam("settled"),
            slashed=bindparam("slashed"),
        )
    )
    for chunk in _chunks(batches):
        values: dict[tuple[int, str], list[int]] = defaultdict(list)
        flags: dict[tuple[int, str], int] = defaultdict(int)
        for row in conn.execute(
            select(a.c.round, a.c.subject, a.c.verified_milli, a.c.is_flag).where(
                tuple_(a.c.round, a.c.subject).in_(chunk)
            )
        ):
            key = (row.round, row.subject)
            values[key].append(row.verified_milli)
            flags[key] += int(row.is_flag)
        settled = {
            (row.round, row.subject): bool(row.slashed)
            for row in conn.execute(
                select(d.c.round, d.c.subject, d.c.slashed).where(
                    tuple_(d.c.round, d.c.subject).in_(chunk)
                )
            )
        }
        params = [
            {
                "k_round": round_,
                "k_peer": peer,
                "attestations": len(values[(round_, peer)]),
                "agreements": len(values[(round_, peer)]) - flags[(round_, peer)],
                "flags": flags[(round_, peer)],
                "verified_milli": median_milli(values[(round_, peer)]),
                "settled": (round_, peer) in settled,
                "slashed": settled.get((round_, peer), False),
            }
            for round_, peer in chunk
        ]
        conn.execute(update, params)


# --------------------------------------------------------------------------------------- peers


def _stake_state(changes: Sequence[Any]) -> dict[str, Any]:
    """Replays one peer's stake changes (chain order): stake, status, slashes."""
    stake, status, withdrawable_at, slashes, slashed = 0, "active", None, 0, 0
    for change in changes:
        amount = int(change.amount_wei)
        if change.kind == "register":
            stake = amount
        elif change.kind == "add":
            stake = int(change.total_wei) if change.total_wei is not None else stake + amount
        elif change.kind == "slash":
            stake, slashes, slashed = max(0, stake - amount), slashes + 1, slashed + amount
        elif change.kind == "exit":
            status, withdrawable_at = "exiting", change.withdrawable_at
        elif change.kind == "withdraw":
            stake, status = max(0, stake - amount), "withdrawn"
    return {
        "stake_wei": str(stake),
        "stake_gwei": stake // _GWEI,
        "status": status,
        "withdrawable_at": withdrawable_at,
        "slashes": slashes,
        "slashed_wei": str(slashed),
    }


def recompute_all_peers(conn: Connection) -> None:
    """Recomputes every registered peer's row (a migration that changes a definition)."""
    _recompute_peers(conn, {row.peer for row in conn.execute(select(schema.registrations.c.peer))})


def _recompute_peers(conn: Connection, peers: set[str]) -> None:
    r, s, p, a = (
        schema.registrations,
        schema.stake_changes,
        schema.publications,
        schema.attestations,
    )
    for chunk in _chunks(peers):
        registered = {row.peer: row for row in conn.execute(select(r).where(r.c.peer.in_(chunk)))}
        changes: dict[str, list[Any]] = defaultdict(list)
        for row in conn.execute(
            select(s).where(s.c.peer.in_(chunk)).order_by(s.c.block_number, s.c.log_index)
        ):
            changes[row.peer].append(row)
        published = {
            row.peer: row
            for row in conn.execute(
                select(
                    p.c.peer,
                    func.count().label("rounds"),
                    count_verified(p).label("verified_batches"),
                    func.coalesce(func.sum(p.c.claimed_milli), 0).label("claimed"),
                    func.coalesce(func.sum(p.c.verified_milli), 0).label("verified"),
                    func.coalesce(func.sum(p.c.flags), 0).label("flags"),
                    func.max(p.c.round).label("last_round"),
                )
                .where(p.c.peer.in_(chunk))
                .group_by(p.c.peer)
            )
        }
        given = dict(
            conn.execute(
                select(a.c.attester, func.count())
                .where(a.c.attester.in_(chunk))
                .group_by(a.c.attester)
            ).all()
        )
        conn.execute(schema.peers.delete().where(schema.peers.c.address.in_(chunk)))
        rows = [
            _peer_row(registration, changes[peer], published.get(peer), given.get(peer, 0))
            for peer, registration in registered.items()
        ]
        if rows:
            conn.execute(schema.peers.insert(), rows)


def _peer_row(registration: Any, changes: list[Any], published: Any, given: int) -> dict:
    return {
        "address": registration.peer,
        "name": registration.name,
        "registered_block": registration.block_number,
        **_stake_state(changes),
        "rounds": published.rounds if published else 0,
        "verified_batches": int(published.verified_batches) if published else 0,
        "claimed_milli": int(published.claimed) if published else 0,
        "verified_milli": int(published.verified) if published else 0,
        "flags_received": int(published.flags) if published else 0,
        "attestations_given": int(given),
        "last_round": published.last_round if published else None,
    }


# -------------------------------------------------------------------------------------- rounds


def _recompute_rounds(conn: Connection, rounds: set[int]) -> None:
    p, a, d = schema.publications, schema.attestations, schema.disputes
    for chunk in _chunks(rounds):
        published = {
            row.round: row
            for row in conn.execute(
                select(
                    p.c.round,
                    func.count().label("publications"),
                    func.coalesce(func.sum(p.c.groups), 0).label("groups"),
                    func.coalesce(func.sum(p.c.completions), 0).label("completions"),
                    func.coalesce(func.sum(p.c.claimed_milli), 0).label("claimed"),
                    func.coalesce(func.sum(p.c.verified_milli), 0).label("verified"),
                    func.count(p.c.verified_milli).label("attested"),
                )
                .where(p.c.round.in_(chunk))
                .group_by(p.c.round)
            )
        }
        attested = {
            row.round: row
            for row in conn.execute(
                select(
                    a.c.round,
                    func.count().label("attestations"),
                    func.coalesce(func.sum(case((a.c.is_flag, 1), else_=0)), 0).label("flags"),
                )
                .where(a.c.round.in_(chunk))
                .group_by(a.c.round)
            )
        }
        settled = {
            row.round: row
            for row in conn.execute(
                select(
                    d.c.round,
                    func.count().label("disputes"),
                    func.coalesce(func.sum(case((d.c.slashed, 1), else_=0)), 0).label("slashes"),
                )
                .where(d.c.round.in_(chunk))
                .group_by(d.c.round)
            )
        }
        conn.execute(schema.rounds.delete().where(schema.rounds.c.round.in_(chunk)))
        rows = [
            _round_row(round_, published.get(round_), attested.get(round_), settled.get(round_))
            for round_ in chunk
            if round_ in published or round_ in attested or round_ in settled
        ]
        if rows:
            conn.execute(schema.rounds.insert(), rows)


def _round_row(round_: int, published: Any, attested: Any, settled: Any) -> dict:
    return {
        "round": round_,
        "publications": published.publications if published else 0,
        "groups": int(published.groups) if published else 0,
        "completions": int(published.completions) if published else 0,
        "claimed_milli": int(published.claimed) if published else 0,
        "verified_milli": int(published.verified) if published else 0,
        "attested_batches": published.attested if published else 0,
        "attestations": attested.attestations if attested else 0,
        "flags": int(attested.flags) if attested else 0,
        "disputes": settled.disputes if settled else 0,
        "slashes": int(settled.slashes) if settled else 0,
    }

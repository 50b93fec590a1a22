"""Read-side queries behind the HTTP API: plain dicts out, one function per question.

Rank is always the position by verified reward (ties: claimed reward, then the address as a
number), whatever order a page is sorted in, so a peer's rank means the same thing on every page.
Totals count only the rewards within their batch's range; a batch shows its own values as they
are, with whether they are in range (``derive``, "count only within [0, the batch maximum]").
A batch is pending as of the indexed block (``closed_before``: the first round whose reveal phase
is not over), so pending is computed here, when read (``derive.batch_is_pending``).

The dicts carry the API's names only; the response models add the deprecated v1 names
(``models.DeprecatedNames``). Some columns keep v1 names (``schema``, "Column names").
"""

from __future__ import annotations

import threading
from collections.abc import Callable, Hashable, Sequence
from operator import itemgetter
from typing import Any, TypeVar

from sqlalchemy import Connection, Table, case, func, select, true

from coordinator_indexer import schema
from coordinator_indexer.derive import (
    address_order,
    batch_is_pending,
    count_out_of_range,
    count_pending,
    count_verified,
    counted_claim,
    counted_verified,
    in_reward_range,
)
from coordinator_indexer.store import IndexerState

SORTS = {
    "rank": "rank",
    "verified": "verified_milli",
    "claimed": "claimed_milli",
    "rounds": "rounds",
    "stake": "stake_gwei",
    "slashes": "slashes",
    "name": "name",
    "duty_done": "duty_done",
    "duty_missed": "duty_missed",
}

_P = schema.peers
T = TypeVar("T")
Q = TypeVar("Q", bound=Hashable)


class PerState:
    """Answers read from one indexed state, kept until the next write to it.

    ``key`` (``state_key``) counts the writes of indexed data: a range applied, a reorg rolled
    back, totals recomputed (``Store``; each recomputes the totals). Kept here: the number of
    peers and each sort's order of them, so a leaderboard page by a column other than rank is a
    slice of it, not a sort of the whole table; and the swarm totals of ``/api/stats``, which
    scan every batch. The server also keeps each page's body and each peer's encoded entry.
    Shared by the server's threads. An answer read while ingestion commits may be of the newer
    state, kept under the older key until a request sees the new one; never of an older one.
    ``most``: how many answers one state keeps (the oldest goes first); None keeps all, for a
    set of questions that is bounded anyway.
    """

    def __init__(self, most: int | None = None) -> None:
        self._lock = threading.Lock()
        self._most = most
        self._key: Hashable = None
        self._kept: dict[Hashable, Any] = {}
        self._reading: dict[Hashable, threading.Event] = {}  # questions being read, at _key

    def get(self, key: Hashable, question: Hashable, read: Callable[[], T]) -> T:
        """The answer to ``question`` at ``key``: kept, or ``read()`` (never kept for None).
        One thread reads a missing answer while the others asking for it wait for it (a new
        state's first requests would otherwise each sort the same column); if that read fails
        or its state is gone, a waiting thread reads it itself."""
        if key is None:
            return read()
        while True:
            with self._lock:
                self._switch(key)
                if question in self._kept:
                    return self._kept[question]
                reading = self._reading.get(question)
                mine = reading is None
                if mine:
                    reading = self._reading[question] = threading.Event()
            if not mine:
                reading.wait()
                continue
            try:
                answer = read()
                self._keep(key, {question: answer})
                return answer
            finally:
                with self._lock:
                    if self._reading.get(question) is reading:
                        del self._reading[question]
                reading.set()

    def get_many(
        self,
        key: Hashable,
        questions: Sequence[Q],
        read: Callable[[list[Q]], dict[Q, T]],
    ) -> list[T]:
        """The answers to ``questions`` at ``key``, in their order: those kept, and the rest from
        one ``read(missing)`` (a question it leaves out has no answer and is left out)."""
        found: dict[Q, T] = {}
        if key is not None:
            with self._lock:
                self._switch(key)
                found = {q: self._kept[q] for q in questions if q in self._kept}
        missing = [q for q in questions if q not in found]
        if missing:
            fresh = read(missing)
            found.update(fresh)
            if key is not None:
                self._keep(key, fresh)
        return [found[q] for q in questions if q in found]

    def _switch(self, key: Hashable) -> None:
        """Drops what was kept for another state (called with the lock held)."""
        if key != self._key:
            self._key, self._kept, self._reading = key, {}, {}

    def _keep(self, key: Hashable, fresh: dict) -> None:
        with self._lock:
            if key != self._key:
                return
            self._kept.update(fresh)
            while self._most is not None and len(self._kept) > self._most:
                del self._kept[next(iter(self._kept))]


def state_key(state: IndexerState | None) -> Hashable:
    """What identifies one indexed state (None: nothing indexed yet)."""
    if state is None:
        return None
    return (state.chain_id, state.coordinator, state.state_version)


def leaderboard(
    conn: Connection,
    *,
    sort: str,
    order: str,
    limit: int,
    offset: int,
) -> dict:
    """One page of peers with their rank and committee duty, and the total number of peers: a
    read of the totals kept with each peer (``derive``, "Leaderboard totals"), whatever their
    number. Ties in the sorted column keep rank order. (The server keeps what it reads per
    indexed state: ``RankedPeers``.)"""
    peers = ranked_peers(conn)
    ranks = peers.page(peers.order(sort, order), limit, offset)
    found = peers.entries(ranks)
    return {"total": peers.total, "entries": [found[rank] for rank in ranks]}


class RankedPeers:
    """Every ranked peer's row, read at once, in rank order: what the leaderboard's pages of one
    indexed state are cut from. Each sort's order is a sort of these rows in Python (no further
    scan), and a page's entries are built from them (no read per page, so the pages of one
    state are of one read)."""

    def __init__(self, rows: Sequence[Any]) -> None:
        self.rows = list(rows)
        self.total = len(self.rows)
        self._by_rank = {int(row.rank): row for row in self.rows}

    def order(self, sort: str, order: str) -> list[int]:
        """Every peer's rank in ``sort``'s ``order``, ties in rank order (the rows are in rank
        order and Python's sort is stable, also with ``reverse``). Names compare by code point,
        the same on every database."""
        if sort == "rank":
            ranks = [int(row.rank) for row in self.rows]
            return ranks if order == "asc" else ranks[::-1]
        if not self.rows:
            return []
        position = self.rows[0]._fields.index(SORTS[sort])
        ordered = sorted(self.rows, key=itemgetter(position), reverse=order == "desc")
        return [int(row.rank) for row in ordered]

    @staticmethod
    def page(ordered: list[int], limit: int, offset: int) -> list[int]:
        return ordered[offset : offset + limit]

    def entries(self, ranks: Sequence[int]) -> dict[int, dict]:
        """The leaderboard entry of the peer at each of ``ranks`` (one no peer holds is left
        out)."""
        return {rank: _peer_entry(self._by_rank[rank]) for rank in ranks if rank in self._by_rank}


def ranked_peers(conn: Connection) -> RankedPeers:
    """One read of every ranked peer's row (``RankedPeers``)."""
    return RankedPeers(conn.execute(select(_P).where(_P.c.rank.is_not(None)).order_by(_P.c.rank)))


def peer_rank(conn: Connection, address: str) -> int | None:
    return conn.execute(select(_P.c.rank).where(_P.c.address == address)).scalar()


def _peer_entry(row: Any) -> dict:
    return {
        "rank": int(row.rank),
        "address": row.address,
        "name": row.name,
        "status": row.status,
        "verified_reward": row.verified_milli / 1000,
        "claimed_reward": row.claimed_milli / 1000,
        "rounds": row.rounds,
        "verified_batches": row.verified_batches,
        "stake_wei": row.stake_wei,
        "stake_eth": int(row.stake_wei) / 10**18,
        "slashes": row.slashes,
        "slashed_wei": row.slashed_wei,
        "flags_received": row.flags_received,
        "verdicts_counted": row.attestations_given,
        "pending_batches": int(row.pending_batches),
        "last_round": row.last_round,
        "duty_seats": int(row.duty_seats),
        "duty_done": int(row.duty_done),
        "duty_missed": int(row.duty_missed),
        "out_of_range_batches": int(row.out_of_range_batches),
    }


def peer(conn: Connection, address: str, *, closed_before: int | None = None) -> dict | None:
    """One peer's summary, its batches round by round, its stake history and its committee
    duty per round; None if unknown."""
    row = conn.execute(select(_P).where(_P.c.address == address)).first()
    if row is None:
        return None
    p, s = schema.publications, schema.stake_changes
    batches = conn.execute(select(p).where(p.c.peer == address).order_by(p.c.round)).all()
    changes = conn.execute(
        select(s).where(s.c.peer == address).order_by(s.c.block_number, s.c.log_index)
    ).all()
    u = schema.duties
    duties = conn.execute(select(u).where(u.c.peer == address).order_by(u.c.round)).all()
    return {
        **_peer_entry(row),
        "registered_block": row.registered_block,
        "withdrawable_at": row.withdrawable_at,
        "endpoint": _latest_endpoint(conn, address),
        "batches": [_batch(b, closed_before) for b in batches],
        "stake_history": _stake_history(changes),
        "duties": [_duty(d, closed_before) for d in duties],
    }


def _duty(row: Any, closed_before: int | None) -> dict:
    closed = closed_before is not None and row.round < closed_before
    return {
        "round": row.round,
        "seats": row.seats,
        "done": row.done,
        "missed": row.seats - row.done if closed else 0,
        "closed": closed,
    }


def _latest_endpoint(conn: Connection, address: str) -> dict | None:
    """The peer's latest announcement as announced; None if none or withdrawn (empty)."""
    e = schema.endpoints
    latest = conn.execute(
        select(e)
        .where(e.c.peer == address)
        .order_by(e.c.block_number.desc(), e.c.log_index.desc())
        .limit(1)
    ).first()
    if latest is None or latest.endpoint == "0x":
        return None
    try:
        text = bytes.fromhex(latest.endpoint[2:]).decode("utf-8")
    except UnicodeDecodeError:
        text = None
    return {
        "data": latest.endpoint,
        "text": text,
        "block_number": latest.block_number,
        "tx_hash": latest.tx_hash,
    }


def _batch(row: Any, closed_before: int | None) -> dict:
    return {
        "round": row.round,
        "peer": row.peer,
        "digest": row.digest,
        "groups": row.groups,
        "completions": row.completions,
        "claimed_reward": row.claimed_milli / 1000,
        "verified_reward": None if row.verified_milli is None else row.verified_milli / 1000,
        "reward_max": row.reward_max_milli / 1000,
        "claimed_in_range": bool(row.claimed_in_range),
        "verified_in_range": None if row.verified_in_range is None else bool(row.verified_in_range),
        "verdicts_counted": row.attestations,
        "agreements": row.agreements,
        "flags": row.flags,
        "agree_weight_wei": row.agree_weight_wei,
        "flag_weight_wei": row.flag_weight_wei,
        "ignored": row.ignored,
        "evidence": row.evidence,
        "outcome": row.outcome,
        "verified": bool(row.verified),
        "pending": batch_is_pending(row.round, bool(row.settled), row.flags, closed_before),
        "settled": bool(row.settled),
        "slashed": bool(row.slashed),
        "relayer": row.relayer,
        "block_number": row.block_number,
        "tx_hash": row.tx_hash,
    }


def _stake_history(changes: list[Any]) -> list[dict]:
    history, stake = [], 0
    for change in changes:
        amount = int(change.amount_wei)
        if change.kind == "register":
            stake = amount
        elif change.kind == "add":
            stake = int(change.total_wei) if change.total_wei is not None else stake + amount
        elif change.kind in ("slash", "forfeit", "penalty", "withdraw"):
            stake = max(0, stake - amount)
        history.append(
            {
                "kind": change.kind,
                "amount_wei": change.amount_wei,
                "stake_after_wei": str(stake),
                "withdrawable_at": change.withdrawable_at,
                "counts_from_round": change.counts_from_round,
                "block_number": change.block_number,
                "tx_hash": change.tx_hash,
            }
        )
    return history


def round_detail(conn: Connection, round_: int, *, closed_before: int | None = None) -> dict | None:
    """One round's totals, its batches (by verified reward) with their committee votes, and the
    committee duty of each seated peer; None when nothing is indexed."""
    row = conn.execute(select(schema.rounds).where(schema.rounds.c.round == round_)).first()
    if row is None:
        return None
    p = schema.publications
    batches = conn.execute(
        select(p, _P.c.name)
        .join(_P, _P.c.address == p.c.peer, isouter=True)
        .where(p.c.round == round_)
        .order_by(  # by the verified reward that counts; none, or out of range, last
            case((p.c.verified_in_range == true(), p.c.verified_milli), else_=-1).desc(),
            address_order(p.c.peer),
        )
    ).all()
    votes = _round_votes(conn, round_, {b.peer: b.reward_max_milli for b in batches})
    evidence = _round_evidence(conn, round_)
    u = schema.duties
    duties = conn.execute(
        select(u, _P.c.name)
        .join(_P, _P.c.address == u.c.peer, isouter=True)
        .where(u.c.round == round_)
        .order_by(address_order(u.c.peer))
    ).all()
    shown = [
        {
            **_batch(b, closed_before),
            "name": b.name,
            "votes": votes.get(b.peer, []),
            "evidence_posted": evidence.get(b.peer, []),
        }
        for b in batches
    ]
    return {
        **_round_entry(row, sum(b["pending"] for b in shown), closed_before),
        "batches": shown,
        "duties": [{**_duty(d, closed_before), "peer": d.peer, "name": d.name} for d in duties],
    }


def _round_votes(conn: Connection, round_: int, maxima: dict[str, int]) -> dict[str, list[dict]]:
    """The round's committee votes per subject, in the order they were revealed; ``maxima``:
    each subject's batch maximum (a vote on a subject without a batch is in range of none)."""
    return _per_subject(
        conn,
        schema.votes,
        round_,
        lambda row: {
            "voter": row.attester,
            "checked": row.checked,
            "agreed": row.agreed,
            "verified_reward": row.verified_milli / 1000,
            "in_range": in_reward_range(row.verified_milli, maxima.get(row.subject, -1)),
            "is_flag": bool(row.is_flag),
            "counted": bool(row.counted),
            "weight_wei": row.weight_wei,
            "block_number": row.block_number,
            "tx_hash": row.tx_hash,
        },
    )


def _round_evidence(conn: Connection, round_: int) -> dict[str, list[dict]]:
    """The round's provenance evidence per subject, in chain order."""
    return _per_subject(
        conn,
        schema.evidence,
        round_,
        lambda row: {
            "poster": row.poster,
            "group": row.group_index,
            "completion": row.completion_index,
            "token": row.token_index,
            "block_number": row.block_number,
            "tx_hash": row.tx_hash,
        },
    )


def _per_subject(
    conn: Connection, table: Table, round_: int, entry: Callable[[Any], dict]
) -> dict[str, list[dict]]:
    """``entry`` of each row of ``table`` of the round, per subject, in chain order."""
    rows = conn.execute(
        select(table)
        .where(table.c.round == round_)
        .order_by(table.c.block_number, table.c.log_index)
    ).all()
    out: dict[str, list[dict]] = {}
    for row in rows:
        out.setdefault(row.subject, []).append(entry(row))
    return out


def _round_entry(row: Any, pending_batches: int, closed_before: int | None) -> dict:
    """A round's totals; ``pending_batches``: how many of its batches are pending."""
    closed = closed_before is not None and row.round < closed_before
    return {
        "round": row.round,
        "publications": row.publications,
        "groups": row.groups,
        "completions": row.completions,
        "claimed_reward": row.claimed_milli / 1000,
        "verified_reward": row.verified_milli / 1000,
        "batches_with_verdicts": row.attested_batches,
        "verdicts_counted": row.attestations,
        "flags": row.flags,
        "disputes": row.disputes,
        "slashes": row.slashes,
        "sealed": bool(row.sealed),
        "seats": row.seats,
        "seats_done": row.seats_done,
        "out_of_range_batches": row.out_of_range_batches,
        "closed": closed,
        "pending_batches": pending_batches,
        "pending": not closed or pending_batches > 0,
    }


def rounds_page(
    conn: Connection, *, limit: int, offset: int, order: str, closed_before: int | None = None
) -> dict:
    """Round totals (the swarm's reward-over-rounds series), paged, with which are pending."""
    r = schema.rounds
    ordering = r.c.round.desc() if order == "desc" else r.c.round.asc()
    rows = conn.execute(select(r).order_by(ordering).limit(limit).offset(offset)).all()
    total = conn.execute(select(func.count()).select_from(r)).scalar_one()
    pending = _pending_per_round(conn, [row.round for row in rows], closed_before)
    entries = [_round_entry(row, pending.get(row.round, 0), closed_before) for row in rows]
    return {"total": int(total), "entries": entries}


def _pending_per_round(
    conn: Connection, rounds: list[int], closed_before: int | None
) -> dict[int, int]:
    """How many batches of each of ``rounds`` are pending (rounds without any: absent)."""
    if not rounds:
        return {}
    p = schema.publications
    query = (
        select(p.c.round, count_pending(closed_before, p))
        .where(p.c.round.in_(rounds))
        .group_by(p.c.round)
    )
    return {row[0]: int(row[1]) for row in conn.execute(query)}


def stats(conn: Connection, state: IndexerState | None, round_duration: int, genesis: int) -> dict:
    """Swarm totals: peers, rounds, batches, and how much of it other peers verified."""
    p = schema.publications
    closed_before = state.closed_before(genesis, round_duration) if state is not None else None
    peers = conn.execute(
        select(
            func.count(),
            func.coalesce(func.sum(case((_P.c.status == "active", 1), else_=0)), 0),
            func.coalesce(func.sum(_P.c.slashes), 0),
        ).select_from(_P)
    ).one()
    batches = conn.execute(
        select(
            func.count(),
            func.count(p.c.verified_milli),
            count_verified(p),
            func.coalesce(func.sum(counted_claim(p)), 0),
            func.coalesce(func.sum(counted_verified(p)), 0),
            func.count(func.distinct(p.c.round)),
            func.max(p.c.round),
            count_out_of_range(p),
            count_pending(closed_before, p),
        )
    ).one()
    unapplied = conn.execute(select(func.count()).select_from(schema.unapplied_events)).scalar_one()
    stake_rows = conn.execute(select(_P.c.stake_wei).where(_P.c.status != "withdrawn")).all()
    counted = conn.execute(
        select(func.count()).select_from(schema.votes).where(schema.votes.c.counted == true())
    ).scalar_one()
    total_batches, with_verdicts, verified = int(batches[0]), int(batches[1]), int(batches[2])
    current_round = None
    if state is not None and state.cursor_timestamp >= genesis:
        current_round = (state.cursor_timestamp - genesis) // round_duration
    return {
        "peers": int(peers[0]),
        "active_peers": int(peers[1]),
        "slashes": int(peers[2]),
        "total_stake_wei": str(sum(int(r.stake_wei) for r in stake_rows)),
        "rounds": int(batches[5]),
        "latest_round": batches[6],
        "current_round": current_round,
        "batches": total_batches,
        "batches_with_verdicts": with_verdicts,
        "verified_batches": verified,
        "verified_share": verified / total_batches if total_batches else 0.0,
        "pending_batches": int(batches[8]),
        "verdicts_counted": int(counted),
        "claimed_reward": int(batches[3]) / 1000,
        "verified_reward": int(batches[4]) / 1000,
        "out_of_range_batches": int(batches[7]),
        "unapplied_events": int(unapplied),
    }

"""A range's rows applied going forward: derived rows brought up to date by what changed.

``derive.recompute`` rebuilds the derived rows of the keys a change touched from all their
history. Going forward that made a range's cost grow with the swarm, not with the range: every
round touches every peer, so every range rebuilt every peer's totals (and every touched round's
committee seats). ``apply_rows`` does the same work in proportion to the range:

- **batches**: the verdict columns of the batches the range touched, recomputed from their votes
  (``derive``; a batch has a committee's worth of them);
- **duties**: a round's seats are drawn again only when its seal or its subjects arrive in the
  range; a vote changes only its attester's row in its round;
- **peers**: each total moves by the difference its batches and duty rows made (their shares before
  and after, at the cursor's ``closed_before``), plus the counted votes the range added. When the
  cursor's round moves, the batches and duty rows of the rounds it crossed change their pending and
  missed shares, and nothing else does. A peer whose registration or stake changed is rebuilt from
  its history (``derive``), as is everyone when the kept totals are stale or the rules changed.

What these are made of (a touched batch's votes, a voter's votes and seal weight, duty rows before
and after, a round's rows for its totals) is read from the touched rounds' rows kept in memory
(``recent``), not from the database: a range reads back only the batches and duty rows of the
rounds the cursor's round crossed.

Going back (a reorg) still rebuilds what the removed rows touched (``derive.recompute``), and
tests hold both to a fresh index of the same chain: the two ways cannot drift apart unnoticed.
"""

from __future__ import annotations

from collections import defaultdict
from collections.abc import Mapping
from typing import Any

from sqlalchemy import Connection, Table, and_, bindparam, false, or_, select

from coordinator_indexer import derive, schema
from coordinator_indexer.bulk import execute_many
from coordinator_indexer.derive import Phase
from coordinator_indexer.recent import RecentRounds
from coordinator_indexer.records import Records
from coordinator_indexer.round_rules import RulesHistory, read_rules_history

#: Peer totals moved by deltas (the peers table's columns).
_SUMS = (
    "rounds",
    "verified_batches",
    "claimed_milli",
    "verified_milli",
    "out_of_range_batches",
    "flags_received",
    "pending_batches",
    "duty_seats",
    "duty_done",
    "duty_missed",
    "attestations_given",
)
#: What a range moves each peer's totals by: peer -> sum -> delta (a plain ``defaultdict(int)``
#: per peer: a ``Counter``'s Python-level constructor and ``__missing__`` cost more, 10,000 a range).
Shares = defaultdict[str, defaultdict[str, int]]


def _new_shares() -> Shares:
    return defaultdict(lambda: defaultdict(int))


#: Each sum's parameter name in the statement that moves it.
_DELTAS = tuple((f"d_{name}", name) for name in _SUMS)


def apply_rows(conn: Connection, records: Records, phase: Phase, recent: RecentRounds) -> None:
    """Inserts ``records``' rows and brings every derived row up to date (module docstring);
    ``recent`` holds the touched rounds' rows as the database does, before and after."""
    if records.touched.rules or phase.stale or (phase.kept is None) != (phase.now is None):
        recent.clear()
        _insert(conn, records)
        derive.recompute(conn, records.touched, phase)
        return
    rows = records.rows
    rules = read_rules_history(conn)
    recent.load(conn, records.touched.rounds)
    shares = _new_shares()
    _add_phase_move(conn, phase, shares)
    seat_rounds = {row["round"] for row in rows[schema.seals]} | {
        row["round"] for row in rows[schema.publications]
    }
    voters = {(row["round"], row["attester"]) for row in rows[schema.votes]}
    voters = {(r, a) for r, a in voters if r not in seat_rounds}
    duties_before = _duties(recent, seat_rounds, voters)
    new = _fill_new_batches(recent, rows, rules)
    _insert(conn, records)
    recent.add(rows)
    for row in new.values():
        _add(shares, row["peer"], _batch_share(row, phase.now), 1)
    arrived = {(row["round"], row["peer"]) for row in rows[schema.publications]}
    for before, verdict in _write_verdicts(conn, recent, records.touched.batches - set(new), rules):
        if (before["round"], before["peer"]) not in arrived:  # a new row had no share before
            _add(shares, before["peer"], _batch_share(before, phase.now), -1)
        _add(shares, before["peer"], _batch_share({**before, **verdict}, phase.now), 1)
    duties_after = _write_duties(conn, recent, seat_rounds, voters)
    for (round_, peer), duty in duties_before.items():
        _add(shares, peer, _duty_share(round_, duty, phase.now), -1)
    for (round_, peer), duty in duties_after.items():
        _add(shares, peer, _duty_share(round_, duty, phase.now), 1)
    for row in rows[schema.votes]:
        if row["counted"]:
            shares[row["attester"]]["attestations_given"] += 1
    rebuilt = {row["peer"] for row in (*rows[schema.registrations], *rows[schema.stake_changes])}
    moved = _move_peers(conn, {p: s for p, s in shares.items() if p not in rebuilt}, arrived)
    derive.recompute_peers(conn, rebuilt, phase.now)
    if rebuilt or moved:
        derive.rerank(conn)
    _write_rounds(conn, recent, records.touched.rounds)
    recent.evict(keep=records.touched.rounds)


def _insert(conn: Connection, records: Records) -> None:
    for table, rows in records.rows.items():
        shapes: defaultdict[tuple[str, ...], list[dict[str, Any]]] = defaultdict(list)
        for row in rows:
            shapes[tuple(row)].append(row)
        for same in shapes.values():
            execute_many(conn, table.insert(), same)


def _fill_new_batches(
    recent: RecentRounds, rows: dict[Table, list[dict[str, Any]]], rules: RulesHistory
) -> dict[tuple[int, str], dict[str, Any]]:
    """Writes the verdict columns of the range's new batches into their rows before they go in,
    where nothing else (a vote, a settlement, evidence, in this range or an earlier one) can have
    a say in them yet; returns those rows by key. The others are recomputed after the insert."""
    spoken = set()
    for table in (schema.votes, schema.settlements, schema.evidence):
        spoken.update((row["round"], row["subject"]) for row in rows[table])
    new = {}
    for row in rows[schema.publications]:
        key = (row["round"], row["peer"])
        if key in spoken or key in new or recent[row["round"]].spoken(row["peer"]):
            continue  # judged before it was published (a stand-in contract can), or a duplicate
        maximum = rules.batch_max_milli(row["round"])
        row.update(derive.verdict_of_new_batch(row["claimed_milli"], maximum))
        new[key] = row
    return new


def _write_verdicts(
    conn: Connection, recent: RecentRounds, batches: set[tuple[int, str]], rules: RulesHistory
) -> list[tuple[dict[str, Any], dict[str, Any]]]:
    """``derive.write_verdicts`` of the published ``batches``, from ``recent``'s rows (which
    take the new columns too)."""
    by_round: defaultdict[int, list[str]] = defaultdict(list)
    for round_, subject in batches:
        by_round[round_].append(subject)
    changes = []
    for round_, subjects in sorted(by_round.items()):
        rows = recent[round_]
        inputs = [
            (rows.published[subject], *rows.verdict_inputs(subject))
            for subject in sorted(subjects)
            if subject in rows.published
        ]
        changed = derive.write_verdicts(conn, inputs, rules.batch_max_milli(round_))
        for before, verdict in changed:
            rows.published[before["peer"]].update(
                (name, verdict[name]) for name in derive.SHARE_COLUMNS if name in verdict
            )
        changes += changed
    return changes


def _duties(
    recent: RecentRounds, rounds: set[int], pairs: set[tuple[int, str]]
) -> dict[tuple[int, str], tuple[int, int]]:
    """The duty rows (seats, done) of every peer in ``rounds`` and of the ``pairs``, as kept."""
    duties = {}
    for round_ in rounds:
        duties.update(((round_, peer), row) for peer, row in recent[round_].duties.items())
    for round_, peer in pairs:
        row = recent[round_].duties.get(peer)
        if row is not None:
            duties[(round_, peer)] = row
    return duties


def _write_duties(
    conn: Connection, recent: RecentRounds, rounds: set[int], pairs: set[tuple[int, str]]
) -> dict[tuple[int, str], tuple[int, int]]:
    """Draws the duty rows of ``rounds`` (whose seal or subjects arrived) and of the ``pairs``
    (voters of other rounds) again from ``recent``'s rows, writes those that changed and keeps
    them there; returns them as ``_duties`` does."""
    u = schema.duties
    for round_ in sorted(rounds):
        rows = recent[round_]
        rows.duties = rows.all_duties(round_)
        conn.execute(u.delete().where(u.c.round == round_))
        execute_many(conn, u.insert(), [_duty_row(round_, p, d) for p, d in rows.duties.items()])
    for round_, peers in derive.round_chunks(pairs):
        rows = recent[round_]
        drawn = {peer: rows.duty(round_, peer) for peer in peers}
        changed = [peer for peer, duty in drawn.items() if duty != rows.duties.get(peer)]
        if not changed:
            continue
        conn.execute(u.delete().where(u.c.round == round_, u.c.peer.in_(changed)))
        for peer in changed:
            if drawn[peer] is None:
                rows.duties.pop(peer, None)
            else:
                rows.duties[peer] = drawn[peer]
        fresh = [_duty_row(round_, peer, rows.duties[peer]) for peer in changed if drawn[peer]]
        execute_many(conn, u.insert(), fresh)
    return _duties(recent, rounds, pairs)


def _duty_row(round_: int, peer: str, duty: tuple[int, int]) -> dict[str, Any]:
    return {"round": round_, "peer": peer, "seats": duty[0], "done": duty[1]}


def _write_rounds(conn: Connection, recent: RecentRounds, rounds: set[int]) -> None:
    """The ``rounds`` rows of ``rounds``, from ``recent``'s rows."""
    for chunk in derive.chunks(rounds):
        rows = [recent[round_].totals(round_) for round_ in chunk]
        derive.write_round_rows(conn, chunk, [row for row in rows if row is not None])


def _batch_share(row: Mapping[str, Any], closed_before: int | None) -> dict[str, int]:
    """What one batch (its ``derive.SHARE_COLUMNS``) adds to its publisher's totals (derive's
    definitions)."""
    in_range = row["verified_in_range"]
    claimed_counts = bool(row["claimed_in_range"])
    verified_counts = in_range is not None and bool(in_range)
    outside = not claimed_counts or (in_range is not None and not verified_counts)
    pending = derive.batch_is_pending(
        row["round"], bool(row["settled"]), row["flags"], closed_before
    )
    return {
        "rounds": 1,
        "verified_batches": int(bool(row["verified"])),
        "claimed_milli": row["claimed_milli"] if claimed_counts else 0,
        "verified_milli": row["verified_milli"] if verified_counts else 0,
        "out_of_range_batches": int(outside),
        "flags_received": row["flags"],
        "pending_batches": int(pending),
    }


def _duty_share(round_: int, duty: tuple[int, int], closed_before: int | None) -> dict[str, int]:
    """What one duty row (seats, done) of ``round_`` adds to its peer's totals."""
    seats, done = duty
    closed = closed_before is not None and round_ < closed_before
    return {"duty_seats": seats, "duty_done": done, "duty_missed": seats - done if closed else 0}


def _add(shares: Shares, peer: str, share: dict[str, int], sign: int) -> None:
    counter = shares[peer]
    for name, value in share.items():
        if value:
            counter[name] += sign * value


def _add_phase_move(conn: Connection, phase: Phase, shares: Shares) -> None:
    """The pending and missed shares that change as ``closed_before`` moves from ``phase.kept``
    to ``phase.now``: those of the batches and duty rows in the rounds between (before the range's
    rows go in, so that the range's own rows are counted at ``now`` once)."""
    if phase.kept is None or phase.now is None or phase.kept == phase.now:
        return
    low, high = sorted((phase.kept, phase.now))
    p, u = schema.publications, schema.duties
    crossed = and_(p.c.round >= low, p.c.round < high, p.c.settled == false())
    for row in conn.execute(select(p.c.round, p.c.peer, p.c.settled, p.c.flags).where(crossed)):
        was = derive.batch_is_pending(row.round, bool(row.settled), row.flags, phase.kept)
        now = derive.batch_is_pending(row.round, bool(row.settled), row.flags, phase.now)
        shares[row.peer]["pending_batches"] += int(now) - int(was)
    for row in conn.execute(select(u).where(u.c.round >= low, u.c.round < high)):
        duty = (row.seats, row.done)
        was = _duty_share(row.round, duty, phase.kept)["duty_missed"]
        shares[row.peer]["duty_missed"] += (
            _duty_share(row.round, duty, phase.now)["duty_missed"] - was
        )


def _move_peers(
    conn: Connection, shares: Mapping[str, Mapping[str, int]], published: set[tuple[int, str]]
) -> bool:
    """Adds ``shares`` to the peers' rows (a peer without a row, never registered, has none to
    move), raising ``last_round`` to the newest round it ``published`` in; True when a verified
    or claimed total moved (the ranking may have)."""
    p = schema.peers
    moving = sorted(peer for peer, share in shares.items() if any(share.values()))
    if moving:
        add = p.update().where(p.c.address == bindparam("k_address"))
        add = add.values({name: p.c[name] + bindparam(key) for key, name in _DELTAS})
        params = [
            {"k_address": peer, **{key: shares[peer].get(name, 0) for key, name in _DELTAS}}
            for peer in moving
        ]
        execute_many(conn, add, params)
    newest: dict[str, int] = {}
    for round_, peer in published:
        newest[peer] = max(round_, newest.get(peer, round_))
    if newest:
        last = bindparam("k_round")
        later = or_(p.c.last_round.is_(None), p.c.last_round < last)
        raise_last = p.update().where(p.c.address == bindparam("k_address"), later)
        execute_many(
            conn,
            raise_last.values(last_round=last),
            [{"k_address": peer, "k_round": round_} for peer, round_ in sorted(newest.items())],
        )
    return any(
        shares[peer].get("verified_milli") or shares[peer].get("claimed_milli") for peer in moving
    )

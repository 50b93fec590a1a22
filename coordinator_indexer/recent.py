"""The rows of the rounds a range touched, kept in memory between ranges (``advance``).

A round's votes arrive over several ranges (its committee reveals through the reveal phase), and
each range recomputed the derived rows they touch from what the database held: every vote on each
touched batch, every vote and the seal weight of each voter, their duty rows before and after, the
whole round for its totals. ``RecentRounds`` keeps what those are made of for the rounds touched
last, as the database holds it, and ``advance`` reads it there: a range reads nothing back and
writes its rows and the derived rows they change.

It is only as good as its agreement with the database, so it is kept for one database state:
``Store`` tags it with ``indexer_state.state_version`` (every write of derived rows counts one)
after each range it applied, and drops it when the version is not that one (a rollback, a rebuild,
another writer), when a transaction fails, and when a range recomputes everything instead. A round
not kept (never seen, or evicted: the budget below) is read from the database when touched.
"""

from __future__ import annotations

from collections import Counter, OrderedDict, defaultdict
from collections.abc import Iterable, Mapping, Sequence
from dataclasses import dataclass, field
from typing import Any, NamedTuple

from sqlalchemy import Connection, Table, select

from coordinator_indexer import derive, schema

#: Rows kept in all (publications, votes, seal weights; 250-400 bytes of memory each, so about
#: 120 MB at most): at 10,000 peers and k = 3 a round is about 50,000, so the rounds of a judging
#: window fit. A round of the current range is never evicted, whatever its size.
ROWS_KEPT = 300_000


class Vote(NamedTuple):
    """What a batch's verdict is made of, of one of its votes (``derive._verdict``)."""

    verified_milli: int
    weight_wei: int | None
    is_flag: bool
    counted: bool


class Seal(NamedTuple):
    """What a round's seat ring is made of (``derive.seat_ring``)."""

    beacon: str
    total_weight_wei: str
    committee_size: int


#: Publication columns kept: what a batch adds to its publisher's and its round's totals.
PUBLISHED_COLUMNS = (*derive.SHARE_COLUMNS, "groups", "completions")


@dataclass
class RoundRows:
    """One round's rows, as the database holds them."""

    seal: Seal | None = None
    published: dict[str, dict[str, Any]] = field(default_factory=dict)  # subject -> columns
    votes: defaultdict[str, dict[str, Vote]] = field(
        default_factory=lambda: defaultdict(dict)
    )  # subject -> attester -> vote
    ballots: defaultdict[str, dict[str, bool]] = field(
        default_factory=lambda: defaultdict(dict)
    )  # attester -> subject -> counted
    outcomes: dict[str, int] = field(default_factory=dict)  # subject -> DisputeSettled.outcome
    evidence: Counter[str] = field(default_factory=Counter)  # subject -> evidence rows
    weights: dict[str, int] = field(default_factory=dict)  # peer -> weightAt at the seal
    duties: dict[str, tuple[int, int]] = field(default_factory=dict)  # peer -> (seats, done)
    _ring: Any = None  # the seat ring of the seal and subjects as they are; None: not drawn

    @property
    def size(self) -> int:
        return len(self.published) + len(self.weights) + sum(map(len, self.ballots.values()))

    def spoken(self, subject: str) -> bool:
        """Whether a vote, a settlement or evidence names the batch of ``subject``."""
        return subject in self.votes or subject in self.outcomes or subject in self.evidence

    def seal_with(self, seal: Seal) -> None:
        self.seal, self._ring = seal, None

    def publish(self, row: Mapping[str, Any]) -> None:
        self.published[row["peer"]] = {name: row[name] for name in PUBLISHED_COLUMNS}
        self._ring = None

    def add_vote(self, subject: str, attester: str, vote: Vote) -> None:
        self.votes[subject][attester] = vote
        self.ballots[attester][subject] = vote.counted

    def verdict_inputs(self, subject: str) -> tuple[list[Vote], str | None, int]:
        """The batch's votes, its outcome (``derive.settlement_outcome``) and evidence count."""
        outcome = derive.settlement_outcome(self.outcomes.get(subject))
        return list(self.votes.get(subject, {}).values()), outcome, self.evidence.get(subject, 0)

    def duty(self, round_: int, peer: str) -> tuple[int, int] | None:
        """``peer``'s duty row as ``derive.duty_row`` draws it (None: no seat, or not sealed)."""
        if self.seal is None:
            return None
        if self._ring is None:
            self._ring = (derive.seat_ring(round_, self.seal, list(self.published)),)
        ballot = self.ballots.get(peer, {})
        row = derive.duty_row(round_, self._ring[0], peer, self.weights.get(peer, 0), ballot)
        return None if row is None else (row["seats"], row["done"])

    def all_duties(self, round_: int) -> dict[str, tuple[int, int]]:
        """Every duty row of the round (``derive.recompute_duties``'s peers)."""
        peers = sorted(set(self.weights) | set(self.ballots))
        drawn = {peer: self.duty(round_, peer) for peer in peers}
        return {peer: row for peer, row in drawn.items() if row is not None}

    def counted_votes(self) -> tuple[int, int]:
        """How many votes of the round counted, and how many of those are flags."""
        counted = [v for votes in self.votes.values() for v in votes.values() if v.counted]
        return len(counted), sum(1 for vote in counted if vote.is_flag)

    def totals(self, round_: int) -> dict[str, Any] | None:
        """The round's ``rounds`` row (``derive.recompute_rounds``), None when it has none."""
        return derive.round_row_of(
            round_,
            list(self.published.values()),
            self.counted_votes(),
            list(self.outcomes.values()),
            list(self.duties.values()),
            self.seal is not None,
        )


class RecentRounds:
    """``RoundRows`` of the rounds touched last, for one database state (module docstring)."""

    def __init__(self, rows_kept: int = ROWS_KEPT) -> None:
        self.rows_kept = rows_kept
        self.version: int | None = None
        self._rounds: OrderedDict[int, RoundRows] = OrderedDict()

    def clear(self) -> None:
        self.version = None
        self._rounds.clear()

    def keep_for(self, version: int) -> None:
        """Drops the rounds kept unless they are the database's at ``version``."""
        if self.version != version:
            self.clear()

    def __getitem__(self, round_: int) -> RoundRows:
        return self._rounds[round_]

    def load(self, conn: Connection, rounds: Iterable[int]) -> None:
        """Reads the rounds not kept from the database and marks all of them as used last."""
        wanted = set(rounds)
        for chunk in derive.chunks(wanted - set(self._rounds)):
            for round_ in chunk:
                self._rounds[round_] = RoundRows()
            self.add(_read_rows(conn, chunk))
            for row in conn.execute(select(schema.duties).where(schema.duties.c.round.in_(chunk))):
                self._rounds[row.round].duties[row.peer] = (row.seats, row.done)
        for round_ in sorted(wanted):
            self._rounds.move_to_end(round_)

    def add(self, rows: Mapping[Table, Sequence[Mapping[str, Any]]]) -> None:
        """Adds a range's rows, as they went into the database (their rounds are loaded)."""
        for row in rows.get(schema.seals, ()):
            self._rounds[row["round"]].seal_with(_seal(row))
        for row in rows.get(schema.seal_weights, ()):
            self._rounds[row["round"]].weights[row["peer"]] = int(row["weight_wei"])
        for row in rows.get(schema.publications, ()):
            self._rounds[row["round"]].publish(row)
        for row in rows.get(schema.votes, ()):
            self._rounds[row["round"]].add_vote(row["subject"], row["attester"], _vote(row))
        for row in rows.get(schema.settlements, ()):
            self._rounds[row["round"]].outcomes[row["subject"]] = row["outcome"]
        for row in rows.get(schema.evidence, ()):
            self._rounds[row["round"]].evidence[row["subject"]] += 1

    def evict(self, keep: set[int]) -> None:
        """Drops the rounds used longest ago, but not those of ``keep``, while over the budget."""
        size = sum(rows.size for rows in self._rounds.values())
        for round_ in list(self._rounds):
            if size <= self.rows_kept:
                return
            if round_ not in keep:
                size -= self._rounds.pop(round_).size


def _seal(row: Any) -> Seal:
    return Seal(row["beacon"], row["total_weight_wei"], row["committee_size"])


def _vote(row: Mapping[str, Any]) -> Vote:
    weight = None if row["weight_wei"] is None else int(row["weight_wei"])
    return Vote(row["verified_milli"], weight, bool(row["is_flag"]), bool(row["counted"]))


def _read_rows(conn: Connection, chunk: list[int]) -> dict[Table, Sequence[Mapping[str, Any]]]:
    """The event rows ``RecentRounds.add`` takes, of the rounds of ``chunk``, from the database."""
    p = schema.publications
    tables = (schema.seals, schema.seal_weights, schema.votes, schema.settlements, schema.evidence)
    rows = {
        table: list(conn.execute(select(table).where(table.c.round.in_(chunk))).mappings())
        for table in tables
    }
    columns = [p.c[name] for name in PUBLISHED_COLUMNS]
    rows[p] = list(conn.execute(select(*columns).where(p.c.round.in_(chunk))).mappings())
    return rows

"""Derived rows, recomputed from the event tables for the keys a change touched.

Definitions (the leaderboard's meaning; docs/INDEXER.md, "What the leaderboard means"):

- A batch's **claimed reward** is its publisher's ``rewardSum`` (``RolloutsPublished``).
- A batch's **verified reward** is the *stake-weighted median* of the ``verifiedRewardSum`` values
  its committee revealed (``VerdictRevealed``, each with its vote weight; ignored items do not
  count), :func:`weighted_median_milli`; and once settled, the outcome decides: an **upheld** batch
  (slashed) and an **inconclusive** one (neither side won) verify nothing (0). A batch no committee
  vote counted on has no verified reward (NULL), and counts 0 towards its peer's total.
- A batch's **outcome** is its ``DisputeSettled.outcome`` (:func:`settlement_outcome`): 2 upheld,
  3 rejected, 4 inconclusive; any other value, like no settlement, leaves it unsettled (NULL).
- A batch's claim and verified reward are kept as they are, and **count only within [0, the batch
  maximum]** (``round_rules.batch_reward_max_milli``: n x G x 1000 of the round's rules, no batch
  can be worth more). One outside is shown as it is, flagged out of range, and counts 0, so a
  publisher's claim or a committee's reveal can neither skew the ranking nor overflow a sum
  (docs/PROTOCOL.md, "Verified reward").
- A peer's **verified reward** is the sum of its batches' verified rewards in range; its **claimed
  reward** the sum of its claims in range. Both are milli-units, reward x 1000 (docs/PROTOCOL.md,
  "Rewards in milli-units"), sums of values of at most 2,048,000 each.
- A batch is **verified** (:func:`batch_is_verified`) when at least one committee vote agreed, its
  agreeing weight is at least its flagging weight, it was neither upheld nor inconclusive, and its
  verified reward is not out of range. A peer's ``verified_batches`` and ``/api/stats`` count
  exactly these.
- A batch is **pending** (:func:`batch_is_pending`) while its outcome can still change: it is not
  settled, and either its round's reveal phase is not over (its committee may still reveal) or a
  counted flag waits for the dispute to be settled. Its verified reward so far is no verdict yet.
  Pending depends on the indexed block's round: a batch's flag is computed when read, a peer's
  count is kept as of the cursor (below, "Leaderboard totals"); without the round's phases
  (``closed_before`` None) every unsettled batch is pending.
- **Committee duty** of a peer in a sealed round: the seats it held (the seat rule,
  ``node.chain.committee.RoundSeats``, over the seal's beacon and total weight, the round's
  committee size and the peer's ``weightAt`` read at the seal's block) on the committees of the
  round's published batches, and how many of them it revealed a verdict on (``duties``).

**Leaderboard totals**: each peer's row also keeps what the leaderboard sorts and shows, so that
a page is an indexed read, whatever the number of peers: its ``rank`` (by verified reward, then
claimed reward, then the address as a number; no two peers tie), its duty totals (seats, done, and
missed in the rounds below ``closed_before``) and its pending batches. The last two depend on the
indexed block's round, so they are kept as of the ``closed_before`` of the cursor they were written
with (``Phase``); when it moves, the peers with a duty or an unsettled batch in the rounds it
crossed are recomputed too.

Everything here is recomputed from scratch for the touched keys (delete, then insert): after a
reorg's rollback, on a rebuild (``Store.rebuild``), when the rules change or the kept totals are
stale. Going forward, a range's rows move the derived rows by what they change instead
(``advance``, which uses the per-key recomputations below); tests hold the two to each other.
"""

from __future__ import annotations

from collections import defaultdict
from collections.abc import Iterable, Iterator, Mapping, Sequence
from dataclasses import dataclass
from typing import Any, TypeVar

from sqlalchemy import (
    ColumnElement,
    Connection,
    String,
    and_,
    bindparam,
    case,
    desc,
    false,
    func,
    or_,
    select,
    true,
    update,
)
from sqlalchemy.ext.compiler import compiles
from sqlalchemy.sql.functions import FunctionElement

from coordinator_indexer import schema
from coordinator_indexer.bulk import execute_many
from coordinator_indexer.records import Touched
from coordinator_indexer.round_rules import RulesHistory, read_rules_history
from coordinator_indexer.schema import INT64_MAX, UINT256_MAX
from node.chain.committee import RoundSeats
from node.chain.models import VerdictState, weighted_median_milli

T = TypeVar("T")
_CHUNK = 400  # keys per IN (...) list: well under every database's parameter limit
_GWEI = 10**9
#: DisputeSettled.outcome values that settle a batch (VerdictState; docs/PROTOCOL.md, "Outcome").
UPHELD, REJECTED, INCONCLUSIVE = (
    int(state) for state in (VerdictState.UPHELD, VerdictState.REJECTED, VerdictState.INCONCLUSIVE)
)
OUTCOMES = {UPHELD: "upheld", REJECTED: "rejected", INCONCLUSIVE: "inconclusive"}
#: Settled outcomes whose batch verifies nothing: its verified reward is 0.
_NO_REWARD = ("upheld", "inconclusive")


def settlement_outcome(value: int | None) -> str | None:
    """A batch's outcome from its ``DisputeSettled.outcome`` (None: no settlement). A value that
    is no settled VerdictState (a stand-in contract can emit any uint8) settles nothing: None."""
    return OUTCOMES.get(value) if value is not None else None


def in_reward_range(value: int, maximum: int) -> bool:
    """Whether a claimed or verified reward counts: within [0, maximum]."""
    return 0 <= value <= maximum


def counted_claim(publications: Any = schema.publications) -> ColumnElement[int]:
    """A batch's claim as it counts towards totals: as claimed when in range, else 0."""
    p = publications
    return case((p.c.claimed_in_range == true(), p.c.claimed_milli), else_=0)


def counted_verified(publications: Any = schema.publications) -> ColumnElement[int]:
    """A batch's verified reward as it counts: when in range, else 0 (also when there is none)."""
    p = publications
    return case((p.c.verified_in_range == true(), p.c.verified_milli), else_=0)


def count_out_of_range(publications: Any = schema.publications) -> ColumnElement[int]:
    """How many of the selected batches have a claim or a verified reward out of range."""
    p = publications
    outside = or_(p.c.claimed_in_range == false(), p.c.verified_in_range == false())
    return func.coalesce(func.sum(case((outside, 1), else_=0)), 0)


def _wei_text(value: int) -> str:
    """A derived wei sum as stored: decimal text, capped at 2^256 - 1 (no on-chain amount gets
    there; the column holds 78 digits)."""
    return str(min(value, UINT256_MAX))


def batch_is_verified(
    agreements: int,
    agree_weight: int,
    flag_weight: int,
    outcome: str | None,
    verified_in_range: bool | None = True,
) -> bool:
    """The one definition of a *verified* batch (see the module docstring)."""
    if agreements == 0 or outcome in _NO_REWARD or verified_in_range is False:
        return False
    return agree_weight >= flag_weight


def is_verified(publications: Any = schema.publications) -> ColumnElement[bool]:
    """:func:`batch_is_verified` as a SQL predicate (it is stored with the batch)."""
    return publications.c.verified == true()


def count_verified(publications: Any = schema.publications) -> ColumnElement[int]:
    """How many of the selected batches are verified (0 for none)."""
    return func.coalesce(func.sum(case((is_verified(publications), 1), else_=0)), 0)


def batch_is_pending(round_: int, settled: bool, flags: int, closed_before: int | None) -> bool:
    """The one definition of a *pending* batch (see the module docstring): ``closed_before`` is
    the first round whose reveal phase is not over (``IndexerState.closed_before``)."""
    if settled:
        return False
    return closed_before is None or round_ >= closed_before or flags > 0


def is_pending(
    closed_before: int | None, publications: Any = schema.publications
) -> ColumnElement[bool]:
    """:func:`batch_is_pending` as a SQL predicate."""
    p = publications
    if closed_before is None:
        return p.c.settled == false()
    return and_(p.c.settled == false(), or_(p.c.round >= closed_before, p.c.flags > 0))


def count_pending(
    closed_before: int | None, publications: Any = schema.publications
) -> ColumnElement[int]:
    """How many of the selected batches are pending (0 for none)."""
    pending = is_pending(closed_before, publications)
    return func.coalesce(func.sum(case((pending, 1), else_=0)), 0)


@dataclass(frozen=True)
class Phase:
    """``closed_before`` at the cursor being written (``now``), and the one the peers' pending
    and missed totals were kept for (``kept``; ``stale``: none, every peer is recomputed)."""

    now: int | None = None
    kept: int | None = None
    stale: bool = False


def recompute(conn: Connection, touched: Touched, phase: Phase = Phase()) -> None:
    """Brings every derived row of ``touched``, and the leaderboard totals ``phase`` moved, in
    line with the event tables."""
    rules = read_rules_history(conn)
    if touched.rules:
        touched = _with_changed_maxima(conn, touched, rules)
    recompute_verdicts(conn, set(touched.batches), rules)
    seated = recompute_duties(conn, touched.rounds)
    peers = touched.peers | seated | _peers_the_phase_moved(conn, phase)
    recompute_peers(conn, peers, phase.now)
    if peers:
        rerank(conn)
    recompute_rounds(conn, touched.rounds)


def chunks(items: Iterable[T]) -> Iterator[list[T]]:
    chunk: list[T] = []
    for item in sorted(items):  # type: ignore[type-var]
        chunk.append(item)
        if len(chunk) == _CHUNK:
            yield chunk
            chunk = []
    if chunk:
        yield chunk


def round_chunks(keys: Iterable[tuple[int, str]]) -> Iterator[tuple[int, list[str]]]:
    """(round, addresses) keys as (round, up to ``_CHUNK`` addresses) pairs: ``round = ? AND
    address IN (...)`` searches a (round, address) primary key, where SQLite answers a row-value
    ``(round, address) IN (...)`` list by scanning the whole table."""
    by_round: defaultdict[int, list[str]] = defaultdict(list)
    for round_, address in keys:
        by_round[round_].append(address)
    for round_ in sorted(by_round):
        for chunk in chunks(by_round[round_]):
            yield round_, chunk


class address_order(FunctionElement):  # noqa: N801 - used like a SQL function
    """Sorts addresses by value (uint160, as the contract orders subjects), not by their EIP-55
    text, where 0xF9.. sorts before 0xf6..: lowercased, 40 hex digits compare as the number, in
    byte order (COLLATE "C" on Postgres, whose database collation may be a locale's)."""

    type = String()
    inherit_cache = True


@compiles(address_order)
def _address_order(element: address_order, compiler: Any, **kw: Any) -> str:
    return f"lower({compiler.process(element.clauses, **kw)})"


@compiles(address_order, "postgresql")
def _address_order_postgres(element: address_order, compiler: Any, **kw: Any) -> str:
    return f'lower({compiler.process(element.clauses, **kw)}) COLLATE "C"'


# ------------------------------------------------------------------------------------ verdicts

_VERDICT_COLUMNS = (
    "attestations",
    "agreements",
    "flags",
    "verified_milli",
    "settled",
    "slashed",
    "agree_weight_wei",
    "flag_weight_wei",
    "ignored",
    "outcome",
    "verified",
    "reward_max_milli",
    "claimed_in_range",
    "verified_in_range",
    "evidence",
)


def _with_changed_maxima(conn: Connection, touched: Touched, rules: RulesHistory) -> Touched:
    """``touched`` and every batch whose stored maximum is no longer its round's (the rules
    changed: rare, so every batch is looked at)."""
    p = schema.publications
    changed = Touched()
    changed.update(touched)
    maxima: dict[int, int] = {}
    for row in conn.execute(select(p.c.round, p.c.peer, p.c.reward_max_milli)):
        if row.round not in maxima:
            maxima[row.round] = rules.batch_max_milli(row.round)
        if row.reward_max_milli != maxima[row.round]:
            changed.batch(row.round, row.peer)
    return changed


def recompute_verdicts(
    conn: Connection, batches: set[tuple[int, str]], rules: RulesHistory
) -> list[tuple[dict[str, Any], dict[str, Any]]]:
    """Recomputes the verdict columns of ``batches`` from the database's rows (``write_verdicts``
    for what it returns)."""
    v, d = schema.votes, schema.settlements
    changes = []
    for round_, subjects in round_chunks(batches):
        votes: dict[str, list[Any]] = defaultdict(list)
        query = select(*_VOTE_COLUMNS).where(v.c.round == round_, v.c.subject.in_(subjects))
        for row in conn.execute(query):
            votes[row.subject].append(row)
        outcomes = {
            row.subject: settlement_outcome(row.outcome)
            for row in conn.execute(
                select(d.c.subject, d.c.outcome).where(
                    d.c.round == round_, d.c.subject.in_(subjects)
                )
            )
        }
        evidence = _evidence_counts(conn, round_, subjects)
        inputs = [
            (row, votes[subject], outcomes.get(subject), evidence.get(subject, 0))
            for subject, row in _published(conn, round_, subjects).items()
        ]
        changes += write_verdicts(conn, inputs, rules.batch_max_milli(round_))
    return changes


#: One batch's verdict inputs: its publication row (``SHARE_COLUMNS``), its votes (each with
#: ``_VOTE_COLUMNS``' attributes), its outcome (``settlement_outcome``) and its evidence count.
VerdictInputs = tuple[Mapping[str, Any], Sequence[Any], str | None, int]

_VERDICT_UPDATE = (
    schema.publications.update()
    .where(
        and_(
            schema.publications.c.round == bindparam("k_round"),
            schema.publications.c.peer == bindparam("k_peer"),
        )
    )
    .values({name: bindparam(name) for name in _VERDICT_COLUMNS})
)


def write_verdicts(
    conn: Connection, batches: Iterable[VerdictInputs], maximum: int
) -> list[tuple[dict[str, Any], dict[str, Any]]]:
    """Writes the verdict columns of published batches of one round (batch maximum
    ``maximum``); returns each one's publication row as it was and its new verdict columns (what
    its publisher's totals move by)."""
    changes, params = [], []
    for row, votes, outcome, evidence in batches:
        values = _verdict(votes, outcome, row["claimed_milli"], maximum)
        values["evidence"] = evidence
        params.append({"k_round": row["round"], "k_peer": row["peer"], **values})
        changes.append((dict(row), values))
    execute_many(conn, _VERDICT_UPDATE, params)
    return changes


def verdict_of_new_batch(claimed: int, maximum: int) -> dict[str, Any]:
    """The verdict columns of a batch with no votes, settlement or evidence yet."""
    return {**_verdict([], None, claimed, maximum), "evidence": 0}


#: What a batch's verdict is made of, of each of its votes.
_VOTE_COLUMNS = tuple(
    schema.votes.c[name]
    for name in ("subject", "verified_milli", "weight_wei", "is_flag", "counted")
)
#: What a batch adds to its publisher's totals is made of (``advance``), and its claim.
SHARE_COLUMNS = (
    "round", "peer", "claimed_milli", "claimed_in_range", "verified_in_range", "verified",
    "verified_milli", "settled", "flags",
)  # fmt: skip


def _published(conn: Connection, round_: int, peers: list[str]) -> dict[str, Any]:
    """The publication rows (the columns of ``SHARE_COLUMNS``) of ``peers``' batches of
    ``round_`` that were published."""
    p = schema.publications
    query = select(*(p.c[name] for name in SHARE_COLUMNS)).where(
        p.c.round == round_, p.c.peer.in_(peers)
    )
    return {row["peer"]: row for row in conn.execute(query).mappings()}


def _evidence_counts(conn: Connection, round_: int, subjects: list[str]) -> dict[str, int]:
    """How many recomputing seats posted provenance evidence on each of these batches."""
    e = schema.evidence
    query = (
        select(e.c.subject, func.count())
        .where(e.c.round == round_, e.c.subject.in_(subjects))
        .group_by(e.c.subject)
    )
    return {row[0]: int(row[1]) for row in conn.execute(query)}


def _reward_range(maximum: int, claimed: int | None, verified: int | None) -> dict[str, Any]:
    """A batch's maximum and whether its claim and verified reward (None: none) are in range."""
    return {
        "reward_max_milli": maximum,
        "claimed_in_range": claimed is not None and in_reward_range(claimed, maximum),
        "verified_in_range": None if verified is None else in_reward_range(verified, maximum),
    }


def _verdict(
    votes: list[Any], outcome: str | None, claimed: int | None, maximum: int
) -> dict[str, Any]:
    """A batch's derived verdict and range columns from its votes, its outcome (None:
    unsettled), its claim (None: not published) and its batch maximum."""
    counted: list[tuple[int, int]] = []  # (verified_milli, weight) of each counted vote
    flags = agree_weight = flag_weight = 0
    for vote in votes:  # one pass: a batch is recomputed each time a vote on it arrives
        if not vote.counted:
            continue
        weight = int(vote.weight_wei)
        counted.append((vote.verified_milli, weight))
        if vote.is_flag:
            flags += 1
            flag_weight += weight
        else:
            agree_weight += weight
    agreements = len(counted) - flags
    verified = 0 if outcome in _NO_REWARD else weighted_median_milli(counted)
    ranges = _reward_range(maximum, claimed, verified)
    in_range = ranges["verified_in_range"]
    return {
        **ranges,
        "attestations": len(counted),
        "agreements": agreements,
        "flags": flags,
        "verified_milli": verified,
        "settled": outcome is not None,
        "slashed": outcome == "upheld",
        "agree_weight_wei": _wei_text(agree_weight),
        "flag_weight_wei": _wei_text(flag_weight),
        "ignored": len(votes) - len(counted),
        "outcome": outcome,
        "verified": batch_is_verified(agreements, agree_weight, flag_weight, outcome, in_range),
    }


# -------------------------------------------------------------------------------------- duties


def recompute_duties(conn: Connection, rounds: set[int]) -> set[str]:
    """Recomputes the duties of ``rounds``; returns the peers seated in them, before or after."""
    s, w, p, v = schema.seals, schema.seal_weights, schema.publications, schema.votes
    u = schema.duties
    seated: set[str] = set()
    for chunk in chunks(rounds):
        seated.update(conn.execute(select(u.c.peer).where(u.c.round.in_(chunk))).scalars())
        seals = {row.round: row for row in conn.execute(select(s).where(s.c.round.in_(chunk)))}
        subjects: dict[int, list[str]] = defaultdict(list)
        for row in conn.execute(select(p.c.round, p.c.peer).where(p.c.round.in_(chunk))):
            subjects[row.round].append(row.peer)
        weights: dict[int, dict[str, int]] = defaultdict(dict)
        for row in conn.execute(select(w).where(w.c.round.in_(chunk))):
            weights[row.round][row.peer] = int(row.weight_wei)
        voted: dict[tuple[int, str], dict[str, bool]] = defaultdict(dict)
        for row in conn.execute(
            select(v.c.round, v.c.subject, v.c.attester, v.c.counted).where(v.c.round.in_(chunk))
        ):
            voted[(row.round, row.attester)][row.subject] = bool(row.counted)
        conn.execute(schema.duties.delete().where(schema.duties.c.round.in_(chunk)))
        rows = [
            row
            for round_, seal in seals.items()
            for row in _duty_rows(round_, seal, subjects[round_], weights[round_], voted)
        ]
        execute_many(conn, schema.duties.insert(), rows)
        seated.update(row["peer"] for row in rows)
    return seated


def _duty_rows(
    round_: int,
    seal: Any,
    subjects: list[str],
    weights: dict[str, int],
    voted: dict[tuple[int, str], dict[str, bool]],
) -> list[dict[str, Any]]:
    """One row per peer that held a seat in the round: seats held and seats revealed on."""
    ring = seat_ring(round_, seal, subjects)
    peers = sorted(set(weights) | {attester for r, attester in voted if r == round_})
    rows = (
        duty_row(round_, ring, peer, weights.get(peer, 0), voted.get((round_, peer), {}))
        for peer in peers
    )
    return [row for row in rows if row is not None]


def duty_row(
    round_: int, ring: RoundSeats | None, peer: str, weight: int, votes: dict[str, bool]
) -> dict[str, Any] | None:
    """``peer``'s duty in the round (None: no seat), from its ``weight`` at the seal and its
    ``votes`` (subject -> counted).

    A counted vote proves a seat even where the weights read at the seal say otherwise; with no
    committee size (a chain whose rulesAt says 0) only those seats are known."""
    drawn = ring.of(peer, weight) if ring is not None else []
    seats = set(drawn) | {subject for subject, counted in votes.items() if counted}
    if not seats:
        return None
    done = sum(1 for subject in seats if subject in votes)
    return {"round": round_, "peer": peer, "seats": len(seats), "done": done}


_RINGS: dict[tuple[Any, ...], RoundSeats] = {}
_RINGS_KEPT = 16


def seat_ring(round_: int, seal: Any, subjects: list[str]) -> RoundSeats | None:
    """The round's seat ring (None without a committee size), kept for the last few rounds
    asked: a round's votes arrive over several ranges, and each asks for its ring again. Keyed
    by everything the ring is made of, so a changed seal or subject set makes a new one."""
    if seal.committee_size < 1:
        return None
    key = (round_, seal.beacon, seal.total_weight_wei, seal.committee_size, *sorted(subjects))
    ring = _RINGS.get(key)
    if ring is None:
        beacon, total = bytes.fromhex(seal.beacon[2:]), int(seal.total_weight_wei)
        ring = RoundSeats(beacon, total, seal.committee_size, subjects)
        if len(_RINGS) >= _RINGS_KEPT:
            _RINGS.pop(next(iter(_RINGS)))
        _RINGS[key] = ring
    return ring


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
        elif change.kind in ("forfeit", "penalty"):
            stake = max(0, stake - amount)
        elif change.kind == "exit":
            status, withdrawable_at = "exiting", change.withdrawable_at
        elif change.kind == "withdraw":
            stake, status = max(0, stake - amount), "withdrawn"
    return {
        "stake_wei": str(stake),
        "stake_gwei": min(stake // _GWEI, INT64_MAX),  # a sort key; stake_wei is exact
        "status": status,
        "withdrawable_at": withdrawable_at,
        "slashes": slashes,
        "slashed_wei": _wei_text(slashed),
    }


def _peers_the_phase_moved(conn: Connection, phase: Phase) -> set[str]:
    """The peers whose pending or missed totals may differ between ``phase.kept`` and
    ``phase.now``: every peer when none were kept, else those with a duty or an unsettled batch
    in the rounds between the two (pending and missed change only there)."""
    if phase.stale or (phase.kept is None) != (phase.now is None):
        return set(conn.execute(select(schema.registrations.c.peer)).scalars())
    if phase.kept == phase.now or phase.kept is None or phase.now is None:
        return set()
    low, high = sorted((phase.kept, phase.now))
    u, p = schema.duties, schema.publications
    crossed = set(
        conn.execute(select(u.c.peer).where(u.c.round >= low, u.c.round < high)).scalars()
    )
    unsettled = select(p.c.peer).where(p.c.round >= low, p.c.round < high, p.c.settled == false())
    return crossed | set(conn.execute(unsettled).scalars())


def recompute_peers(conn: Connection, peers: set[str], closed_before: int | None) -> None:
    r, s, p, a = (
        schema.registrations,
        schema.stake_changes,
        schema.publications,
        schema.votes,
    )
    for chunk in chunks(peers):
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
                    func.coalesce(func.sum(counted_claim(p)), 0).label("claimed"),
                    func.coalesce(func.sum(counted_verified(p)), 0).label("verified"),
                    count_out_of_range(p).label("out_of_range"),
                    func.coalesce(func.sum(p.c.flags), 0).label("flags"),
                    func.max(p.c.round).label("last_round"),
                    count_pending(closed_before, p).label("pending"),
                )
                .where(p.c.peer.in_(chunk))
                .group_by(p.c.peer)
            )
        }
        duty = _duty_totals(conn, chunk, closed_before)
        given = dict(
            conn.execute(
                select(a.c.attester, func.count())
                .where(a.c.attester.in_(chunk), a.c.counted == true())
                .group_by(a.c.attester)
            ).all()
        )
        conn.execute(schema.peers.delete().where(schema.peers.c.address.in_(chunk)))
        rows = [
            {
                **_peer_row(registration, changes[peer], published.get(peer), given.get(peer, 0)),
                **duty.get(peer, _NO_DUTY),
            }
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
        "out_of_range_batches": int(published.out_of_range) if published else 0,
        "pending_batches": int(published.pending) if published else 0,
    }


_NO_DUTY = {"duty_seats": 0, "duty_done": 0, "duty_missed": 0}


def _duty_totals(
    conn: Connection, peers: list[str], closed_before: int | None
) -> dict[str, dict[str, int]]:
    """Per peer of ``peers``: seats held, done, and missed in the rounds below ``closed_before``
    (none missed without it)."""
    u = schema.duties
    closed = -1 if closed_before is None else closed_before
    missed = case((u.c.round < closed, u.c.seats - u.c.done), else_=0)
    query = (
        select(
            u.c.peer,
            func.sum(u.c.seats).label("seats"),
            func.sum(u.c.done).label("done"),
            func.sum(missed).label("missed"),
        )
        .where(u.c.peer.in_(peers))
        .group_by(u.c.peer)
    )
    return {
        row.peer: {
            "duty_seats": int(row.seats),
            "duty_done": int(row.done),
            "duty_missed": int(row.missed),
        }
        for row in conn.execute(query)
    }


def rank_order(peers: Any = schema.peers) -> list[Any]:
    """The leaderboard's order: verified reward, then claimed reward, descending, then the address
    as a number (``address_order``), so that no two peers tie."""
    p = peers
    return [desc(p.c.verified_milli), desc(p.c.claimed_milli), address_order(p.c.address)]


def rerank(conn: Connection) -> None:
    """Every peer's ``rank`` by ``rank_order``, written where it changed (one statement)."""
    p = schema.peers
    ranked = select(p.c.address, func.row_number().over(order_by=rank_order()).label("rank"))
    ranked = ranked.subquery("ranked")
    conn.execute(
        update(p)
        .where(p.c.address == ranked.c.address)
        .where(or_(p.c.rank.is_(None), p.c.rank != ranked.c.rank))
        .values(rank=ranked.c.rank)
    )


# -------------------------------------------------------------------------------------- rounds


def recompute_rounds(conn: Connection, rounds: set[int]) -> None:
    """Rewrites the ``rounds`` rows of ``rounds`` from their event and duty rows."""
    p, v, d, u, s = (
        schema.publications,
        schema.votes,
        schema.settlements,
        schema.duties,
        schema.seals,
    )
    for chunk in chunks(rounds):
        published: dict[int, list[Any]] = defaultdict(list)
        columns = [p.c.round, *(p.c[name] for name in ROUND_COLUMNS)]
        for row in conn.execute(select(*columns).where(p.c.round.in_(chunk))):
            published[row[0]].append(dict(zip(ROUND_COLUMNS, row[1:], strict=True)))
        counted = select(
            v.c.round, func.count(), func.coalesce(func.sum(case((v.c.is_flag, 1), else_=0)), 0)
        ).where(v.c.round.in_(chunk), v.c.counted == true())
        votes = {
            row[0]: (int(row[1]), int(row[2])) for row in conn.execute(counted.group_by(v.c.round))
        }
        outcomes: dict[int, list[int]] = defaultdict(list)
        for row in conn.execute(select(d.c.round, d.c.outcome).where(d.c.round.in_(chunk))):
            outcomes[row.round].append(row.outcome)
        duties: dict[int, list[tuple[int, int]]] = defaultdict(list)
        for row in conn.execute(select(u.c.round, u.c.seats, u.c.done).where(u.c.round.in_(chunk))):
            duties[row.round].append((row.seats, row.done))
        sealed = set(conn.execute(select(s.c.round).where(s.c.round.in_(chunk))).scalars())
        rows = [
            round_row_of(
                round_,
                published[round_],
                votes.get(round_, (0, 0)),
                outcomes[round_],
                duties[round_],
                round_ in sealed,
            )
            for round_ in chunk
        ]
        write_round_rows(conn, chunk, [row for row in rows if row is not None])


def write_round_rows(conn: Connection, rounds: list[int], rows: list[dict[str, Any]]) -> None:
    """Replaces the ``rounds`` rows of ``rounds`` by ``rows``."""
    conn.execute(schema.rounds.delete().where(schema.rounds.c.round.in_(rounds)))
    execute_many(conn, schema.rounds.insert(), rows)


#: Publication columns a round's totals are made of.
ROUND_COLUMNS = (
    "groups", "completions", "claimed_milli", "claimed_in_range", "verified_milli",
    "verified_in_range",
)  # fmt: skip


def round_row_of(
    round_: int,
    published: Sequence[Mapping[str, Any]],
    counted: tuple[int, int],
    outcomes: Iterable[int],
    duties: Iterable[tuple[int, int]],
    sealed: bool,
) -> dict[str, Any] | None:
    """A round's ``rounds`` row from its publication rows (``ROUND_COLUMNS``), its counted votes
    (how many, how many of them flags), its settlements' outcomes as emitted and its duty rows
    (seats, done); None when nothing was published, counted, settled or sealed in it."""
    attestations, flags = counted
    settled = [outcome for outcome in outcomes if outcome in OUTCOMES]
    duties = list(duties)
    if not (published or attestations or settled or sealed or duties):
        return None
    return {
        "round": round_,
        "publications": len(published),
        "groups": sum(row["groups"] for row in published),
        "completions": sum(row["completions"] for row in published),
        "claimed_milli": sum(r["claimed_milli"] for r in published if r["claimed_in_range"]),
        "verified_milli": sum(r["verified_milli"] for r in published if r["verified_in_range"]),
        "attested_batches": sum(1 for row in published if row["verified_milli"] is not None),
        "attestations": attestations,
        "flags": flags,
        "disputes": len(settled),
        "slashes": sum(1 for outcome in settled if outcome == UPHELD),
        "sealed": sealed,
        "seats": sum(seats for seats, _ in duties),
        "seats_done": sum(done for _, done in duties),
        "out_of_range_batches": sum(
            1
            for row in published
            if not row["claimed_in_range"] or row["verified_in_range"] is False
        ),
    }

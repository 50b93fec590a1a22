"""Turning decoded coordinator events into event-table rows, and noting which derived rows they
touch (the peers, rounds and (round, subject) batches whose aggregates must be recomputed).

No event value can make a row the database refuses (schema docstring, "Values as the chain gave
them"): an event whose round is above what the tables hold, and a log the decoder refused
(``RefusedLog``), become an ``unapplied_events`` row; rounds that are no key are capped; names are
made storable.
"""

from __future__ import annotations

import json
from collections import defaultdict
from collections.abc import Iterable, Mapping
from dataclasses import dataclass, field
from typing import Any

from sqlalchemy import Table

from coordinator_indexer import schema
from coordinator_indexer.schema import INT64_MAX
from node.chain.events import (
    AgreementPenalized,
    ChainEvent,
    Claimed,
    DisputeSettled,
    EndpointAnnounced,
    ExitRequested,
    FlagResolved,
    ParametersScheduled,
    PeerRegistered,
    ProvenanceEvidence,
    RolloutsPublished,
    RoundSealed,
    StakeAdded,
    VerdictIgnored,
    VerdictRevealed,
    VerdictsCommitted,
    Withdrawn,
)

_POSITION = ("block_number", "log_index", "tx_hash")
_NAME_CHARS = 128  # registrations.name, peers.name


@dataclass(frozen=True)
class SealReads:
    """What the chain said at a seal's block besides the event: the round's committee size
    (``rulesAt(round)``) and every registered peer's ``weightAt(peer, round)`` above zero."""

    committee_size: int
    weights: dict[str, int]


@dataclass(frozen=True)
class RefusedLog:
    """A coordinator log the event decoder refused (a value its event's model rejects, or bytes
    that do not decode): kept as it is in ``unapplied_events``, applied to nothing."""

    block_number: int
    block_hash: str
    log_index: int
    tx_hash: str
    event: str
    reason: str
    topics: tuple[str, ...]
    data: str

    @property
    def position(self) -> tuple[int, int]:
        return (self.block_number, self.log_index)


def unstorable(event: ChainEvent) -> str | None:
    """Why ``event`` cannot be applied to the tables; None when it can. Rounds key most tables
    and are int64 there; the coordinator's rounds follow the clock and stay far below 2^63."""
    round_ = getattr(event, "round", None)
    if isinstance(round_, int) and round_ > INT64_MAX:
        return f"round {round_} is above 2^63 - 1, the largest round the tables hold"
    return None


def _round_field(value: int) -> int:
    """A round that keys nothing (when stake counts, an exit may withdraw, rules apply): capped
    at 2^63 - 1, which means "never" as much as any larger round does."""
    return min(value, INT64_MAX)


def _name(name: str) -> str:
    """A registered name as the tables can hold it: NUL replaced (Postgres text refuses it),
    cut to the column's length (the contract allows 32 bytes)."""
    return name.replace("\x00", "\ufffd")[:_NAME_CHARS]


@dataclass
class Touched:
    """Keys whose derived rows need recomputing after rows were added or removed; ``rules``:
    a ParametersScheduled (kept or refused) was, so batch maxima may have changed."""

    peers: set[str] = field(default_factory=set)
    rounds: set[int] = field(default_factory=set)
    batches: set[tuple[int, str]] = field(default_factory=set)  # (round, subject)
    rules: bool = False

    def update(self, other: Touched) -> None:
        self.peers |= other.peers
        self.rounds |= other.rounds
        self.batches |= other.batches
        self.rules |= other.rules

    def __bool__(self) -> bool:
        return bool(self.peers or self.rounds or self.batches or self.rules)

    def batch(self, round_: int, subject: str, *peers: str) -> None:
        """A (round, subject) batch changed, and with it these peers and the round."""
        self.batches.add((round_, subject))
        self.rounds.add(round_)
        self.peers.update((subject, *peers))


@dataclass
class Records:
    """Rows to insert, per table, and what they touch."""

    rows: dict[Table, list[dict[str, Any]]] = field(default_factory=lambda: defaultdict(list))
    touched: Touched = field(default_factory=Touched)

    @property
    def count(self) -> int:
        return sum(len(rows) for rows in self.rows.values())


def records_of(
    events: Iterable[ChainEvent],
    seal_reads: Mapping[int, SealReads] | None = None,
    refused: Iterable[RefusedLog] = (),
) -> Records:
    """Rows for ``events`` (in chain order) and the ``refused`` logs; ``seal_reads[round]`` for
    each RoundSealed the tables can hold."""
    records = Records()
    for event in events:
        reason = unstorable(event)
        if reason is not None:
            _add_unapplied(records, event, event.event, reason, _event_json(event))
        elif isinstance(event, RoundSealed):
            _add_seal(records, event, (seal_reads or {})[event.round])
        else:
            _add(records, event)
    for log in refused:
        data = json.dumps({"topics": list(log.topics), "data": log.data})
        _add_unapplied(records, log, log.event, log.reason, data)
        if log.event == "ParametersScheduled":  # its rounds' rules are now unknown
            records.touched.rules = True
    return records


def _add_unapplied(
    records: Records, where: ChainEvent | RefusedLog, event: str, reason: str, data: str
) -> None:
    records.rows[schema.unapplied_events].append(
        {**_position(where), "event": event, "reason": reason, "data": data}
    )


def _event_json(event: ChainEvent) -> str:
    """The event's values as JSON (integers exact, whatever their size)."""
    data = event.model_dump(mode="json", exclude={*_POSITION, "block_hash"})
    return json.dumps(data, sort_keys=True)


def _position(event: ChainEvent | RefusedLog) -> dict[str, Any]:
    return {
        "block_number": event.block_number,
        "log_index": event.log_index,
        "tx_hash": event.tx_hash,
    }


def _stake_row(event: ChainEvent, peer: str, kind: str, amount: int, **extra: Any) -> dict:
    return {
        **_position(event),
        "peer": peer,
        "kind": kind,
        "amount_wei": str(amount),
        "total_wei": extra.get("total_wei"),
        **{
            name: None if extra.get(name) is None else _round_field(extra[name])
            for name in ("withdrawable_at", "counts_from_round", "exit_round")
        },
    }


def _add_seal(records: Records, event: RoundSealed, reads: SealReads) -> None:
    records.rows[schema.seals].append(
        {
            **_position(event),
            "round": event.round,
            "beacon": "0x" + bytes(event.beacon).hex(),
            "total_weight_wei": str(event.total_weight),
            "committee_size": reads.committee_size,
        }
    )
    records.rows[schema.seal_weights].extend(
        seal_weight_rows(event.round, event.block_number, reads.weights)
    )
    records.touched.rounds.add(event.round)


def seal_weight_rows(round_: int, block_number: int, weights: Mapping[str, int]) -> list[dict]:
    """The ``seal_weights`` rows of a seal of ``round_`` in block ``block_number``: one per peer
    whose weight is above zero."""
    return [
        {"round": round_, "peer": peer, "weight_wei": str(weight), "block_number": block_number}
        for peer, weight in sorted(weights.items())
        if weight > 0
    ]


def _add(records: Records, event: ChainEvent) -> None:
    if not (_add_peer_event(records, event) or _add_verdict_event(records, event)):
        _add_other(records, event)


def _add_peer_event(records: Records, event: ChainEvent) -> bool:  # noqa: C901 - one per type
    """Registrations, stake, publications, endpoints; False for another event."""
    rows, touched = records.rows, records.touched
    match event:
        case PeerRegistered():
            rows[schema.registrations].append(
                {
                    **_position(event),
                    "peer": event.peer,
                    "name": _name(event.name),
                    "stake_wei": str(event.stake),
                }
            )
            rows[schema.stake_changes].append(
                _stake_row(event, event.peer, "register", event.stake)
            )
            touched.peers.add(event.peer)
        case StakeAdded():
            rows[schema.stake_changes].append(
                _stake_row(
                    event,
                    event.peer,
                    "add",
                    event.amount,
                    total_wei=str(event.total_stake),
                    counts_from_round=event.counts_from_round,
                )
            )
            touched.peers.add(event.peer)
        case ExitRequested():
            rows[schema.stake_changes].append(
                _stake_row(
                    event,
                    event.peer,
                    "exit",
                    0,
                    withdrawable_at=event.withdrawable_from_round,
                    exit_round=event.exit_round,
                )
            )
            touched.peers.add(event.peer)
        case Withdrawn():
            rows[schema.stake_changes].append(
                _stake_row(event, event.peer, "withdraw", event.amount)
            )
            touched.peers.add(event.peer)
        case RolloutsPublished():
            rows[schema.publications].append(_publication_row(event))
            touched.batch(event.round, event.peer)
        case EndpointAnnounced():
            rows[schema.endpoints].append(
                {**_position(event), "peer": event.peer, "endpoint": "0x" + event.endpoint.hex()}
            )
        case _:
            return False
    return True


def _publication_row(event: RolloutsPublished) -> dict[str, Any]:
    return {
        **_position(event),
        "round": event.round,
        "peer": event.peer,
        "digest": "0x" + event.digest.hex(),
        "groups": event.groups,
        "completions": event.completions,
        "claimed_milli": event.reward_sum,
        "relayer": event.relayer,
        "attestations": 0,
        "agreements": 0,
        "flags": 0,
        "verified_milli": None,
        "settled": False,
        "slashed": False,
        "agree_weight_wei": "0",
        "flag_weight_wei": "0",
        "ignored": 0,
        "outcome": None,
        "verified": False,
        "reward_max_milli": 0,  # the range columns are derived (derive._reward_range)
        "claimed_in_range": False,
        "verified_in_range": None,
    }


def _vote_row(event: VerdictRevealed | VerdictIgnored, weight: int | None) -> dict[str, Any]:
    return {
        **_position(event),
        "round": event.round,
        "subject": event.subject,
        "attester": event.attester,
        "checked": event.checked,
        "agreed": event.agreed,
        "verified_milli": event.verified_reward_sum,
        "is_flag": event.agreed < event.checked,
        "counted": weight is not None,
        "weight_wei": None if weight is None else str(weight),
    }


def _add_verdict_event(records: Records, event: ChainEvent) -> bool:  # noqa: C901 - one per type
    """Commit-reveal, settlement and its aftermath, rules, claims; False for another event."""
    rows, touched = records.rows, records.touched
    match event:
        case VerdictsCommitted():
            rows[schema.commits].append(
                {**_position(event), "round": event.round, "attester": event.attester}
            )
            touched.peers.add(event.attester)
        case ProvenanceEvidence():
            rows[schema.evidence].append(
                {
                    **_position(event),
                    "round": event.round,
                    "subject": event.subject,
                    "poster": event.poster,
                    "group_index": event.group,
                    "completion_index": event.completion,
                    "token_index": event.token,
                }
            )
            touched.batch(event.round, event.subject)
        case VerdictRevealed():
            rows[schema.votes].append(_vote_row(event, event.weight))
            touched.batch(event.round, event.subject, event.attester)
        case VerdictIgnored():
            rows[schema.votes].append(_vote_row(event, None))
            touched.batch(event.round, event.subject, event.attester)
        case DisputeSettled():
            rows[schema.settlements].append(_settlement_row(event))
            if event.slashed and event.amount > 0:
                rows[schema.stake_changes].append(
                    _stake_row(event, event.subject, "slash", event.amount)
                )
            touched.batch(event.round, event.subject)
        case FlagResolved():
            rows[schema.flag_resolutions].append(
                {
                    **_position(event),
                    "round": event.round,
                    "subject": event.subject,
                    "flagger": event.flagger,
                    "upheld": event.upheld,
                    "amount_wei": str(event.amount),
                }
            )
            if not event.upheld and event.amount > 0:  # the bond leaves the flagger's stake
                rows[schema.stake_changes].append(
                    _stake_row(event, event.flagger, "forfeit", event.amount)
                )
            touched.peers.add(event.flagger)
        case AgreementPenalized():
            rows[schema.agreement_penalties].append(_penalty_row(event))
            if event.amount > 0:
                rows[schema.stake_changes].append(
                    _stake_row(event, event.attester, "penalty", event.amount)
                )
            touched.peers.add(event.attester)
        case ParametersScheduled():
            rows[schema.rules].append(_rules_row(event))
            touched.rules = True
        case Claimed():
            rows[schema.claims].append(
                {**_position(event), "account": event.account, "amount_wei": str(event.amount)}
            )
        case _:
            return False
    return True


def _settlement_row(event: DisputeSettled) -> dict[str, Any]:
    return {
        **_position(event),
        "round": event.round,
        "subject": event.subject,
        "outcome": event.outcome,  # as emitted: derive reads it (any uint8)
        "slashed": event.slashed,
        "amount_wei": str(event.amount),
        "flag_weight_wei": str(event.flag_weight),
        "agree_weight_wei": str(event.agree_weight),
        "settler": event.settler,
        "tip_wei": str(event.tip),
    }


def _penalty_row(event: AgreementPenalized) -> dict[str, Any]:
    return {
        **_position(event),
        "round": event.round,
        "subject": event.subject,
        "attester": event.attester,
        "reporter": event.reporter,
        "amount_wei": str(event.amount),
        "reporter_share_wei": str(event.reporter_share),
    }


def _rules_row(event: ParametersScheduled) -> dict[str, Any]:
    rules = event.rules
    return {
        **_position(event),
        "from_round": _round_field(event.from_round),
        "min_stake_wei": str(event.min_stake),
        "flag_bond_wei": str(rules.flag_bond),
        "committee_size": rules.committee_size,
        "quorum_bps": rules.quorum_bps,
        "floor_bps": rules.floor_bps,
        "slash_bps": rules.slash_bps,
        "reward_bps": rules.reward_bps,
        "tip_bps": rules.tip_bps,
        "tasks_per_round": rules.tasks_per_round,
        "group_size": rules.group_size,
    }


def _add_other(records: Records, event: ChainEvent) -> None:
    records.rows[schema.other_events].append(
        {**_position(event), "event": event.event, "data": _event_json(event)}
    )

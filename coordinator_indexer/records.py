"""Turning decoded coordinator events into event-table rows, and noting which derived rows they
touch (the peers, rounds and (round, subject) batches whose aggregates must be recomputed).
"""

from __future__ import annotations

import json
from collections import defaultdict
from collections.abc import Iterable, Mapping
from dataclasses import dataclass, field
from typing import Any

from sqlalchemy import Table

from coordinator_indexer import schema
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
    RolloutsPublished,
    RoundSealed,
    StakeAdded,
    VerdictIgnored,
    VerdictRevealed,
    VerdictsCommitted,
    Withdrawn,
)

_POSITION = ("block_number", "log_index", "tx_hash")


@dataclass(frozen=True)
class SealReads:
    """What the chain said at a seal's block besides the event: the round's committee size
    (``rulesAt(round)``) and every registered peer's ``weightAt(peer, round)`` above zero."""

    committee_size: int
    weights: dict[str, int]


@dataclass
class Touched:
    """Keys whose derived rows need recomputing after rows were added or removed."""

    peers: set[str] = field(default_factory=set)
    rounds: set[int] = field(default_factory=set)
    batches: set[tuple[int, str]] = field(default_factory=set)  # (round, subject)

    def update(self, other: Touched) -> None:
        self.peers |= other.peers
        self.rounds |= other.rounds
        self.batches |= other.batches

    def __bool__(self) -> bool:
        return bool(self.peers or self.rounds or self.batches)

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
    events: Iterable[ChainEvent], seal_reads: Mapping[int, SealReads] | None = None
) -> Records:
    """Rows for ``events`` (in chain order); ``seal_reads[round]`` for each RoundSealed."""
    records = Records()
    for event in events:
        if isinstance(event, RoundSealed):
            _add_seal(records, event, (seal_reads or {})[event.round])
        else:
            _add(records, event)
    return records


def _position(event: ChainEvent) -> dict[str, Any]:
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
        "withdrawable_at": extra.get("withdrawable_at"),
        "counts_from_round": extra.get("counts_from_round"),
        "exit_round": extra.get("exit_round"),
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
        {
            "round": event.round,
            "peer": peer,
            "weight_wei": str(weight),
            "block_number": event.block_number,
        }
        for peer, weight in sorted(reads.weights.items())
        if weight > 0
    )
    records.touched.rounds.add(event.round)


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
                    "name": event.name,
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
        "from_round": event.from_round,
        "min_stake_wei": str(event.min_stake),
        "flag_bond_wei": str(rules.flag_bond),
        "committee_size": rules.committee_size,
        "quorum_bps": rules.quorum_bps,
        "floor_bps": rules.floor_bps,
        "slash_bps": rules.slash_bps,
        "reward_bps": rules.reward_bps,
        "tip_bps": rules.tip_bps,
    }


def _add_other(records: Records, event: ChainEvent) -> None:
    data = event.model_dump(mode="json", exclude={*_POSITION, "block_hash"})
    records.rows[schema.other_events].append(
        {**_position(event), "event": event.event, "data": json.dumps(data, sort_keys=True)}
    )

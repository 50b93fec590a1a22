"""Turning decoded coordinator events into event-table rows, and noting which derived rows they
touch (the peers, rounds and (round, subject) batches whose aggregates must be recomputed).
"""

from __future__ import annotations

import json
from collections import defaultdict
from collections.abc import Iterable
from dataclasses import dataclass, field
from typing import Any

from sqlalchemy import Table

from coordinator_indexer import schema
from node.chain.events import (
    Attested,
    ChainEvent,
    DisputeSettled,
    EndpointAnnounced,
    ExitRequested,
    ParametersChanged,
    PeerRegistered,
    RolloutsPublished,
    StakeAdded,
    Withdrawn,
)

_POSITION = ("block_number", "log_index", "tx_hash")


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


@dataclass
class Records:
    """Rows to insert, per table, and what they touch."""

    rows: dict[Table, list[dict[str, Any]]] = field(default_factory=lambda: defaultdict(list))
    touched: Touched = field(default_factory=Touched)

    @property
    def count(self) -> int:
        return sum(len(rows) for rows in self.rows.values())


def records_of(events: Iterable[ChainEvent]) -> Records:
    """Rows for ``events`` (in chain order)."""
    records = Records()
    for event in events:
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
    }


def _add(records: Records, event: ChainEvent) -> None:  # noqa: C901 - one branch per event type
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
                _stake_row(event, event.peer, "add", event.amount, total_wei=str(event.total_stake))
            )
            touched.peers.add(event.peer)
        case ExitRequested():
            rows[schema.stake_changes].append(
                _stake_row(event, event.peer, "exit", 0, withdrawable_at=event.withdrawable_at)
            )
            touched.peers.add(event.peer)
        case Withdrawn():
            rows[schema.stake_changes].append(
                _stake_row(event, event.peer, "withdraw", event.amount)
            )
            touched.peers.add(event.peer)
        case RolloutsPublished():
            rows[schema.publications].append(
                {
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
                }
            )
            touched.peers.add(event.peer)
            touched.rounds.add(event.round)
            touched.batches.add((event.round, event.peer))
        case Attested():
            rows[schema.attestations].append(
                {
                    **_position(event),
                    "round": event.round,
                    "subject": event.subject,
                    "attester": event.attester,
                    "digest": "0x" + event.digest.hex(),
                    "checked": event.checked,
                    "agreed": event.agreed,
                    "verified_milli": event.verified_reward_sum,
                    "is_flag": event.is_flag,
                }
            )
            touched.peers.update((event.subject, event.attester))
            touched.rounds.add(event.round)
            touched.batches.add((event.round, event.subject))
        case DisputeSettled():
            rows[schema.disputes].append(
                {
                    **_position(event),
                    "round": event.round,
                    "subject": event.subject,
                    "slashed": event.slashed,
                    "amount_wei": str(event.amount),
                    "flags": event.flags,
                    "agreements": event.agreements,
                }
            )
            if event.slashed and event.amount > 0:
                rows[schema.stake_changes].append(
                    _stake_row(event, event.subject, "slash", event.amount)
                )
            touched.peers.add(event.subject)
            touched.rounds.add(event.round)
            touched.batches.add((event.round, event.subject))
        case ParametersChanged():
            rows[schema.parameter_changes].append(
                {**_position(event), "name": event.name, "value": str(event.value)}
            )
        case EndpointAnnounced():
            rows[schema.endpoints].append(
                {**_position(event), "peer": event.peer, "endpoint": "0x" + event.endpoint.hex()}
            )
        case _:
            data = event.model_dump(mode="json", exclude={*_POSITION, "block_hash"})
            rows[schema.other_events].append(
                {**_position(event), "event": event.event, "data": json.dumps(data, sort_keys=True)}
            )

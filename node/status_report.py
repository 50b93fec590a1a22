"""``swarm status``: a peer's standing and what happened to each recent round's batch, and why.

Everything is read from the coordinator's events (node.chain.events.EventReader) since the
deployment block: the peer's own events (registration, stake, exit, publications, the
attestations of its batches, settled disputes) and the swarm-wide ones that decide whether it
could publish (``minStake`` changes, pauses). For each of the last N rounds, newest first:

- published: the batch's size and claimed reward; how many peers attested it, how many agreed
  and how many flagged; the verified reward (the median of the attesters' sums, as the indexer
  computes it) beside the claimed one; whether a dispute was settled, and whether it slashed;
- not published, and why when the chain tells: not registered yet, exiting, stake below the
  minimum, the contract paused, the round still open (or in its grace window), else no batch on
  the chain (the node was not running, or finished after the grace window).
"""

from __future__ import annotations

from collections.abc import Iterable, Sequence
from dataclasses import dataclass

from node.chain.client import CoordinatorClient
from node.chain.events import (
    Attested,
    ChainEvent,
    DisputeSettled,
    EventReader,
    ExitRequested,
    ParametersChanged,
    Paused,
    PeerRegistered,
    RolloutsPublished,
    StakeAdded,
    Unpaused,
    Withdrawn,
)
from node.chain.models import Parameters, PeerStatus, median_milli
from node.chain.rounds import RoundClock
from node.chain.rpc import call_with_retry, endpoint_of
from node.chain.units import format_deadline, format_eth

_PEER_EVENTS = (
    PeerRegistered,
    StakeAdded,
    ExitRequested,
    Withdrawn,
    RolloutsPublished,
    Attested,
    DisputeSettled,
)
_SWARM_EVENTS = (ParametersChanged, Paused, Unpaused)


@dataclass
class Standing:
    """What decided whether the peer could publish, at one moment."""

    status: PeerStatus = PeerStatus.NONE
    stake: int = 0
    min_stake: int = 0
    paused: bool = False

    def apply(self, event: ChainEvent, peer: str) -> None:
        if isinstance(event, PeerRegistered):
            self.status, self.stake = PeerStatus.ACTIVE, event.stake
        elif isinstance(event, StakeAdded):
            self.stake = event.total_stake
        elif isinstance(event, ExitRequested):
            self.status = PeerStatus.EXITING
        elif isinstance(event, Withdrawn):
            self.status, self.stake = PeerStatus.WITHDRAWN, 0
        elif isinstance(event, DisputeSettled) and event.subject == peer and event.slashed:
            self.stake -= event.amount
        elif isinstance(event, ParametersChanged) and event.name == "minStake":
            self.min_stake = event.value
        elif isinstance(event, (Paused, Unpaused)):
            self.paused = isinstance(event, Paused)

    def why_not(self) -> str | None:
        """Why the contract would refuse this peer's batch; None when it would take it."""
        if self.status is PeerStatus.NONE:
            return "not registered yet"
        if self.status is not PeerStatus.ACTIVE:
            return "the peer had requested its exit"
        if self.stake < self.min_stake:
            return (
                f"stake {format_eth(self.stake)} below the minimum {format_eth(self.min_stake)} "
                "(swarm add-stake)"
            )
        if self.paused:
            return "the contract was paused"
        return None


@dataclass(frozen=True)
class History:
    """One peer's events, and the swarm's that matter to it, with the block times needed."""

    peer: str
    events: list[ChainEvent]
    times: dict[int, int]
    parameters: Parameters

    def standing_at(self, timestamp: int) -> Standing:
        """The peer's standing just before ``timestamp``."""
        standing = Standing(min_stake=self.parameters.min_stake)
        for event in self.events:
            at = self.times.get(event.block_number)
            if at is not None and at < timestamp:
                standing.apply(event, self.peer)
        return standing

    def of_round(self, kind: type[ChainEvent], round_: int) -> list[ChainEvent]:
        return [e for e in self.events if isinstance(e, kind) and getattr(e, "round") == round_]


def read_history(
    client: CoordinatorClient, peer: str, *, start_block: int, parameters: Parameters
) -> History:
    """``peer``'s events since ``start_block`` plus the swarm's parameter changes and pauses."""
    reader = EventReader(client.w3, client.address)
    latest = client.block_number()
    own = reader.read(start_block, latest, events=_PEER_EVENTS, peer=peer)
    own = [e for e in own if not isinstance(e, Attested) or e.subject == peer]
    swarm = reader.read(start_block, latest, events=_SWARM_EVENTS)
    events = sorted([*own, *swarm], key=lambda e: e.position)
    timed = {e.block_number for e in events if not isinstance(e, (RolloutsPublished, Attested))}
    return History(peer, events, _block_times(client, timed), parameters)


def _block_times(client: CoordinatorClient, blocks: Iterable[int]) -> dict[int, int]:
    """Timestamps of ``blocks`` (those of the events that change the peer's standing)."""
    w3, where = client.w3, endpoint_of(client.w3)

    def timestamp(number: int) -> int:
        block = call_with_retry(
            lambda: w3.eth.get_block(number), what=f"reading block {number}", endpoint=where
        )
        return int(block["timestamp"])

    return {number: timestamp(number) for number in blocks}


def round_line(
    history: History, round_: int, current: int, clock: RoundClock, parameters: Parameters
) -> str:
    """What happened to the peer's batch of ``round_`` (seen in round ``current``)."""
    published = history.of_round(RolloutsPublished, round_)
    if not published:
        why = _why_not(history, round_, current, clock, parameters)
        return f"  round {round_}: not published: {why}"
    batch = published[0]
    assert isinstance(batch, RolloutsPublished)
    attested = [e for e in history.of_round(Attested, round_) if isinstance(e, Attested)]
    parts = [
        f"  round {round_}: published {batch.groups} groups, {batch.completions} completions, "
        f"claimed reward {batch.reward_sum / 1000:.3f}",
        _attestations(attested, round_, current, parameters),
    ]
    dispute = _dispute(history, attested, round_, current, parameters)
    if dispute:
        parts.append(dispute)
    return "; ".join(parts)


def _why_not(
    history: History, round_: int, current: int, clock: RoundClock, parameters: Parameters
) -> str:
    refused = history.standing_at(clock.end_of(round_)).why_not()
    if refused:
        return refused
    if current - round_ <= parameters.grace_rounds:  # still accepted, if the peer can publish now
        refused = history.standing_at(clock.end_of(current)).why_not()
        if refused:
            return refused
        if round_ == current:
            return "not yet (the round is open)"
        return f"not yet (accepted until the end of round {round_ + parameters.grace_rounds})"
    return "no batch on the chain (the node was not running, or finished after the grace window)"


def _attestations(attested: Sequence[Attested], round_: int, current: int, p: Parameters) -> str:
    if not attested:
        if current - round_ <= p.attestation_window_rounds:
            return f"not attested yet (open until round {round_ + p.attestation_window_rounds})"
        return "attested by no peer (could they fetch it? swarm doctor checks the store)"
    flags = sum(1 for e in attested if e.is_flag)
    verified = median_milli([e.verified_reward_sum for e in attested]) or 0
    return (
        f"verified reward {verified / 1000:.3f} (median of {len(attested)} attesters: "
        f"{len(attested) - flags} agreed, {flags} flagged)"
    )


def _dispute(
    history: History,
    attested: Sequence[Attested],
    round_: int,
    current: int,
    parameters: Parameters,
) -> str | None:
    settled = [e for e in history.of_round(DisputeSettled, round_) if isinstance(e, DisputeSettled)]
    if settled:
        event = settled[0]
        outcome = f"slashed {format_eth(event.amount)}" if event.slashed else "not slashed"
        return f"dispute settled: {outcome} (flags {event.flags}, agreements {event.agreements})"
    if any(e.is_flag for e in attested):
        window_end = round_ + parameters.attestation_window_rounds
        if current > window_end:
            return "dispute open, settleable now"
        return f"dispute open (settleable after round {window_end})"
    return None


def status_lines(
    client: CoordinatorClient, address: str, *, rounds: int, start_block: int
) -> list[str]:
    """The whole ``swarm status`` report of ``address``."""
    info = client.peer_info(address)
    lines = [f"peer     {address}", f"status   {info.status.name.lower()}"]
    if info.status is PeerStatus.NONE:
        return [*lines, "         not registered: swarm register --name NAME --stake AMOUNT"]
    lines.append(f"stake    {format_eth(info.stake)}")
    if info.status is PeerStatus.EXITING:
        deadline = format_deadline(info.withdrawable_at, client.chain_time())
        lines.append(f"         withdrawable {deadline}")
    current = client.current_round()
    lines.append(f"round    {current} (open disputes: {info.open_disputes})")
    parameters = client.parameters()
    history = read_history(client, address, start_block=start_block, parameters=parameters)
    lines.append(_totals(history))
    first = max(0, current - rounds + 1)
    lines.append(f"rounds {current}..{first}, newest first:" if rounds > 1 else "this round:")
    for round_ in range(current, first - 1, -1):
        lines.append(round_line(history, round_, current, client.clock, parameters))
    if not any(isinstance(e, RolloutsPublished) for e in history.events):
        lines.append("  no publications yet")
    return lines


def _totals(history: History) -> str:
    attested = [e for e in history.events if isinstance(e, Attested)]
    by_round: dict[int, list[int]] = {}
    for event in attested:
        by_round.setdefault(event.round, []).append(event.verified_reward_sum)
    verified = sum(median_milli(values) or 0 for values in by_round.values()) / 1000
    flags = sum(1 for e in attested if e.is_flag)
    return (
        f"verified reward {verified:.3f} over {len(by_round)} attested batches "
        f"(median of the attesters'; {len(attested)} attestations, {flags} flags)"
    )

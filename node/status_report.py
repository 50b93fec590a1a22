"""``swarm status``: a peer's standing and what happened to each recent round's batch, and why.

Everything is read from the coordinator's events (node.chain.events.EventReader) since the
deployment block: the peer's own events (registration, stake, exit, publications, the committee
verdicts revealed on its batches, settled disputes) and the swarm-wide ones that decide whether it
could publish (scheduled minimum stakes, pauses). For each of the last N rounds, newest first:

- published: the batch's size and claimed reward; where its judging stands (committees commit
  during rounds r+g+1..r+g+c and reveal until r+J); how many committee members agreed and how many
  flagged; the verified reward (the stake-weighted median of their sums, as the indexer computes
  it) beside the claimed one; whether a dispute was settled, and whether it slashed;
- not published, and why when the chain tells: not registered yet, exiting, stake below the
  minimum, the contract paused, the round still open (or in its grace window), else no batch on
  the chain (the node was not running, or finished after the grace window).
"""

from __future__ import annotations

from collections.abc import Iterable, Sequence
from dataclasses import dataclass

from node.chain.client import CoordinatorClient
from node.chain.events import (
    AgreementPenalized,
    ChainEvent,
    DisputeSettled,
    EventReader,
    ExitRequested,
    FlagResolved,
    ParametersScheduled,
    Paused,
    PeerRegistered,
    RolloutsPublished,
    StakeAdded,
    Unpaused,
    VerdictRevealed,
    Withdrawn,
)
from node.chain.models import PeerStatus, Phases, Rules, weighted_median_milli
from node.chain.rounds import RoundClock
from node.chain.rpc import call_with_retry, endpoint_of
from node.chain.units import format_deadline, format_eth

_PEER_EVENTS = (
    PeerRegistered,
    StakeAdded,
    ExitRequested,
    Withdrawn,
    RolloutsPublished,
    VerdictRevealed,
    DisputeSettled,
)
#: Swarm-wide events: rules and pauses; penalties and lost bonds are kept for the peer only.
_SWARM_EVENTS = (ParametersScheduled, Paused, Unpaused, AgreementPenalized, FlagResolved)


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
        elif isinstance(event, (Paused, Unpaused)):
            self.paused = isinstance(event, Paused)
        else:
            self.stake -= _taken(event, peer)

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


def _taken(event: ChainEvent, peer: str) -> int:
    """Wei ``event`` took from ``peer``'s stake: a slash, an agreement penalty, a lost bond."""
    if isinstance(event, DisputeSettled) and event.subject == peer and event.slashed:
        return event.amount
    if isinstance(event, AgreementPenalized) and event.attester == peer:
        return event.amount
    if isinstance(event, FlagResolved) and event.flagger == peer and not event.upheld:
        return event.amount
    return 0


@dataclass(frozen=True)
class History:
    """One peer's events, and the swarm's that matter to it, with the block times needed."""

    peer: str
    events: list[ChainEvent]
    times: dict[int, int]
    min_stake: int  # at deployment
    phases: Phases

    def standing_at(self, timestamp: int, round_: int) -> Standing:
        """The peer's standing just before ``timestamp`` (in round ``round_``)."""
        standing = Standing(min_stake=self.min_stake_in(round_))
        for event in self.events:
            at = self.times.get(event.block_number)
            if at is not None and at < timestamp:
                standing.apply(event, self.peer)
        return standing

    def min_stake_in(self, round_: int) -> int:
        """The minimum stake in force in ``round_``: the last scheduled change from it on."""
        found = self.min_stake
        for event in self.events:
            if isinstance(event, ParametersScheduled) and event.from_round <= round_:
                found = event.min_stake
        return found

    def of_round(self, kind: type[ChainEvent], round_: int) -> list[ChainEvent]:
        return [e for e in self.events if isinstance(e, kind) and getattr(e, "round") == round_]


def read_history(
    client: CoordinatorClient, peer: str, *, start_block: int, min_stake: int, phases: Phases
) -> History:
    """``peer``'s events since ``start_block`` plus the swarm's scheduled rules and pauses (and
    the penalties and lost bonds that took from the peer's stake)."""
    reader = EventReader(client.w3, client.address)
    latest = client.block_number()
    own = reader.read(start_block, latest, events=_PEER_EVENTS, peer=peer)
    own = [e for e in own if not isinstance(e, VerdictRevealed) or e.subject == peer]
    swarm = [
        e
        for e in reader.read(start_block, latest, events=_SWARM_EVENTS)
        if not isinstance(e, (AgreementPenalized, FlagResolved)) or _taken(e, peer)
    ]
    events = sorted([*own, *swarm], key=lambda e: e.position)
    untimed = (RolloutsPublished, VerdictRevealed)
    timed = {e.block_number for e in events if not isinstance(e, untimed)}
    return History(peer, events, _block_times(client, timed), min_stake, phases)


def _block_times(client: CoordinatorClient, blocks: Iterable[int]) -> dict[int, int]:
    """Timestamps of ``blocks`` (those of the events that change the peer's standing)."""
    w3, where = client.w3, endpoint_of(client.w3)

    def timestamp(number: int) -> int:
        block = call_with_retry(
            lambda: w3.eth.get_block(number), what=f"reading block {number}", endpoint=where
        )
        return int(block["timestamp"])

    return {number: timestamp(number) for number in blocks}


def round_line(history: History, round_: int, current: int, clock: RoundClock) -> str:
    """What happened to the peer's batch of ``round_`` (seen in round ``current``)."""
    published = history.of_round(RolloutsPublished, round_)
    if not published:
        why = _why_not(history, round_, current, clock)
        return f"  round {round_}: not published: {why}"
    batch = published[0]
    assert isinstance(batch, RolloutsPublished)
    verdicts = [
        e for e in history.of_round(VerdictRevealed, round_) if isinstance(e, VerdictRevealed)
    ]
    parts = [
        f"  round {round_}: published {batch.groups} groups, {batch.completions} completions, "
        f"claimed reward {batch.reward_sum / 1000:.3f}",
        _verdicts(verdicts, round_, current, history.phases, upheld=_upheld(history, round_)),
    ]
    dispute = _dispute(history, verdicts, round_, current)
    if dispute:
        parts.append(dispute)
    return "; ".join(parts)


def _why_not(history: History, round_: int, current: int, clock: RoundClock) -> str:
    refused = history.standing_at(clock.end_of(round_), round_).why_not()
    if refused:
        return refused
    last = history.phases.publish_phase(round_)[-1]
    if current <= last:  # still accepted, if the peer can publish now
        refused = history.standing_at(clock.end_of(current), current).why_not()
        if refused:
            return refused
        if round_ == current:
            return "not yet (the round is open)"
        return f"not yet (accepted until the end of round {last})"
    return "no batch on the chain (the node was not running, or finished after the grace window)"


def _upheld(history: History, round_: int) -> bool:
    settled = history.of_round(DisputeSettled, round_)
    return any(isinstance(e, DisputeSettled) and e.slashed for e in settled)


def _rounds(phase: range) -> str:
    """'in round 3', or 'in rounds 3-4'."""
    if len(phase) == 1:
        return f"in round {phase.start}"
    return f"in rounds {phase.start}-{phase[-1]}"


def _verdicts(
    verdicts: Sequence[VerdictRevealed], round_: int, current: int, p: Phases, *, upheld: bool
) -> str:
    if not verdicts:
        commit, reveal = p.commit_phase(round_), p.reveal_phase(round_)
        if current < commit.start:
            return f"judging: committees commit {_rounds(commit)}"
        if current <= commit[-1]:
            return f"judging: committees commit until round {commit[-1]}, reveal until {reveal[-1]}"
        if current <= reveal[-1]:
            return f"judging: committees reveal until round {reveal[-1]}"
        return "no committee verdict revealed (could they fetch it? swarm doctor checks the store)"
    flags = sum(1 for e in verdicts if e.is_flag)
    verified = 0 if upheld else _verified(verdicts)  # an upheld batch verifies nothing
    return (
        f"verified reward {verified / 1000:.3f} (weighted median of {len(verdicts)} committee "
        f"members: {len(verdicts) - flags} agreed, {flags} flagged)"
    )


def _dispute(
    history: History, verdicts: Sequence[VerdictRevealed], round_: int, current: int
) -> str | None:
    settled = [e for e in history.of_round(DisputeSettled, round_) if isinstance(e, DisputeSettled)]
    if settled:
        event = settled[0]
        outcome = f"slashed {format_eth(event.amount)}" if event.slashed else "not slashed"
        return (
            f"dispute settled: {outcome} (flag weight {format_eth(event.flag_weight)}, "
            f"agree weight {format_eth(event.agree_weight)})"
        )
    if any(e.is_flag for e in verdicts):
        start = history.phases.settleable_from(round_)
        if current >= start:
            return "dispute open, settleable now"
        return f"dispute open (settleable from round {start})"
    return None


def _bond_line(free_wei: int, flag_bond: int) -> str:
    """How many flags the free stake bonds: the node never casts a flag it cannot bond in full,
    and a flag loses its bond only when agreements outweigh it."""
    bondable = max(0, free_wei) // flag_bond
    advice = "" if bondable else "; add stake (swarm add-stake) to flag invalid batches"
    return (
        f"         free stake bonds {bondable} flag(s) of {format_eth(flag_bond)} at most "
        f"(the node casts no flag it cannot bond{advice})"
    )


def status_lines(
    client: CoordinatorClient, address: str, *, rounds: int, start_block: int
) -> list[str]:
    """The whole ``swarm status`` report of ``address``."""
    info = client.peer_info(address)
    lines = [f"peer     {address}", f"status   {info.status.name.lower()}"]
    if info.status is PeerStatus.NONE:
        return [*lines, "         not registered: swarm register --name NAME --stake AMOUNT"]
    lines.append(
        f"stake    {format_eth(info.stake)} (locked by open flags {format_eth(info.locked_bonds)})"
    )
    current = client.round_now()
    lines.append(_bond_line(info.free_stake, client.rules_at(current).flag_bond))
    phases = client.phases()
    if info.status is PeerStatus.EXITING:
        round_ = phases.withdrawable_from(info.exit_round)
        deadline = format_deadline(client.clock.start_of(round_), client.next_block_time())
        lines.append(f"         withdrawable from round {round_} ({deadline})")
    lines.append(
        f"round    {current} (open disputes: {info.open_disputes}, open flags: {info.open_flags})"
    )
    owed = client.claimable(address)
    if owed:
        lines.append(f"claim    {format_eth(owed)} claimable (swarm claim)")
    lines.extend(_rules_lines(client, current))
    history = read_history(
        client,
        address,
        start_block=start_block,
        min_stake=_deployed_min_stake(client),
        phases=phases,
    )
    lines.append(_totals(history))
    first = max(0, current - rounds + 1)
    lines.append(f"rounds {current}..{first}, newest first:" if rounds > 1 else "this round:")
    for round_ in range(current, first - 1, -1):
        lines.append(round_line(history, round_, current, client.clock))
    if not any(isinstance(e, RolloutsPublished) for e in history.events):
        lines.append("  no publications yet")
    return lines


def _rules_lines(client: CoordinatorClient, current: int) -> list[str]:
    """The rules judging the current round, and a scheduled change if one is pending."""
    lines = [f"rules    {_describe(client.rules_at(current))}"]
    latest = client.rules_by_index(client.rules_count() - 1)
    if latest.from_round > current:
        lines.append(f"         from round {latest.from_round}: {_describe(latest)}")
    return lines


def _describe(rules: Rules) -> str:
    return (
        f"committees of {rules.committee_size}, flag bond {format_eth(rules.flag_bond)}, "
        f"slash {rules.slash_bps / 100:g} %"
    )


def _deployed_min_stake(client: CoordinatorClient) -> int:
    """The minimum stake before any scheduled change (the first rules entry's era)."""
    return client.min_stake() if client.rules_count() <= 1 else _first_min_stake(client)


def _first_min_stake(client: CoordinatorClient) -> int:
    reader = EventReader(client.w3, client.address)
    scheduled = reader.read(0, client.block_number(), events=[ParametersScheduled])
    first = next((e for e in scheduled if isinstance(e, ParametersScheduled)), None)
    return first.min_stake if first is not None else client.min_stake()


def _totals(history: History) -> str:
    verdicts = [e for e in history.events if isinstance(e, VerdictRevealed)]
    slashed = {e.round for e in history.events if isinstance(e, DisputeSettled) and e.slashed}
    by_round: dict[int, list[VerdictRevealed]] = {}
    for event in verdicts:
        by_round.setdefault(event.round, []).append(event)
    verified = sum(
        0 if round_ in slashed else _verified(events) for round_, events in by_round.items()
    )
    flags = sum(1 for e in verdicts if e.is_flag)
    return (
        f"verified reward {verified / 1000:.3f} over {len(by_round)} judged batches "
        f"(weighted median of the committee members'; {len(verdicts)} verdicts, {flags} flags)"
    )


def _verified(verdicts: Sequence[VerdictRevealed]) -> int:
    """The batch's verified reward as the leaderboard computes it (before any settlement)."""
    return weighted_median_milli([(e.verified_reward_sum, e.weight) for e in verdicts]) or 0

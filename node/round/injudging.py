"""The contract's judging rules in memory, for the in-process exchange (the experiment's fast path).

Every in-process peer judges with the same weight (:data:`WEIGHT`); a round's beacon derives from
the swarm's genesis seed (deterministic: an experiment reruns identically); seats come from the
same :func:`~node.chain.committee.vote_weight`, ballots from the same commitment and receipt
hashes, and the phase, order and settlement rules are the contract's, raising its errors. What is
left out is money: there is no stake to slash, so an upheld verdict is recorded (``slashed``) and
bonds, rewards and penalties are not.
"""

from __future__ import annotations

from collections.abc import Sequence
from dataclasses import dataclass, field

from eth_abi import encode
from eth_utils import keccak

from node.chain.committee import ballot_commitment, reveal_receipt, settle_outcome, vote_weight
from node.chain.deployer import DeployConfig
from node.chain.models import Phases, Rules, SealInfo, Verdict, VerdictItem, VerdictState
from node.chain.reverts import (
    SwarmCoordinatorAlreadyCommitted,
    SwarmCoordinatorAlreadyPosted,
    SwarmCoordinatorAlreadySealed,
    SwarmCoordinatorAlreadySettled,
    SwarmCoordinatorAttestationOutOfOrder,
    SwarmCoordinatorCommitmentMismatch,
    SwarmCoordinatorInvalidCounts,
    SwarmCoordinatorInvalidEvidence,
    SwarmCoordinatorNoDispute,
    SwarmCoordinatorNoFlag,
    SwarmCoordinatorNoPublication,
    SwarmCoordinatorNotPenalizable,
    SwarmCoordinatorNotRecomputing,
    SwarmCoordinatorNotSealed,
    SwarmCoordinatorNotSettled,
    SwarmCoordinatorRewardOutOfRange,
    SwarmCoordinatorSelfAttestation,
    SwarmCoordinatorWrongPhase,
)
from node.provenance.choice import recomputes
from node.round.exchange import RevealedBallot
from node.round.view import PostedEvidence

#: The deployments' default phases (grace 1, commit 2, reveal 2: J = 5) and rules (no money moves
#: in process; the thresholds and k do count), from the one place they are defined.
_DEFAULTS = DeployConfig()
PHASES = _DEFAULTS.phases()
RULES = _DEFAULTS.rules()
#: Every in-process peer's judging weight.
WEIGHT = 10**18
_NO_END = 2**64 - 1
_NONE = RevealedBallot((), frozenset())


@dataclass
class Tally:
    flag_weight: int = 0
    agree_weight: int = 0
    flaggers: int = 0
    agreers: int = 0
    state: VerdictState = VerdictState.PUBLISHED

    def verdict(self) -> Verdict:
        return Verdict(
            flag_weight=self.flag_weight,
            agree_weight=self.agree_weight,
            flaggers=self.flaggers,
            agreers=self.agreers,
            state=self.state,
        )


@dataclass
class Judging:
    """The verdict side of the contract for one in-process swarm."""

    genesis_seed: bytes
    phases: Phases = PHASES
    rules: Rules = RULES
    members: set[str] = field(default_factory=set)
    seals: dict[int, SealInfo] = field(default_factory=dict)
    tallies: dict[tuple[int, str], Tally] = field(default_factory=dict)
    ballots: dict[tuple[int, str], bytes] = field(default_factory=dict)
    flags: dict[tuple[int, str, str], int] = field(default_factory=dict)
    revealed: dict[int, dict[str, RevealedBallot]] = field(default_factory=dict)
    penalized: set[tuple[int, str, str]] = field(default_factory=set)
    slashed: list[tuple[int, str]] = field(default_factory=list)
    posted: dict[int, list[PostedEvidence]] = field(default_factory=dict)

    def published(self, round: int, peer: str) -> None:
        self.tallies[(round, peer)] = Tally()

    def weight_at(self, peer: str, round: int) -> int:
        return WEIGHT if peer in self.members else 0

    def beacon(self, round: int) -> bytes:
        """Deterministic: the swarm seed and the round (nobody can steer it in process)."""
        return keccak(encode(["bytes32", "uint64"], [self.genesis_seed, round]))[:20]

    def seal_round(self, round: int, current: int) -> None:
        self._in_phase(round, current, self.phases.commit_phase(round))
        if round in self.seals:
            raise SwarmCoordinatorAlreadySealed(round)
        total = WEIGHT * len(self.members)
        self.seals[round] = SealInfo(beacon=self.beacon(round), total_weight=total)

    def commit(self, round: int, attester: str, commitment: bytes, current: int) -> None:
        self._in_phase(round, current, self.phases.commit_phase(round))
        if (round, attester) in self.ballots:
            raise SwarmCoordinatorAlreadyCommitted(round, attester)
        self.ballots[(round, attester)] = commitment

    def post_evidence(self, evidence: PostedEvidence, current: int) -> None:
        """The EvidenceExtension's ``postEvidence``, with its checks in its order."""
        round, subject, poster = evidence.round, evidence.subject, evidence.poster
        self._in_phase(round, current, self.phases.commit_phase(round))
        tally = self.tallies.get((round, subject))
        if tally is None or tally.state is not VerdictState.PUBLISHED:
            raise SwarmCoordinatorNoPublication(round, subject)
        if evidence.group >= self.rules.tasks_per_round or evidence.completion >= self.rules.group_size:
            raise SwarmCoordinatorInvalidEvidence(evidence.group, evidence.completion)
        seal = self.seals.get(round)
        k = self.rules.committee_size
        seated = seal is not None and 0 < vote_weight(
            seal.beacon, seal.total_weight, k, subject, poster, self.weight_at(poster, round)
        )
        if not seated or not recomputes(seal.beacon, subject, poster, k):
            raise SwarmCoordinatorNotRecomputing(round, subject, poster)
        posted = self.posted.setdefault(round, [])
        if any(e.subject == subject and e.poster == poster for e in posted):
            raise SwarmCoordinatorAlreadyPosted(round, subject, poster)
        posted.append(evidence)

    def reveal(
        self, round: int, attester: str, items: Sequence[VerdictItem], salt: bytes, current: int
    ) -> None:
        self._in_phase(round, current, self.phases.reveal_phase(round))
        if self.ballots.get((round, attester)) != ballot_commitment(attester, round, items, salt):
            raise SwarmCoordinatorCommitmentMismatch(round, attester)
        seal = self.seals.get(round)
        if seal is None:
            raise SwarmCoordinatorNotSealed(round)
        self._check_items(round, attester, items)
        counted = {item.subject for item in items if self._count(round, attester, item, seal)}
        self.ballots[(round, attester)] = reveal_receipt(items)
        self.revealed.setdefault(round, {})[attester] = RevealedBallot(
            tuple(items), frozenset(counted)
        )

    def _check_items(self, round: int, attester: str, items: Sequence[VerdictItem]) -> None:
        previous = -1
        for item in items:
            if item.subject == attester:
                raise SwarmCoordinatorSelfAttestation()
            if item.sort_key() <= previous:
                raise SwarmCoordinatorAttestationOutOfOrder(item.subject)
            previous = item.sort_key()
            tally = self.tallies.get((round, item.subject))
            if tally is None or tally.state is not VerdictState.PUBLISHED:
                raise SwarmCoordinatorNoPublication(round, item.subject)
            most = self.rules.completions_per_batch
            if not 0 < item.checked <= most or item.agreed > item.checked:
                raise SwarmCoordinatorInvalidCounts(item.checked, item.agreed)
            if not 0 <= item.verified_reward_sum <= self.rules.max_reward_milli:
                raise SwarmCoordinatorRewardOutOfRange(
                    item.verified_reward_sum, self.rules.max_reward_milli
                )

    def _count(self, round: int, attester: str, item: VerdictItem, seal: SealInfo) -> bool:
        weight = vote_weight(
            seal.beacon,
            seal.total_weight,
            self.rules.committee_size,
            item.subject,
            attester,
            self.weight_at(attester, round),
        )
        if weight == 0:
            return False
        tally = self.tallies[(round, item.subject)]
        if item.is_flag:
            tally.flag_weight += weight
            tally.flaggers += 1
            self.flags[(round, item.subject, attester)] = weight
        else:
            tally.agree_weight += weight
            tally.agreers += 1
        return True

    def settle(self, round: int, subject: str, current: int) -> None:
        start = self.phases.settleable_from(round)
        self._in_phase(round, current, range(start, _NO_END))
        tally = self.tallies.get((round, subject))
        if tally is None or tally.flaggers == 0:
            raise SwarmCoordinatorNoDispute(round, subject)
        if tally.state is not VerdictState.PUBLISHED:
            raise SwarmCoordinatorAlreadySettled(round, subject)
        total = self.seals[round].total_weight
        tally.state = settle_outcome(
            tally.flag_weight, tally.agree_weight, self.rules, total, self.weight_at(subject, round)
        )
        if tally.state is VerdictState.UPHELD:
            self.slashed.append((round, subject))

    def resolve_flag(self, round: int, subject: str, flagger: str) -> None:
        tally = self.tallies.get((round, subject))
        if tally is None or tally.state <= VerdictState.PUBLISHED:
            raise SwarmCoordinatorNotSettled(round, subject)
        if self.flags.pop((round, subject, flagger), None) is None:
            raise SwarmCoordinatorNoFlag(round, subject, flagger)

    def report_agreement(
        self, round: int, attester: str, items: Sequence[VerdictItem], index: int
    ) -> None:
        subject = items[index].subject if 0 <= index < len(items) else attester
        tally = self.tallies.get((round, subject))
        key = (round, subject, attester)
        if (
            self.ballots.get((round, attester)) != reveal_receipt(items)
            or items[index].is_flag
            or subject not in self.revealed.get(round, {}).get(attester, _NONE).counted
            or tally is None
            or tally.state is not VerdictState.UPHELD
            or key in self.penalized
        ):
            raise SwarmCoordinatorNotPenalizable(round, subject, attester)
        self.penalized.add(key)

    def forget_before(self, round: int) -> None:
        """Drops the records of rounds before ``round`` (settled or never to be settled)."""
        self.seals = {r: s for r, s in self.seals.items() if r >= round}
        self.revealed = {r: b for r, b in self.revealed.items() if r >= round}
        self.posted = {r: e for r, e in self.posted.items() if r >= round}
        for records in (self.tallies, self.ballots, self.flags):
            for key in [k for k in records if k[0] < round]:
                del records[key]

    def _in_phase(self, round: int, current: int, phase: range) -> None:
        if current not in phase:
            raise SwarmCoordinatorWrongPhase(round, phase.start, min(phase.stop - 1, _NO_END))


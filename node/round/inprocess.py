"""The in-process exchange: nodes of one process swap batches through memory, with no chain.

Everything that decides what a node learns is the node's own code, as on a chain: the same task
derivation from the round seed and the peer's address, the same signed and encoded batch, the same
fetch, verification and re-scoring of every peer batch (from an in-memory content store that is
re-hashed like any other), the same selection and GRPO step. What is left out is what costs time
and decides nothing about learning: transactions, blocks and money. Judging follows the contract's
rules in memory (:mod:`node.round.injudging`: phases, seal, seats, commit-reveal, settlement), every
peer with the same weight; an upheld verdict is recorded, nobody's stake moves.

An :class:`InProcessSwarm` is the shared part (the round, the commitments, the blobs); each node
gets its own :class:`InProcessExchange` from ``swarm.exchange()``. The experiment's runner moves
the round with ``advance`` (as time travel does on a dev chain).
"""

from __future__ import annotations

import threading
from collections.abc import Iterable, Sequence
from dataclasses import dataclass, field

from eth_utils import keccak, to_checksum_address

from node.chain.deployer import DeployConfig
from node.chain.eip712 import Domain
from node.chain.events import RolloutsPublished
from node.chain.models import Rules, SealInfo, Verdict, VerdictItem, VerdictState
from node.round.exchange import Exchange, RevealedBallot, SwarmInfo
from node.round.injudging import PHASES, RULES, Judging, Tally
from node.round.state import ChainIdentity, OwnBatch
from node.round.view import PostedEvidence, everyone_published, ordered_commitments
from node.storage import ContentStore, NotFound, TooLarge, sha256
from node.storage.base import check_digest, verified

#: Anvil's chain id and the address its first deployment gets: batches look like the chain path's.
CHAIN_ID = 31337
COORDINATOR = "0x5FbDB2315678afecb367f032d93F642f64180aa3"
_ZERO_HASH = "0x" + "00" * 32


class MemoryStore(ContentStore):
    """Blobs in a dictionary (thread-safe: peers' batches are fetched in parallel)."""

    def __init__(self) -> None:
        self._blobs: dict[bytes, bytes] = {}
        self._lock = threading.Lock()

    def put(self, data: bytes, *, pin: bool = False) -> bytes:
        blob = self._blob_to_put(data)
        digest = sha256(blob)
        with self._lock:
            self._blobs[digest] = blob
        return digest

    def get(self, digest: bytes, *, max_size: int | None = None) -> bytes:
        digest, cap = check_digest(digest), self._read_cap(max_size)
        with self._lock:
            data = self._blobs.get(digest)
        if data is None:
            raise NotFound(f"no blob 0x{digest.hex()} in memory")
        if len(data) > cap:
            raise TooLarge(f"blob 0x{digest.hex()} is over the {cap}-byte cap")
        return verified(digest, data, source="the memory store")

    def has(self, digest: bytes) -> bool:
        with self._lock:
            return check_digest(digest) in self._blobs

    def pin(self, digest: bytes) -> None:
        if not self.has(digest):
            raise NotFound(f"cannot pin 0x{digest.hex()}: not in memory")

    def unpin(self, digest: bytes) -> None:
        """Memory is collected at once: an unpinned blob is gone (the swarm's batches are
        never unpinned; ``forget`` drops them as the swarm advances)."""
        with self._lock:
            self._blobs.pop(check_digest(digest), None)

    def forget(self, digests: Iterable[bytes]) -> None:
        with self._lock:
            for digest in digests:
                self._blobs.pop(digest, None)


@dataclass
class InProcessSwarm:
    """The swarm's shared state: members, the current round, commitments and blobs."""

    genesis_seed: bytes
    round: int = 0
    domain: Domain | None = None  # Anvil's chain id and first address, salted with the seed
    store: MemoryStore = field(default_factory=MemoryStore)
    published: dict[int, dict[str, RolloutsPublished]] = field(default_factory=dict)
    #: (n, G) of every batch: the swarm's rules, as a coordinator's would fix them.
    shape: tuple[int, int] = (RULES.tasks_per_round, RULES.group_size)
    judging: Judging = field(init=False)

    def __post_init__(self) -> None:
        rules = DeployConfig().with_batch_shape(self.shape).rules()
        self.judging = Judging(self.genesis_seed, rules=rules)
        if self.domain is None:
            self.domain = Domain(CHAIN_ID, COORDINATOR, self.genesis_seed)

    @property
    def members(self) -> set[str]:
        return self.judging.members

    @staticmethod
    def genesis_seed_for(seed: int) -> bytes:
        """The genesis seed of an experiment seed (on a chain it is read from the contract)."""
        return keccak(text=f"sapo-experiment/genesis/{seed}")

    @property
    def signing_domain(self) -> Domain:
        """The EIP-712 domain the swarm's batches are signed in."""
        assert self.domain is not None  # set in __post_init__
        return self.domain

    @property
    def identity(self) -> ChainIdentity:
        return ChainIdentity(
            chain_id=self.signing_domain.chain_id,
            coordinator=self.signing_domain.verifying_contract,
            deployment_block_hash="0x" + keccak(self.genesis_seed).hex(),
        )

    def exchange(self) -> InProcessExchange:
        """A node's own link to this swarm."""
        return InProcessExchange(self)

    def advance(self, round: int) -> None:
        """Makes ``round`` current and drops what no node can use any more."""
        self.round = round
        oldest = round - PHASES.judging_rounds
        for old in [r for r in self.published if r < oldest]:
            self.store.forget(c.digest for c in self.published.pop(old).values())
        self.judging.forget_before(oldest - PHASES.judging_rounds)


class InProcessExchange(Exchange):
    """One node's view of an :class:`InProcessSwarm`."""

    def __init__(self, swarm: InProcessSwarm) -> None:
        self.swarm = swarm
        self.store = swarm.store
        self.peer: str | None = None

    @property
    def domain(self) -> Domain:
        return self.swarm.signing_domain

    def join(self, peer: str) -> SwarmInfo:
        self.peer = to_checksum_address(peer)
        self.swarm.members.add(self.peer)
        return SwarmInfo(self.swarm.genesis_seed, self.swarm.judging.phases, self.swarm.identity)

    def check(self) -> None:
        """Nothing can reset memory."""

    def current_round(self) -> int:
        return self.swarm.round

    def publication(self, round: int, peer: str) -> bytes | None:
        commitment = self.swarm.published.get(round, {}).get(peer)
        return None if commitment is None else commitment.digest

    def publish(self, batch: OwnBatch) -> None:
        peer = self._peer()
        if self.swarm.round not in PHASES.publish_phase(batch.round):
            raise ValueError(f"round {batch.round} is not open (current {self.swarm.round})")
        round_ = self.swarm.published.setdefault(batch.round, {})
        if peer in round_:
            raise ValueError(f"{peer} already published round {batch.round}")
        round_[peer] = RolloutsPublished(
            block_number=batch.round,
            block_hash=_ZERO_HASH,
            tx_hash=_ZERO_HASH,
            log_index=len(round_),  # publication order, as a chain would have it
            round=batch.round,
            peer=peer,
            digest=batch.digest,
            groups=batch.groups,
            completions=batch.completions,
            reward_sum=batch.reward_sum,
            relayer=None,
        )
        self.swarm.judging.published(batch.round, peer)

    def refresh(self) -> None:
        """Memory is always up to date."""

    def commitments(self, rounds: Iterable[int]) -> list[RolloutsPublished]:
        return ordered_commitments(self.swarm.published, rounds)

    def everyone_published(self, round: int, *, besides: str) -> bool:
        swarm = self.swarm
        return everyone_published(swarm.members, swarm.published, round, besides=besides)

    def forget_before(self, round: int) -> None:
        """The swarm forgets for everyone when it advances."""

    def rules_at(self, round: int) -> Rules:
        return self.swarm.judging.rules

    def seal_round(self, round: int) -> None:
        self.swarm.judging.seal_round(round, self.swarm.round)

    def seal(self, round: int) -> SealInfo | None:
        return self.swarm.judging.seals.get(round)

    def weight_at(self, peer: str, round: int) -> int:
        return self.swarm.judging.weight_at(peer, round)

    def commit_verdicts(self, round: int, commitment: bytes) -> None:
        self.swarm.judging.commit(round, self._peer(), commitment, self.swarm.round)

    def reveal_verdicts(self, round: int, items: Sequence[VerdictItem], salt: bytes) -> None:
        self.swarm.judging.reveal(round, self._peer(), items, salt, self.swarm.round)

    def post_evidence(self, round: int, subject: str, group: int, completion: int, token: int) -> None:
        posted = PostedEvidence(round, subject, self._peer(), group, completion, token)
        self.swarm.judging.post_evidence(posted, self.swarm.round)

    def evidence(self, round: int) -> list[PostedEvidence]:
        return list(self.swarm.judging.posted.get(round, ()))

    def ballot(self, round: int, attester: str) -> bytes:
        return self.swarm.judging.ballots.get((round, attester), bytes(32))

    def verdict(self, round: int, subject: str) -> Verdict:
        tally = self.swarm.judging.tallies.get((round, subject))
        return (tally or Tally(state=VerdictState.NONE)).verdict()

    def settle(self, round: int, subject: str) -> None:
        self.swarm.judging.settle(round, subject, self.swarm.round)

    def resolve_flag(self, round: int, subject: str, flagger: str) -> None:
        self.swarm.judging.resolve_flag(round, subject, flagger)

    def report_agreement(
        self, round: int, attester: str, items: Sequence[VerdictItem], index: int
    ) -> None:
        self.swarm.judging.report_agreement(round, attester, items, index)

    def reveals(self, round: int) -> dict[str, RevealedBallot]:
        return dict(self.swarm.judging.revealed.get(round, {}))

    def _peer(self) -> str:
        if self.peer is None:
            raise RuntimeError("join the swarm first")
        return self.peer

"""The in-process exchange: nodes of one process swap batches through memory, with no chain.

Everything that decides what a node learns is the node's own code, as on a chain: the same task
derivation from the round seed and the peer's address, the same signed and encoded batch, the same
fetch, verification and re-scoring of every peer batch (from an in-memory content store that is
re-hashed like any other), the same selection and GRPO step. What is left out is what costs time
and decides nothing about learning: transactions, blocks, stake and slashing. Attestations are
recorded with the contract's ordering rule; a flagged batch is "settled" without a penalty.

An :class:`InProcessSwarm` is the shared part (the round, the commitments, the blobs); each node
gets its own :class:`InProcessExchange` from ``swarm.exchange()``. The experiment's runner moves
the round with ``advance`` (as time travel does on a dev chain).
"""

from __future__ import annotations

import threading
from collections.abc import Iterable, Sequence
from dataclasses import dataclass, field

from eth_utils import keccak, to_checksum_address

from node.chain.eip712 import Domain
from node.chain.events import RolloutsPublished
from node.chain.models import Attestation, Parameters
from node.round.exchange import Exchange, SwarmInfo
from node.round.state import ChainIdentity, OwnBatch
from node.round.view import everyone_published, ordered_commitments
from node.storage import ContentStore, NotFound, TooLarge, sha256
from node.storage.base import check_digest, verified

#: Anvil's chain id and the address its first deployment gets: batches look like the chain path's.
CHAIN_ID = 31337
COORDINATOR = "0x5FbDB2315678afecb367f032d93F642f64180aa3"
_ZERO_HASH = "0x" + "00" * 32

#: The local swarm's rules (grace 1 round, attestation window 2), without stake or slashing.
PARAMETERS = Parameters(
    min_stake=1,
    unbonding_period=0,
    grace_rounds=1,
    attestation_window_rounds=2,
    slash_bps=0,
    dispute_quorum=1,
)


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

    def forget(self, digests: Iterable[bytes]) -> None:
        with self._lock:
            for digest in digests:
                self._blobs.pop(digest, None)


@dataclass
class InProcessSwarm:
    """The swarm's shared state: members, the current round, commitments and blobs."""

    genesis_seed: bytes
    round: int = 0
    domain: Domain = field(default_factory=lambda: Domain(CHAIN_ID, COORDINATOR))
    store: MemoryStore = field(default_factory=MemoryStore)
    members: set[str] = field(default_factory=set)
    published: dict[int, dict[str, RolloutsPublished]] = field(default_factory=dict)
    next_attest: dict[str, int] = field(default_factory=dict)
    attestations: list[tuple[str, Attestation]] = field(default_factory=list)
    settled: set[tuple[int, str]] = field(default_factory=set)

    @staticmethod
    def genesis_seed_for(seed: int) -> bytes:
        """The genesis seed of an experiment seed (on a chain it is read from the contract)."""
        return keccak(text=f"sapo-experiment/genesis/{seed}")

    @property
    def identity(self) -> ChainIdentity:
        return ChainIdentity(
            chain_id=self.domain.chain_id,
            coordinator=self.domain.verifying_contract,
            deployment_block_hash="0x" + keccak(self.genesis_seed).hex(),
        )

    def exchange(self) -> InProcessExchange:
        """A node's own link to this swarm."""
        return InProcessExchange(self)

    def advance(self, round: int) -> None:
        """Makes ``round`` current and drops what no node can use any more."""
        self.round = round
        oldest = round - PARAMETERS.grace_rounds - PARAMETERS.attestation_window_rounds
        for old in [r for r in self.published if r < oldest]:
            self.store.forget(c.digest for c in self.published.pop(old).values())


class InProcessExchange(Exchange):
    """One node's view of an :class:`InProcessSwarm`."""

    def __init__(self, swarm: InProcessSwarm) -> None:
        self.swarm = swarm
        self.store = swarm.store
        self.peer: str | None = None

    @property
    def domain(self) -> Domain:
        return self.swarm.domain

    def join(self, peer: str) -> SwarmInfo:
        self.peer = to_checksum_address(peer)
        self.swarm.members.add(self.peer)
        return SwarmInfo(self.swarm.genesis_seed, PARAMETERS, self.swarm.identity)

    def check(self) -> None:
        """Nothing can reset memory."""

    def current_round(self) -> int:
        return self.swarm.round

    def publication(self, round: int, peer: str) -> bytes | None:
        commitment = self.swarm.published.get(round, {}).get(peer)
        return None if commitment is None else commitment.digest

    def publish(self, batch: OwnBatch) -> None:
        peer = self._peer()
        if not self.swarm.round - PARAMETERS.grace_rounds <= batch.round <= self.swarm.round:
            raise ValueError(f"round {batch.round} is not open (current {self.swarm.round})")
        round_ = self.swarm.published.setdefault(batch.round, {})
        if peer in round_:
            raise ValueError(f"{peer} already published round {batch.round}")
        round_[peer] = RolloutsPublished(
            block_number=0,
            block_hash=_ZERO_HASH,
            tx_hash=_ZERO_HASH,
            log_index=0,
            round=batch.round,
            peer=peer,
            digest=batch.digest,
            groups=batch.groups,
            completions=batch.completions,
            reward_sum=batch.reward_sum,
            relayer=None,
        )

    def refresh(self) -> None:
        """Memory is always up to date."""

    def commitments(self, rounds: Iterable[int]) -> list[RolloutsPublished]:
        return ordered_commitments(self.swarm.published, rounds)

    def everyone_published(self, round: int, *, besides: str) -> bool:
        swarm = self.swarm
        return everyone_published(swarm.members, swarm.published, round, besides=besides)

    def forget_before(self, round: int) -> None:
        """The swarm forgets for everyone when it advances."""

    def next_attest_round(self, peer: str) -> int:
        return self.swarm.next_attest.get(peer, 0)

    def attest(self, items: Sequence[Attestation]) -> None:
        peer = self._peer()
        keys = [(item.round, int(item.subject, 16)) for item in items]
        first = self.next_attest_round(peer)
        if keys != sorted(set(keys)) or (items and items[0].round < first):
            raise ValueError("attestations must be new and sorted by (round, subject)")
        self.swarm.attestations += [(peer, item) for item in items]
        if items:
            self.swarm.next_attest[peer] = items[-1].round + 1

    def is_settled(self, round: int, subject: str) -> bool:
        return (round, subject) in self.swarm.settled

    def settle(self, round: int, subject: str) -> None:
        self.swarm.settled.add((round, subject))

    def _peer(self) -> str:
        if self.peer is None:
            raise RuntimeError("join the swarm first")
        return self.peer

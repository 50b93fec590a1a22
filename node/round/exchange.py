"""How a node talks to the swarm: publish, read peers' commitments, fetch, judge, settle.

:class:`Exchange` is everything :class:`~node.round.node.SwarmNode` asks of the world outside its
own model and state folder. Two implementations:

- :class:`ChainExchange`: the coordinator contract (transactions and its events, read through a
  :class:`~node.round.view.SwarmView`) and a content store. ``swarm run``, ``swarm local up`` and
  the experiment's chain exchange use it.
- :class:`~node.round.inprocess.InProcessExchange`: nodes of one process, batches in memory, no
  chain. The experiment's fast path.

Both keep the rules a node relies on: a peer publishes a round once, within the grace window; a
commitment carries the batch's digest and counts; a round is sealed, committed on and revealed in
its phases, by the committee the seal's beacon draws; bytes are fetched from a content store that is
never trusted (every blob is re-hashed). On a chain, stores find each other through it: a node
announces its store's endpoint when it joins and connects to the announced endpoints of the peers
whose batches it is about to fetch (``reach``; docs/PROTOCOL.md, "Store endpoints").
"""

from __future__ import annotations

import logging
from abc import ABC, abstractmethod
from collections.abc import Iterable, Sequence
from dataclasses import dataclass
from pathlib import Path

from eth_account.signers.local import LocalAccount

from node.chain.client import CoordinatorClient
from node.chain.deployment import Deployment
from node.chain.eip712 import Domain
from node.chain.errors import ChainError
from node.chain.events import EventReader, RolloutsPublished, VerdictIgnored, VerdictRevealed
from node.chain.models import PeerStatus, Phases, Rules, SealInfo, Verdict, VerdictItem
from node.config import NodeConfig
from node.round.errors import NotActive
from node.round.state import ChainIdentity, OwnBatch
from node.round.view import PostedEvidence, SwarmView, check_chain
from node.storage import ContentStore, StoreError, open_store
from node.storage.endpoint import (
    EndpointRejected,
    StoreEndpoint,
    announceable,
    encode_endpoint,
    verified_announcement,
)
from node.storage.endpoint_proof import EndpointDomain

log = logging.getLogger(__name__)


def connect_chain(
    config: NodeConfig, account: LocalAccount | None = None
) -> tuple[CoordinatorClient, Deployment]:
    """A client of the coordinator in ``config``'s deployment file, acting for ``account``."""
    deployment = Deployment.load(config.chain.deployment.expanduser())
    client = CoordinatorClient.connect(
        config.chain.rpc_url, deployment, account=account, timeout=config.chain.rpc_timeout
    )
    return client, deployment


@dataclass(frozen=True)
class SwarmInfo:
    """What a node learns when it joins: the seed of every round's tasks and the phases."""

    genesis_seed: bytes
    phases: Phases
    identity: ChainIdentity


@dataclass(frozen=True)
class RevealedBallot:
    """One attester's revealed ballot: its items in the order revealed (what its reveal receipt
    hashes) and the subjects on which its item counted (VerdictRevealed, not VerdictIgnored)."""

    items: tuple[VerdictItem, ...]
    counted: frozenset[str]


class Exchange(ABC):
    """One node's link to the swarm (each node has its own; it acts for that node's peer)."""

    #: Where the batches' bytes are (put by their publisher, fetched and re-hashed by the others).
    store: ContentStore

    @property
    @abstractmethod
    def domain(self) -> Domain:
        """The EIP-712 domain batches are signed for."""

    @abstractmethod
    def join(self, peer: str) -> SwarmInfo:
        """Checks that ``peer`` may take part (NotActive otherwise) and reads the swarm's rules."""

    @abstractmethod
    def check(self) -> None:
        """Raises ChainReset when the swarm this node joined is gone."""

    @abstractmethod
    def current_round(self) -> int: ...

    @abstractmethod
    def publication(self, round: int, peer: str) -> bytes | None:
        """The digest ``peer`` committed for ``round``, if any (read fresh: a restarted node asks
        before it publishes)."""

    @abstractmethod
    def publish(self, batch: OwnBatch) -> None:
        """Commits ``batch`` (its bytes are in the store already). Raises the contract's
        AlreadyPublished or WrongRound errors."""

    @abstractmethod
    def refresh(self) -> None:
        """Reads what happened since the last call (new peers, new commitments)."""

    @abstractmethod
    def commitments(self, rounds: Iterable[int]) -> list[RolloutsPublished]:
        """Every commitment of ``rounds`` seen at the last ``refresh``, by round then peer."""

    def reach(self, peers: Iterable[str]) -> None:
        """Connects the store to the stores of ``peers``, whose batches are fetched next (nothing
        to do where every node reads the same store); never raises for an unreachable peer."""

    def unreached(self, peers: Iterable[str]) -> None:
        """The batches of ``peers`` could not be fetched: ``reach`` connects to them again."""

    @abstractmethod
    def everyone_published(self, round: int, *, besides: str) -> bool:
        """True when every active peer other than ``besides`` has published ``round``."""

    @abstractmethod
    def forget_before(self, round: int) -> None:
        """Drops commitments older than ``round`` (no longer needed)."""

    # ------------------------------------------------------------------ judging (protocol v2)

    @abstractmethod
    def rules_at(self, round: int) -> Rules:
        """The rules that judge ``round`` (fixed for it once it can be judged)."""

    @abstractmethod
    def seal_round(self, round: int) -> None:
        """Fixes ``round``'s committee beacon (AlreadySealed, WrongPhase otherwise)."""

    def bondable_flags(self, peer: str, flag_bond: int) -> int | None:
        """How many flags ``peer``'s free stake bonds in full now (None: no money moves here)."""
        return None

    @abstractmethod
    def seal(self, round: int) -> SealInfo | None:
        """``round``'s seal, None while it is not sealed."""

    @abstractmethod
    def weight_at(self, peer: str, round: int) -> int:
        """``peer``'s judging weight for ``round`` (0 when it may not judge it)."""

    @abstractmethod
    def commit_verdicts(self, round: int, commitment: bytes) -> None:
        """Commits this node's ballot on ``round`` (once; commit phase only)."""

    @abstractmethod
    def reveal_verdicts(self, round: int, items: Sequence[VerdictItem], salt: bytes) -> None:
        """Reveals the ballot committed on ``round`` (reveal phase only)."""

    @abstractmethod
    def post_evidence(self, round: int, subject: str, group: int, completion: int, token: int) -> None:
        """Posts where ``subject``'s batch of ``round`` fails this seat's recompute (once per
        seat and batch, commit phase only, by a recomputing seat)."""

    @abstractmethod
    def evidence(self, round: int) -> list[PostedEvidence]:
        """The evidence posted on ``round``'s batches so far, in chain order."""

    @abstractmethod
    def ballot(self, round: int, attester: str) -> bytes:
        """The ballot slot: the commitment before the reveal, the receipt after, zeros if none."""

    @abstractmethod
    def verdict(self, round: int, subject: str) -> Verdict:
        """The tally and state of ``subject``'s batch of ``round``."""

    @abstractmethod
    def settle(self, round: int, subject: str) -> None:
        """Settles a flagged batch (raises the contract's AlreadySettled or NoDispute errors)."""

    @abstractmethod
    def resolve_flag(self, round: int, subject: str, flagger: str) -> None:
        """Resolves ``flagger``'s flag on a settled batch (NoFlag when there is none left)."""

    @abstractmethod
    def report_agreement(
        self, round: int, attester: str, items: Sequence[VerdictItem], index: int
    ) -> None:
        """Reports ``attester``'s agreement ``items[index]`` with a batch whose flags won."""

    @abstractmethod
    def reveals(self, round: int) -> dict[str, RevealedBallot]:
        """Every ballot revealed on ``round``, by attester, rebuilt from the reveal events."""

    def revealed_items(self, round: int, attester: str) -> list[VerdictItem]:
        """``attester``'s full revealed item list of ``round`` (empty when it revealed none)."""
        found = self.reveals(round).get(attester)
        return list(found.items) if found else []


class ChainExchange(Exchange):
    """The coordinator contract on a chain, through ``client``, and a content store."""

    def __init__(
        self,
        client: CoordinatorClient,
        deployment: Deployment,
        store: ContentStore,
        *,
        allow_private: bool = False,
    ):
        if client.account_address is None:
            raise ValueError("a node's client needs the peer's account")
        self.client = client
        self.deployment = deployment
        self.store = store
        self.allow_private = allow_private
        self.view = SwarmView(
            EventReader(client.w3, client.address),
            deployment.deployment_block,
            domain=EndpointDomain(deployment.chain_id, deployment.coordinator),
            allow_private=allow_private,
        )
        self._announced: bytes | None = None
        self._reached: dict[str, StoreEndpoint] = {}

    @classmethod
    def connect(cls, config: NodeConfig, account: LocalAccount) -> ChainExchange:
        """The chain and store named in ``config``, acting for ``account``."""
        client, deployment = connect_chain(config, account)
        setting = config.storage.store
        store = open_store(
            Path(setting).expanduser() if "://" not in setting else setting,
            timeout=config.storage.fetch_timeout,
        )
        return cls(client, deployment, store, allow_private=config.storage.allow_private_addresses)

    @property
    def domain(self) -> Domain:
        return self.client.domain

    def check_can_join(self, peer: str) -> None:
        """Raises ChainReset or NotActive unless ``peer`` may join now (read-only: ``swarm run``
        asks before it loads the model)."""
        self.check()
        status = self.client.peer_info(peer).status
        if status is PeerStatus.NONE:
            raise NotActive(
                f"{peer} is not registered on this coordinator: register it first "
                "(swarm register --name NAME --stake AMOUNT)"
            )
        if status is not PeerStatus.ACTIVE:
            raise NotActive(
                f"{peer} is {status.name.lower()} on this coordinator: it left the swarm, and only "
                "an active peer publishes (register another key to take part again)"
            )

    def join(self, peer: str) -> SwarmInfo:
        self.check_can_join(peer)
        info = SwarmInfo(
            genesis_seed=self.client.genesis_seed(),
            phases=self.client.phases(),
            identity=ChainIdentity(
                chain_id=self.deployment.chain_id,
                coordinator=self.deployment.coordinator,
                deployment_block_hash=self.deployment.block_hash,
            ),
        )
        self.refresh()
        self._announce(peer)
        return info

    def check(self) -> None:
        check_chain(self.client, self.deployment, seen_block=self.view.next_block - 1)

    def current_round(self) -> int:
        """The round a transaction sent now lands in: by the next block's time, so that a chain
        that mines only on transactions (an idle Anvil) still moves on."""
        return self.client.round_now()

    def publication(self, round: int, peer: str) -> bytes | None:
        """From the RolloutsPublished events (the contract keeps no digest): refreshed first."""
        self.refresh()
        found = self.view.published.get(round, {}).get(peer)
        return None if found is None else found.digest

    def publish(self, batch: OwnBatch) -> None:
        self.client.publish_rollouts(
            batch.round, batch.digest, batch.groups, batch.completions, batch.reward_sum
        )

    def refresh(self) -> None:
        self.view.refresh(self.client.block_number())

    def commitments(self, rounds: Iterable[int]) -> list[RolloutsPublished]:
        return self.view.commitments(rounds)

    def reach(self, peers: Iterable[str]) -> None:
        """Connects the store to each peer's announced endpoint it has not connected to yet (or
        whose batch it last failed to fetch); a failure is logged and tried again at the next
        call (the fetch goes ahead regardless)."""
        for peer in sorted(set(peers)):
            endpoint = self.view.endpoint(peer)
            if endpoint is None or self._reached.get(peer) == endpoint:
                continue
            try:
                self.store.connect(endpoint)
            except StoreError as error:
                log.warning(
                    "could not connect to the store of %s (%s): %s", peer, endpoint.peer_id, error
                )
                continue
            self._reached[peer] = endpoint
            log.info("connected to the store of %s (%s)", peer, endpoint.peer_id)

    def unreached(self, peers: Iterable[str]) -> None:
        """Forgets the connections to ``peers`` (their store or ours may have restarted)."""
        for peer in peers:
            self._reached.pop(peer, None)

    def _announce(self, peer: str) -> None:
        """Announces the store's endpoint unless the chain's latest announcement of ``peer`` is
        the same bytes and holds the peer id (a store without an endpoint announces nothing)."""
        own = self._own_announcement(peer)
        if own is None:
            return
        peer_id, data = own
        endpoints = self.view.endpoints
        on_chain = data == endpoints.latest(peer) and endpoints.holder(peer_id) == peer
        if on_chain or data == self._announced:
            return
        try:
            self.client.announce_endpoint(data)
        except ChainError as error:
            log.warning("%s: announcing the store endpoint failed: %s", peer, error)
            return
        self._announced = data
        log.info("%s: announced store endpoint %s", peer, data.decode())

    def _own_announcement(self, peer: str) -> tuple[str, bytes] | None:
        """The store's peer id and the bytes to announce for it, or None (no endpoint, its peer
        id held by another address, no signature, nothing peers may dial, or peers would reject
        it: each logged)."""
        try:
            own = self.store.endpoint()
        except StoreError as error:
            log.warning("%s: cannot read the store's endpoint: %s", peer, error)
            return None
        if own is None:
            return None
        holder = self.view.endpoints.holder(own.peer_id)
        if holder not in (None, peer):
            log.warning(
                "%s: the store's peer id %s is held by %s, which announced it first: not "
                "announcing it (give this node its own Kubo repository)",
                peer,
                own.peer_id,
                holder,
            )
            return None
        try:
            signature = self.store.sign(self.view.endpoints.domain.message(peer))
        except StoreError as error:
            log.warning("%s: the store cannot sign its endpoint: %s", peer, error)
            return None
        endpoint = announceable(own, signature, allow_private=self.allow_private)
        if endpoint is None:
            log.warning(
                "%s: the store's addresses %s hold none that peers may dial: not announcing (a "
                "swarm on one host or LAN sets storage.allow_private_addresses)",
                peer,
                ", ".join(own.addrs) or "(none)",
            )
            return None
        data = encode_endpoint(endpoint, signature)
        try:
            verified_announcement(data, announcer=peer, domain=self.view.endpoints.domain)
        except EndpointRejected as rejected:
            log.warning("%s: peers would reject the store's endpoint: %s", peer, rejected.reason)
            return None
        return endpoint.peer_id, data

    def everyone_published(self, round: int, *, besides: str) -> bool:
        return self.view.everyone_published(round, besides=besides)

    def forget_before(self, round: int) -> None:
        self.view.forget_before(round)

    def rules_at(self, round: int) -> Rules:
        return self.client.rules_at(round)

    def seal_round(self, round: int) -> None:
        self.client.seal_round(round)

    def bondable_flags(self, peer: str, flag_bond: int) -> int | None:
        return max(0, self.client.peer_info(peer).free_stake) // flag_bond

    def seal(self, round: int) -> SealInfo | None:
        return self.client.seal(round)

    def weight_at(self, peer: str, round: int) -> int:
        return self.client.weight_at(peer, round)

    def commit_verdicts(self, round: int, commitment: bytes) -> None:
        self.client.commit_verdicts(round, commitment)

    def reveal_verdicts(self, round: int, items: Sequence[VerdictItem], salt: bytes) -> None:
        self.client.reveal_verdicts(round, items, salt)

    def post_evidence(self, round: int, subject: str, group: int, completion: int, token: int) -> None:
        self.client.post_evidence(round, subject, group, completion, token)

    def evidence(self, round: int) -> list[PostedEvidence]:
        return self.view.evidence(round)

    def ballot(self, round: int, attester: str) -> bytes:
        return self.client.ballot(round, attester)

    def verdict(self, round: int, subject: str) -> Verdict:
        return self.client.verdict(round, subject)

    def settle(self, round: int, subject: str) -> None:
        self.client.settle(round, subject)

    def resolve_flag(self, round: int, subject: str, flagger: str) -> None:
        self.client.resolve_flag(round, subject, flagger)

    def report_agreement(
        self, round: int, attester: str, items: Sequence[VerdictItem], index: int
    ) -> None:
        self.client.report_agreement(round, attester, items, index)

    def reveals(self, round: int) -> dict[str, RevealedBallot]:
        """Read from the round's VerdictRevealed and VerdictIgnored events (only after a slash,
        so the read over the whole deployment is rare)."""
        events = self.view.reader.read(
            self.deployment.deployment_block,
            self.client.block_number(),
            events=[VerdictRevealed, VerdictIgnored],
            round=round,
        )
        return reveals_from_events(e for e in events if e.round == round)


def reveals_from_events(
    events: Iterable[VerdictRevealed | VerdictIgnored],
) -> dict[str, RevealedBallot]:
    """Each attester's revealed ballot from its reveal events (one event per item, in order)."""
    items: dict[str, list[VerdictItem]] = {}
    counted: dict[str, set[str]] = {}
    for event in events:
        items.setdefault(event.attester, []).append(event.item())
        if isinstance(event, VerdictRevealed):
            counted.setdefault(event.attester, set()).add(event.subject)
    return {
        attester: RevealedBallot(
            tuple(sorted(found, key=VerdictItem.sort_key)),
            frozenset(counted.get(attester, ())),
        )
        for attester, found in items.items()
    }

"""The node's view of the swarm, read from coordinator events: who is active, who published what.

:class:`SwarmView` reads new events since its last block on every ``refresh`` (cheap: one
``eth_getLogs`` over the new blocks), keeps the set of active peers (registered and not exiting)
and every round's ``RolloutsPublished`` commitments. The round loop asks it which commitments
it has not judged yet and whether every active peer has published a round (then waiting longer
brings nothing). It also keeps each peer's latest usable store endpoint from ``EndpointAnnounced``
and ``ExitRequested`` (docs/PROTOCOL.md, "Store endpoints"); a rejected announcement is logged and
ignored.

:func:`check_chain` tells a chain that was reset or replaced (Anvil restarted, a devnet wiped)
from a slow one: the deployment block must still carry the recorded hash, and the coordinator
must still have code.
"""

from __future__ import annotations

import logging
from collections.abc import Iterable
from dataclasses import dataclass

from node.chain.client import CoordinatorClient
from node.chain.deployment import Deployment
from node.chain.events import (
    EndpointAnnounced,
    EventReader,
    ExitRequested,
    PeerRegistered,
    ProvenanceEvidence,
    RolloutsPublished,
    Withdrawn,
)
from node.round.errors import ChainReset
from node.storage.announced import AnnouncedEndpoints
from node.storage.endpoint import EndpointRejected, StoreEndpoint
from node.storage.endpoint_proof import EndpointDomain

log = logging.getLogger(__name__)


def check_chain(client: CoordinatorClient, deployment: Deployment, *, seen_block: int = 0) -> None:
    """Raises :class:`ChainReset` unless the deployment is still on the chain, unchanged, and the
    chain has at least the blocks this node has already seen (``seen_block``)."""
    latest = client.block_number()
    if latest < seen_block:
        raise ChainReset(
            f"the chain was reset: it is at block {latest}, this node has seen block {seen_block}. "
            "Redeploy (swarm-deploy), register again and point chain.deployment at the new file."
        )
    block_hash = client.block_hash(deployment.deployment_block)
    code = client.has_code()
    if block_hash != deployment.block_hash or not code:
        raise ChainReset(
            f"the chain was reset: block {deployment.deployment_block} is "
            f"{block_hash or 'missing'} (deployed in {deployment.block_hash}) and the coordinator "
            f"{client.address} has {'no ' if not code else ''}code. Redeploy (swarm-deploy), "
            "register again and point chain.deployment at the new file."
        )


@dataclass(frozen=True)
class PostedEvidence:
    """A recomputing seat's evidence on ``subject``'s batch of ``round`` (``ProvenanceEvidence``):
    completion ``completion`` of group ``group`` fails first at token ``token``."""

    round: int
    subject: str
    poster: str
    group: int
    completion: int
    token: int


class SwarmView:
    """Active peers, per-round commitments and store endpoints, from events since
    ``start_block``; store endpoints count with a proof for ``domain`` (the deployment read), and
    ``allow_private`` keeps peers' private store addresses (one host or LAN)."""

    def __init__(
        self,
        reader: EventReader,
        start_block: int,
        *,
        domain: EndpointDomain,
        allow_private: bool = False,
    ):
        self.reader = reader
        self.next_block = start_block
        self.active: set[str] = set()
        self.published: dict[int, dict[str, RolloutsPublished]] = {}
        self.posted: dict[int, list[PostedEvidence]] = {}
        self.endpoints = AnnouncedEndpoints(domain, allow_private=allow_private)

    def refresh(self, latest_block: int) -> None:
        """Applies the events of blocks ``next_block .. latest_block``."""
        if latest_block < self.next_block:
            return
        events = self.reader.read(
            self.next_block,
            latest_block,
            events=[
                PeerRegistered,
                ExitRequested,
                Withdrawn,
                RolloutsPublished,
                EndpointAnnounced,
                ProvenanceEvidence,
            ],
        )
        for event in events:
            if isinstance(event, PeerRegistered):
                self.active.add(event.peer)
            elif isinstance(event, ExitRequested):
                self.active.discard(event.peer)
                self.endpoints.exited(event.peer)  # the peer id it held is free
            elif isinstance(event, Withdrawn):
                self.active.discard(event.peer)
            elif isinstance(event, RolloutsPublished):
                self.published.setdefault(event.round, {})[event.peer] = event
            elif isinstance(event, EndpointAnnounced):
                self._announced(event)
            elif isinstance(event, ProvenanceEvidence):
                self.posted.setdefault(event.round, []).append(_posted(event))
        self.next_block = latest_block + 1

    def _announced(self, event: EndpointAnnounced) -> None:
        try:
            self.endpoints.apply(event.peer, event.endpoint)
        except EndpointRejected as rejected:
            log.warning(
                "ignored the store endpoint %s announced in block %d: %s",
                event.peer,
                event.block_number,
                rejected.reason,
            )

    def endpoint(self, peer: str) -> StoreEndpoint | None:
        """``peer``'s latest usable store endpoint, if it announced one."""
        return self.endpoints.endpoint(peer)

    def commitments(self, rounds: Iterable[int]) -> list[RolloutsPublished]:
        """The commitments of ``rounds``, by round then peer."""
        return ordered_commitments(self.published, rounds)

    def everyone_published(self, round: int, *, besides: str) -> bool:
        """True when every active peer other than ``besides`` has published ``round``."""
        return everyone_published(self.active, self.published, round, besides=besides)

    def evidence(self, round: int) -> list[PostedEvidence]:
        """The provenance evidence posted on ``round``'s batches, in chain order."""
        return list(self.posted.get(round, ()))

    def forget_before(self, round: int) -> None:
        self.published = {r: c for r, c in self.published.items() if r >= round}
        self.posted = {r: e for r, e in self.posted.items() if r >= round}


def _posted(event: ProvenanceEvidence) -> PostedEvidence:
    return PostedEvidence(
        event.round, event.subject, event.poster, event.group, event.completion, event.token
    )


Published = dict[int, dict[str, RolloutsPublished]]


def ordered_commitments(published: Published, rounds: Iterable[int]) -> list[RolloutsPublished]:
    """The commitments of ``rounds`` in ``published`` (round -> peer -> commitment), by round
    then peer: the order a node judges them in, whatever exchange it uses."""
    return [
        published[r][peer] for r in sorted(set(rounds)) for peer in sorted(published.get(r, {}))
    ]


def everyone_published(active: set[str], published: Published, round: int, *, besides: str) -> bool:
    """True when every peer of ``active`` other than ``besides`` has published ``round``."""
    return not active - {besides} - set(published.get(round, {}))

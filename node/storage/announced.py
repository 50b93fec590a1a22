"""Which store endpoint announcements count: the chain's record, applied in chain order.

docs/PROTOCOL.md, "Store endpoints", "Which announcement counts". Every node replays the same
events (``EndpointAnnounced`` and ``ExitRequested``) through :class:`AnnouncedEndpoints`, so every
node agrees on who holds a peer id: the outcome depends on the chain alone, never on a node's
``allow_private`` setting.
"""

from __future__ import annotations

from node.storage.endpoint import (
    EndpointRejected,
    StoreEndpoint,
    peer_id_key,
    usable_endpoint,
    verified_announcement,
)
from node.storage.endpoint_proof import EndpointDomain


class AnnouncedEndpoints:
    """Each peer's latest usable endpoint and who holds each peer id, from the coordinator's
    events in chain order.

    - A peer's latest announcement replaces the one before: an empty or rejected one leaves the
      peer without an endpoint, and so does one whose addresses this node may not dial.
    - An announcement counts only with a valid proof (the peer id's key signed the announcing
      address on this deployment). The address whose counting announcement named a peer id first
      holds it until it releases it: by announcing anything else (another peer id, empty bytes,
      an announcement that does not count) or by exiting (:meth:`exited`). While it holds the peer
      id another address's announcement of it is rejected, even with a valid proof: only the key
      holder can sign, so both are one operator's, and the first keeps what it has.
    - An exiting peer keeps its endpoint (its last batches may still be fetched) until another
      address takes the peer id.
    """

    def __init__(self, domain: EndpointDomain, *, allow_private: bool) -> None:
        self.domain = domain
        self.allow_private = allow_private
        self._holders: dict[bytes, str] = {}  # peer id multihash -> the address holding it
        self._held: dict[str, bytes] = {}  # the inverse
        self._latest: dict[str, bytes] = {}
        self._refusals: dict[str, str] = {}
        self._usable: dict[str, StoreEndpoint] = {}

    def apply(self, peer: str, data: bytes) -> StoreEndpoint | None:
        """Records ``peer``'s announcement; its endpoint now (None when withdrawn).

        EndpointRejected when unusable (``peer`` then has no endpoint).
        """
        self._latest[peer] = bytes(data)
        self._refusals.pop(peer, None)
        self._usable.pop(peer, None)
        self._release(peer)
        try:
            return self._accept(peer, bytes(data)) if data else None
        except EndpointRejected as rejected:
            self._refusals[peer] = rejected.reason
            raise

    def exited(self, peer: str) -> None:
        """``peer`` requested its exit (``ExitRequested``): the peer id it holds is free."""
        self._release(peer)

    def endpoint(self, peer: str) -> StoreEndpoint | None:
        """``peer``'s latest usable endpoint, if any."""
        return self._usable.get(peer)

    def latest(self, peer: str) -> bytes | None:
        """The bytes of ``peer``'s latest announcement (usable or not), None if it never did."""
        return self._latest.get(peer)

    def refusal(self, peer: str) -> str | None:
        """Why ``peer``'s latest announcement was rejected; None if it was not (or none)."""
        return self._refusals.get(peer)

    def holder(self, peer_id: str) -> str | None:
        """The chain address holding ``peer_id`` now; None if nobody (or not a peer id)."""
        try:
            return self._holders.get(peer_id_key(peer_id))
        except EndpointRejected:
            return None

    def _accept(self, peer: str, data: bytes) -> StoreEndpoint:
        announcement = verified_announcement(data, announcer=peer, domain=self.domain)
        holder = self._holders.get(announcement.key)
        if holder is not None:
            raise EndpointRejected(
                f"peer id {announcement.peer_id} is held by {holder}, which announced it first"
            )
        self._take(peer, announcement.key)
        endpoint = usable_endpoint(announcement, allow_private=self.allow_private)
        self._usable[peer] = endpoint
        return endpoint

    def _take(self, peer: str, key: bytes) -> None:
        """``peer`` holds ``key`` now; an exited former holder's endpoint goes."""
        self._holders[key] = peer
        self._held[peer] = key
        for other, endpoint in list(self._usable.items()):
            if other != peer and peer_id_key(endpoint.peer_id) == key:
                del self._usable[other]

    def _release(self, peer: str) -> None:
        key = self._held.pop(peer, None)
        if key is not None:
            del self._holders[key]

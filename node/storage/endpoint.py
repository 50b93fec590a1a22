"""Where a peer's content store can be reached from other hosts (announced on-chain).

A network store (Kubo) has an endpoint: its libp2p peer id and the multiaddrs it listens on. A
node announces its own on the coordinator and connects to the announced endpoints of the peers
whose batches it fetches, so peers find each other through the chain, with no bootstrap list. A
local folder has no endpoint.
"""

from __future__ import annotations

from dataclasses import dataclass


@dataclass(frozen=True)
class StoreEndpoint:
    """A libp2p peer id and the multiaddrs (without ``/p2p/<id>``) it listens on."""

    peer_id: str
    addrs: tuple[str, ...]

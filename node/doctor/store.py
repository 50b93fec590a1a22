"""The content store's checks: a folder is writable or a Kubo API answers; this node's announced
endpoint is its daemon's, signed by the daemon's key and accepted by peers; the daemon is connected
to a peer whose endpoint was announced on-chain (docs/PROTOCOL.md, "Store endpoints")."""

from __future__ import annotations

import tempfile
from dataclasses import dataclass
from pathlib import Path

import requests

from node.chain.client import CoordinatorClient
from node.chain.deployment import Deployment
from node.chain.events import EndpointAnnounced, EventReader, ExitRequested
from node.chain.rpc import short
from node.config import NodeConfig
from node.doctor.base import Check, Run, ok, problem, skipped
from node.storage import StoreError
from node.storage.announced import AnnouncedEndpoints
from node.storage.endpoint import (
    EndpointRejected,
    StoreEndpoint,
    announceable,
    encode_endpoint,
    peer_id_key,
    verified_announcement,
)
from node.storage.endpoint_proof import EndpointDomain
from node.storage.kubo import KuboStore


def _kubo_url(config: NodeConfig) -> str | None:
    """The Kubo RPC API URL of ``[storage] store``; None for a local folder."""
    setting = config.storage.store
    return setting if "://" in setting and not setting.startswith("file://") else None


def check_store(run: Run) -> Check:
    url = _kubo_url(run.config)
    if url is not None:
        return check_kubo_api(run, url)
    folder = Path(run.config.storage.store.removeprefix("file://")).expanduser()
    try:
        folder.mkdir(parents=True, exist_ok=True)
        with tempfile.NamedTemporaryFile(dir=folder, prefix=".doctor-"):
            pass
    except OSError as exc:
        return problem(
            "store",
            f"the store folder {folder} is not writable ({exc.strerror})",
            "make it writable by this user, or set [storage] store to a writable folder",
        )
    return ok("store", f"local folder {folder} is writable (peers on other hosts cannot read it)")


def check_kubo_api(run: Run, url: str) -> Check:
    try:
        run.kubo = KuboStore(url, timeout=run.config.storage.fetch_timeout).endpoint()
    except StoreError as exc:
        return problem(
            "store",
            f"the Kubo API does not answer id: {short(exc)}",
            "start the Kubo daemon (ipfs daemon), or set [storage] store to its API URL",
        )
    addrs = ", ".join(run.kubo.addrs) or "no address"
    return ok("store", f"Kubo at {url} answers: peer id {run.kubo.peer_id}, swarm on {addrs}")


def check_announced(run: Run) -> Check:
    url = _kubo_url(run.config)
    if url is None:
        return skipped("announced", "a local store folder is not announced (nothing to share)")
    kubo, address, deployment = run.kubo, run.address, run.deployment
    if kubo is None or run.client is None or not run.contract or address is None:
        return skipped("announced", "needs the Kubo API, the contract and the keystore's address")
    if deployment is None:
        return skipped("announced", "needs the deployment file")
    run.announced = read_announcements(run.client, deployment, run.config)
    endpoints = run.announced.endpoints
    holder = endpoints.holder(kubo.peer_id)
    if holder not in (None, address):
        return problem(
            "announced",
            f"Kubo's peer id {kubo.peer_id} is held by {holder}, which announced it first",
            "give this node its own Kubo repository (a new IPFS_PATH, ipfs init)",
        )
    wanted = _wanted(run.config, kubo, url, address, endpoints.domain)
    if isinstance(wanted, Check):
        return wanted
    return _compare(endpoints, address, *wanted)


def _wanted(
    config: NodeConfig, kubo: StoreEndpoint, url: str, address: str, domain: EndpointDomain
) -> tuple[StoreEndpoint, bytes] | Check:
    """What swarm run would announce for the daemon now (endpoint and bytes: Kubo signs
    deterministically, so the bytes are the same at every start), or the problem."""
    try:
        store = KuboStore(url, timeout=config.storage.fetch_timeout)
        signature = store.sign(domain.message(address))
    except StoreError as exc:
        return problem(
            "announced",
            f"Kubo cannot sign the endpoint's proof (key/sign): {short(exc)}",
            "run the bootstrap's Kubo (or Kubo 0.2x or newer) on a repository of its own",
        )
    wanted = announceable(kubo, signature, allow_private=config.storage.allow_private_addresses)
    if wanted is None:
        return problem(
            "announced",
            f"Kubo's swarm addresses ({', '.join(kubo.addrs) or 'none'}) hold none that "
            "peers may dial",
            "make Kubo's swarm port reachable on a public address (ipfs config --json "
            "Addresses.Announce '[\"/ip4/PUBLIC-IP/tcp/4001\"]', then restart it); a swarm on "
            "one host or LAN sets [storage] allow_private_addresses = true",
        )
    data = encode_endpoint(wanted, signature)
    try:
        verified_announcement(data, announcer=address, domain=domain)
    except EndpointRejected as rejected:
        return problem(
            "announced",
            f"peers would reject this node's endpoint: {rejected.reason}",
            "give Kubo an Ed25519 identity: stop it, ipfs key rotate --oldkey=old-self "
            "--type=ed25519 (a new peer id), start it again",
        )
    return wanted, data


def _compare(
    endpoints: AnnouncedEndpoints, address: str, wanted: StoreEndpoint, data: bytes
) -> Check:
    """The chain's latest announcement of ``address`` against ``data``, what it would be now."""
    latest = endpoints.latest(address)
    if not latest:
        return problem(
            "announced",
            "this peer has announced no store endpoint",
            "start the node: swarm run announces its Kubo endpoint when it starts",
        )
    if latest != data:
        on_chain = short(latest.decode("utf-8", "replace"))
        return problem(
            "announced",
            f"the chain has {on_chain}, Kubo is now {data.decode()}",
            "restart swarm run: it announces the daemon's endpoint again when it starts",
        )
    if endpoints.holder(wanted.peer_id) != address:  # announced while another address held it
        return problem(
            "announced",
            f"peers rejected this peer's announcement: {endpoints.refusal(address)}",
            "restart swarm run: it announces the daemon's endpoint again when it starts",
        )
    return ok("announced", f"{wanted.peer_id} at {', '.join(wanted.addrs)}")


def check_peers(run: Run) -> Check:
    url = _kubo_url(run.config)
    if url is None:
        return skipped("peers", "a local store folder has no peers (use a Kubo API to share)")
    if run.kubo is None or run.announced is None:
        return skipped("peers", "needs the Kubo API and the chain's announcements")
    others = run.announced.usable(besides=run.address or "")
    if not others:
        return skipped("peers", "no other peer has announced a usable store endpoint yet")
    connected = _connected_peer_keys(url, run.config.storage.fetch_timeout)
    reached = [peer for peer, ep in others.items() if _peer_key(ep.peer_id) in connected]
    if not reached:
        return problem(
            "peers",
            f"Kubo is connected to none of the {len(others)} peers that announced an endpoint",
            "keep swarm run running (it connects to the peers whose batches it fetches) and open "
            "Kubo's swarm port (TCP 4001 by default) to the internet; never open the API port",
        )
    return ok("peers", f"Kubo is connected to {len(reached)} of {len(others)} announced peers")


@dataclass
class Announcements:
    """Every peer's latest announcement, applied in chain order (node.storage.endpoint)."""

    endpoints: AnnouncedEndpoints
    peers: list[str]

    def usable(self, *, besides: str) -> dict[str, StoreEndpoint]:
        """The usable endpoints of the peers other than ``besides``."""
        found = {peer: self.endpoints.endpoint(peer) for peer in self.peers if peer != besides}
        return {peer: endpoint for peer, endpoint in found.items() if endpoint is not None}


def read_announcements(
    client: CoordinatorClient, deployment: Deployment, config: NodeConfig
) -> Announcements:
    """The coordinator's ``EndpointAnnounced`` and ``ExitRequested`` events since the deployment,
    applied in order (as every node's view does)."""
    domain = EndpointDomain(deployment.chain_id, deployment.coordinator)
    endpoints = AnnouncedEndpoints(domain, allow_private=config.storage.allow_private_addresses)
    reader = EventReader(client.w3, client.address)
    peers: list[str] = []
    events = reader.read(
        deployment.deployment_block,
        client.block_number(),
        events=[EndpointAnnounced, ExitRequested],
    )
    for event in events:
        if isinstance(event, ExitRequested):
            endpoints.exited(event.peer)
            continue
        assert isinstance(event, EndpointAnnounced)
        if event.peer not in peers:
            peers.append(event.peer)
        try:
            endpoints.apply(event.peer, bytes(event.endpoint))
        except EndpointRejected:
            continue  # the peer has no usable endpoint; its latest bytes are still recorded
    return Announcements(endpoints, peers)


def _connected_peer_keys(url: str, timeout: float) -> set[bytes]:
    """The peer ids (as multihashes) Kubo is connected to now (``swarm/peers``)."""
    base = url.rstrip("/")
    base = base if base.endswith("/api/v0") else base + "/api/v0"
    answer = requests.post(f"{base}/swarm/peers", timeout=timeout)
    answer.raise_for_status()
    peers = answer.json().get("Peers") or []
    return {_peer_key(str(peer.get("Peer"))) for peer in peers} - {b""}


def _peer_key(peer_id: str) -> bytes:
    """A peer id's multihash (the same peer in base58 or CID form); empty when not a peer id."""
    try:
        return peer_id_key(peer_id)
    except EndpointRejected:
        return b""

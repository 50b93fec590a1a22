"""Store endpoints through the chain: the contract call and event, a node's announcement at join
(once per endpoint), peers' garbage ignored with a log line, connections before a fetch."""

from __future__ import annotations

import logging
from collections.abc import Callable
from pathlib import Path

import pytest
from eth_account.signers.local import LocalAccount

from node.chain.client import CoordinatorClient
from node.chain.deployment import Deployment
from node.chain.events import EndpointAnnounced, EventReader
from node.chain.reverts import SwarmCoordinatorEndpointTooLong, SwarmCoordinatorNotActive
from node.round.exchange import ChainExchange
from node.storage import LocalStore, StoreUnavailable
from node.storage.endpoint import StoreEndpoint, encode_endpoint
from tests.chain.helpers import ETHER
from tests.chain_fixtures import ChainControl
from tests.storage.test_endpoint import ALICE_ID, BOB_ID, SPEC_QM, base58

pytestmark = pytest.mark.integration

PUBLIC = ("/ip4/93.184.216.34/tcp/4001", "/ip4/93.184.216.34/udp/4001/quic-v1")
LOOPBACK = ("/ip4/127.0.0.1/tcp/41001", "/ip4/127.0.0.1/udp/41001/quic-v1")


class EndpointStore(LocalStore):
    """A real local store that says it is reachable at ``endpoint`` and records ``connect``."""

    def __init__(self, root: Path, endpoint: StoreEndpoint | None, fail: set[str] = frozenset()):
        super().__init__(root)
        self.announced_endpoint = endpoint
        self.fail = set(fail)
        self.connected: list[StoreEndpoint] = []

    def endpoint(self) -> StoreEndpoint | None:
        return self.announced_endpoint

    def connect(self, endpoint: StoreEndpoint) -> None:
        self.connected.append(endpoint)
        if endpoint.peer_id in self.fail:
            raise StoreUnavailable(f"dial backoff for {endpoint.peer_id}")


def _exchange(
    client: CoordinatorClient,
    deployment: Deployment,
    store: LocalStore,
    *,
    allow_private: bool = False,
) -> ChainExchange:
    return ChainExchange(client, deployment, store, allow_private=allow_private)


def _announcements(chain: ChainControl, peer: str) -> list[EndpointAnnounced]:
    reader = EventReader(chain.w3, chain.deployment.coordinator)
    events = reader.read(0, chain.w3.eth.block_number, events=[EndpointAnnounced], peer=peer)
    return [e for e in events if isinstance(e, EndpointAnnounced)]


# ------------------------------------------------------------------------------- the contract


def test_announce_endpoint_emits_the_bytes_and_checks_the_caller(
    chain: ChainControl,
    client_for: Callable[..., CoordinatorClient],
    dev_accounts: list[LocalAccount],
) -> None:
    peer, stranger = client_for(dev_accounts[1]), client_for(dev_accounts[2])
    peer.register("announcer", ETHER)
    data = encode_endpoint(StoreEndpoint(ALICE_ID, PUBLIC))
    assert peer.max_endpoint_bytes() == 512
    receipt = peer.announce_endpoint(data)
    (event,) = _announcements(chain, peer.account_address)
    assert (event.peer, event.endpoint, event.tx_hash) == (
        peer.account_address,
        data,
        receipt.tx_hash,
    )
    assert event.model_dump(mode="json")["endpoint"] == "0x" + data.hex()
    with pytest.raises(SwarmCoordinatorEndpointTooLong) as too_long:
        peer.announce_endpoint(b"x" * 513)
    assert (too_long.value.length, too_long.value.max_length) == (513, 512)
    assert "at most 512" in str(too_long.value)
    with pytest.raises(SwarmCoordinatorNotActive):
        stranger.announce_endpoint(data)
    client_for(dev_accounts[0]).pause()  # the deployer owns the coordinator
    peer.announce_endpoint(b"")  # works while paused; empty withdraws the endpoint
    assert [e.endpoint for e in _announcements(chain, peer.account_address)] == [data, b""]


# ------------------------------------------------------------------------- announcing at join


def test_join_announces_once_and_again_when_the_endpoint_changes(
    chain: ChainControl,
    deployment: Deployment,
    client_for: Callable[..., CoordinatorClient],
    dev_accounts: list[LocalAccount],
    tmp_path: Path,
) -> None:
    account = dev_accounts[1]
    client = client_for(account)
    client.register("kubo-node", ETHER)
    address = client.account_address
    first = StoreEndpoint(ALICE_ID, ("/ip4/10.0.0.7/tcp/4001", *PUBLIC))

    def start(endpoint: StoreEndpoint | None) -> int:
        """Joins as a freshly started node would; returns the transactions it sent."""
        nonce = chain.w3.eth.get_transaction_count(address)
        store = EndpointStore(tmp_path / "store", endpoint)
        _exchange(client_for(account), deployment, store).join(address)
        return chain.w3.eth.get_transaction_count(address) - nonce

    assert start(first) == 1
    (event,) = _announcements(chain, address)
    # A public node announces what its peers may dial: the private address is left out.
    assert event.endpoint == encode_endpoint(StoreEndpoint(ALICE_ID, PUBLIC))
    assert start(first) == 0  # a restart with the same endpoint sends nothing
    moved = StoreEndpoint(ALICE_ID, ("/ip4/93.184.216.34/tcp/4101",))
    assert start(moved) == 1  # a restart on new ports announces again
    assert start(moved) == 0
    assert start(None) == 0  # a local folder has no endpoint: nothing to announce
    assert [e.endpoint for e in _announcements(chain, address)] == [
        encode_endpoint(StoreEndpoint(ALICE_ID, PUBLIC)),
        encode_endpoint(moved),
    ]


def test_join_announces_nothing_it_cannot_stand_behind(
    chain: ChainControl,
    deployment: Deployment,
    client_for: Callable[..., CoordinatorClient],
    dev_accounts: list[LocalAccount],
    tmp_path: Path,
    caplog: pytest.LogCaptureFixture,
) -> None:
    first, second = client_for(dev_accounts[1]), client_for(dev_accounts[2])
    first.register("first", ETHER)
    second.register("second", ETHER)
    first.announce_endpoint(encode_endpoint(StoreEndpoint(SPEC_QM, PUBLIC)))
    caplog.set_level(logging.WARNING, logger="node.round.exchange")
    nonce = chain.w3.eth.get_transaction_count(second.account_address)
    # Only loopback addresses on a public testnet, then another address's peer id.
    for endpoint in (StoreEndpoint(BOB_ID, LOOPBACK), StoreEndpoint(SPEC_QM, PUBLIC)):
        store = EndpointStore(tmp_path / "store", endpoint)
        _exchange(client_for(dev_accounts[2]), deployment, store).join(second.account_address)
    assert chain.w3.eth.get_transaction_count(second.account_address) == nonce
    assert "none that peers may dial" in caplog.text
    assert f"announced first by {first.account_address}" in caplog.text
    # In a swarm on one host the loopback addresses are what peers dial.
    store = EndpointStore(tmp_path / "store", StoreEndpoint(BOB_ID, LOOPBACK))
    exchange = _exchange(client_for(dev_accounts[2]), deployment, store, allow_private=True)
    exchange.join(second.account_address)
    (event,) = _announcements(chain, second.account_address)
    assert event.endpoint == encode_endpoint(StoreEndpoint(BOB_ID, LOOPBACK))


# -------------------------------------------------------------------------- peers' garbage


GARBAGE = [
    b"\xff not even UTF-8",
    b'{"addrs":["/ip4/93.184.216.34/tcp/4001"],"peer_id":"QmNotAPeerId"}',
    encode_endpoint(StoreEndpoint(BOB_ID, ("/ip4/192.168.1.5/tcp/4001",))),
    encode_endpoint(StoreEndpoint(ALICE_ID, PUBLIC)),  # the first peer's peer id
    encode_endpoint(StoreEndpoint(BOB_ID, (f"{PUBLIC[0]}/p2p/{ALICE_ID}",))),
    b'{"addrs":[' + b",".join([b'"/ip4/93.184.216.34/tcp/1"'] * 9) + b'],"peer_id":"x"}',
]


def test_garbage_announcements_are_logged_and_ignored(
    chain: ChainControl,
    deployment: Deployment,
    client_for: Callable[..., CoordinatorClient],
    dev_accounts: list[LocalAccount],
    tmp_path: Path,
    caplog: pytest.LogCaptureFixture,
) -> None:
    honest, junk = client_for(dev_accounts[1]), client_for(dev_accounts[2])
    honest.register("honest", ETHER)
    junk.register("junk", ETHER)
    honest_endpoint = StoreEndpoint(ALICE_ID, PUBLIC)
    honest.announce_endpoint(encode_endpoint(honest_endpoint))
    store = EndpointStore(tmp_path / "store", None)
    exchange = _exchange(client_for(dev_accounts[3]), deployment, store)
    exchange.view.refresh(chain.w3.eth.block_number)
    junk_address = junk.account_address
    caplog.set_level(logging.WARNING, logger="node.round.view")
    for data in GARBAGE:
        junk.announce_endpoint(data)
        exchange.refresh()
        assert exchange.view.endpoint(junk_address) is None
    lines = [r.getMessage() for r in caplog.records if junk_address in r.getMessage()]
    assert len(lines) == len(GARBAGE)
    reasons = "\n".join(lines)
    for reason in (
        "not UTF-8 JSON",
        "not a libp2p peer id",
        "private address",
        f"announced first by {honest.account_address}",
        "names another peer id",
        "9 addresses",
    ):
        assert reason in reasons
    assert exchange.view.endpoint(honest.account_address) == honest_endpoint
    exchange.reach([junk_address, honest.account_address])
    assert store.connected == [honest_endpoint]


# ------------------------------------------------------------------------------- connecting


def test_reach_connects_once_per_endpoint_and_survives_failures(
    chain: ChainControl,
    deployment: Deployment,
    client_for: Callable[..., CoordinatorClient],
    dev_accounts: list[LocalAccount],
    tmp_path: Path,
    caplog: pytest.LogCaptureFixture,
) -> None:
    a, b, c = (client_for(account) for account in dev_accounts[1:4])
    for index, client in enumerate((a, b, c)):
        client.register(f"peer-{index}", ETHER)
    down = base58(bytes([0x00, 0x24, 0x08, 0x01, 0x12, 0x20]) + b"\x09" * 32)
    a_endpoint, b_endpoint = StoreEndpoint(ALICE_ID, LOOPBACK), StoreEndpoint(down, LOOPBACK[:1])
    a.announce_endpoint(encode_endpoint(a_endpoint))
    b.announce_endpoint(encode_endpoint(b_endpoint))
    own = StoreEndpoint(BOB_ID, LOOPBACK[1:])
    store = EndpointStore(tmp_path / "store", own, fail={down})
    node = client_for(dev_accounts[4])
    node.register("node", ETHER)
    exchange = _exchange(node, deployment, store, allow_private=True)
    exchange.join(node.account_address)
    caplog.set_level(logging.WARNING, logger="node.round.exchange")

    exchange.reach([b.account_address, a.account_address, c.account_address])
    assert len(store.connected) == 2 and set(store.connected) == {a_endpoint, b_endpoint}
    assert f"could not connect to the store of {b.account_address}" in caplog.text
    store.connected.clear()
    exchange.reach([a.account_address, b.account_address])
    assert store.connected == [b_endpoint]  # a is connected already; b failed, so again
    store.connected.clear()
    moved = StoreEndpoint(ALICE_ID, ("/ip4/127.0.0.1/tcp/42002",))
    a.announce_endpoint(encode_endpoint(moved))
    exchange.refresh()
    exchange.reach([a.account_address])
    assert store.connected == [moved]  # the peer restarted on new ports: followed
    exchange.reach([a.account_address])
    assert store.connected == [moved]
    exchange.unreached([a.account_address])  # its batch did not arrive: connect again
    exchange.reach([a.account_address])
    assert store.connected == [moved, moved]

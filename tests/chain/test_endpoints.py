"""Store endpoints through the chain: the contract call and event, a node's announcement at join
(once per endpoint, signed by its store's key), peers' garbage and squatters ignored with a log
line, a peer id freed by its holder's exit, connections before a fetch."""

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
from node.storage import LocalStore, StoreRejected, StoreUnavailable
from node.storage.endpoint import StoreEndpoint, encode_endpoint
from node.storage.endpoint_proof import EndpointDomain
from tests.chain.helpers import ETHER
from tests.chain_fixtures import ChainControl
from tests.storage.libp2p_keys import Libp2pKey
from tests.storage.test_endpoint import ALICE_ID, ALICE_KEY, BOB_ID, BOB_KEY, NO_PROOF, SPEC_QM

pytestmark = pytest.mark.integration

PUBLIC = ("/ip4/93.184.216.34/tcp/4001", "/ip4/93.184.216.34/udp/4001/quic-v1")
LOOPBACK = ("/ip4/127.0.0.1/tcp/41001", "/ip4/127.0.0.1/udp/41001/quic-v1")


class EndpointStore(LocalStore):
    """A real local store that says it is reachable at ``endpoint``, signs with ``key`` (as
    Kubo's key/sign does: tests/storage/test_endpoint_kubo.py) and records ``connect``."""

    def __init__(
        self,
        root: Path,
        endpoint: StoreEndpoint | None,
        fail: set[str] = frozenset(),
        *,
        key: Libp2pKey | None = None,
    ):
        super().__init__(root)
        self.announced_endpoint = endpoint
        self.fail = set(fail)
        self.key = key
        self.connected: list[StoreEndpoint] = []

    def endpoint(self) -> StoreEndpoint | None:
        return self.announced_endpoint

    def sign(self, message: bytes) -> bytes:
        if self.key is None:
            raise StoreRejected("this test store has no key")
        return self.key.sign(message)

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


def _domain(deployment: Deployment) -> EndpointDomain:
    return EndpointDomain(deployment.chain_id, deployment.coordinator)


def _announcements(chain: ChainControl, peer: str) -> list[EndpointAnnounced]:
    reader = EventReader(chain.w3, chain.deployment.coordinator)
    events = reader.read(0, chain.w3.eth.block_number, events=[EndpointAnnounced], peer=peer)
    return [e for e in events if isinstance(e, EndpointAnnounced)]


# ------------------------------------------------------------------------------- the contract


def test_announce_endpoint_emits_the_bytes_and_checks_the_caller(
    chain: ChainControl,
    deployment: Deployment,
    client_for: Callable[..., CoordinatorClient],
    dev_accounts: list[LocalAccount],
) -> None:
    peer, stranger = client_for(dev_accounts[1]), client_for(dev_accounts[2])
    peer.register("announcer", ETHER)
    data = ALICE_KEY.announcement(peer.account_address, *PUBLIC, domain=_domain(deployment))
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
        store = EndpointStore(tmp_path / "store", endpoint, key=ALICE_KEY)
        _exchange(client_for(account), deployment, store).join(address)
        return chain.w3.eth.get_transaction_count(address) - nonce

    def signed(*addrs: str) -> bytes:
        return ALICE_KEY.announcement(address, *addrs, domain=_domain(deployment))

    assert start(first) == 1
    (event,) = _announcements(chain, address)
    # A public node announces what its peers may dial: the private address is left out.
    assert event.endpoint == signed(*PUBLIC)
    assert start(first) == 0  # a restart with the same endpoint sends nothing
    moved = StoreEndpoint(ALICE_ID, ("/ip4/93.184.216.34/tcp/4101",))
    assert start(moved) == 1  # a restart on new ports announces again
    assert start(moved) == 0
    assert start(None) == 0  # a local folder has no endpoint: nothing to announce
    assert [e.endpoint for e in _announcements(chain, address)] == [
        signed(*PUBLIC),
        signed(*moved.addrs),
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
    # One operator's two nodes on one Kubo identity: the first to announce holds it.
    first.announce_endpoint(
        ALICE_KEY.announcement(first.account_address, *PUBLIC, domain=_domain(deployment))
    )
    caplog.set_level(logging.WARNING, logger="node.round.exchange")
    nonce = chain.w3.eth.get_transaction_count(second.account_address)
    stores = [
        EndpointStore(tmp_path / "store", StoreEndpoint(BOB_ID, LOOPBACK), key=BOB_KEY),
        EndpointStore(tmp_path / "store", StoreEndpoint(ALICE_ID, PUBLIC), key=ALICE_KEY),
        EndpointStore(tmp_path / "store", StoreEndpoint(BOB_ID, PUBLIC)),  # cannot sign
        EndpointStore(tmp_path / "store", StoreEndpoint(BOB_ID, PUBLIC), key=ALICE_KEY),
        EndpointStore(tmp_path / "store", StoreEndpoint(SPEC_QM, PUBLIC), key=BOB_KEY),
    ]
    for store in stores:
        _exchange(client_for(dev_accounts[2]), deployment, store).join(second.account_address)
    assert chain.w3.eth.get_transaction_count(second.account_address) == nonce
    for said in (
        "none that peers may dial",
        f"is held by {first.account_address}, which announced it first",
        "the store cannot sign its endpoint",
        "peers would reject the store's endpoint: the signature is not the peer id's key",
        "names its key by hash (an RSA key)",
    ):
        assert said in caplog.text
    # In a swarm on one host the loopback addresses are what peers dial.
    store = EndpointStore(tmp_path / "store", StoreEndpoint(BOB_ID, LOOPBACK), key=BOB_KEY)
    exchange = _exchange(client_for(dev_accounts[2]), deployment, store, allow_private=True)
    exchange.join(second.account_address)
    (event,) = _announcements(chain, second.account_address)
    assert event.endpoint == BOB_KEY.announcement(
        second.account_address, *LOOPBACK, domain=_domain(deployment)
    )


# ------------------------------------------------------------------------------ squatting


def test_a_squatter_cannot_take_a_peer_id_and_an_exit_frees_it(
    chain: ChainControl,
    deployment: Deployment,
    client_for: Callable[..., CoordinatorClient],
    dev_accounts: list[LocalAccount],
    tmp_path: Path,
    caplog: pytest.LogCaptureFixture,
) -> None:
    """The attack of docs/PROTOCOL.md, "Store endpoints": a registered peer announces its
    victim's peer id first (unsigned, with its own key's proof, or with the victim's bytes
    copied from the mempool). Every squat is rejected, the victim's own announcement counts,
    and the squatter's exit leaves nothing behind; the victim's exit frees its peer id."""
    squatter, victim, heir = (client_for(a) for a in dev_accounts[1:4])
    for index, client in enumerate((squatter, victim, heir)):
        client.register(f"peer-{index}", ETHER)
    domain = _domain(deployment)
    victims = ALICE_KEY.announcement(victim.account_address, *PUBLIC, domain=domain)
    squats = [
        encode_endpoint(StoreEndpoint(ALICE_ID, PUBLIC), NO_PROOF),
        encode_endpoint(
            StoreEndpoint(ALICE_ID, PUBLIC), BOB_KEY.proof(squatter.account_address, domain)
        ),
        victims,
    ]
    gas = [squatter.announce_endpoint(data).gas_used for data in squats]
    squatter.request_exit()
    watcher = _exchange(client_for(dev_accounts[4]), deployment, EndpointStore(tmp_path, None))
    caplog.set_level(logging.WARNING, logger="node.round.view")
    watcher.refresh()
    rejected = [m for r in caplog.records if squatter.account_address in (m := r.getMessage())]
    assert len(rejected) == 3 and all("signature is not the peer id's key" in r for r in rejected)
    assert watcher.view.endpoints.holder(ALICE_ID) is None

    store = EndpointStore(tmp_path / "victim", StoreEndpoint(ALICE_ID, PUBLIC), key=ALICE_KEY)
    _exchange(client_for(dev_accounts[2]), deployment, store).join(victim.account_address)
    assert [e.endpoint for e in _announcements(chain, victim.account_address)] == [victims]
    watcher.refresh()
    assert watcher.view.endpoint(victim.account_address) == StoreEndpoint(ALICE_ID, PUBLIC)
    assert watcher.view.endpoint(squatter.account_address) is None

    # Another address of the key's holder is refused while the victim holds the key ...
    heirs = ALICE_KEY.announcement(heir.account_address, PUBLIC[0], domain=domain)
    heir.announce_endpoint(heirs)
    watcher.refresh()
    assert watcher.view.endpoints.holder(ALICE_ID) == victim.account_address
    assert watcher.view.endpoint(heir.account_address) is None
    # ... and takes it once the victim exits.
    victim.request_exit()
    heir.announce_endpoint(heirs)
    watcher.refresh()
    assert watcher.view.endpoints.holder(ALICE_ID) == heir.account_address
    assert watcher.view.endpoint(heir.account_address) == StoreEndpoint(ALICE_ID, PUBLIC[:1])
    assert watcher.view.endpoint(victim.account_address) is None
    assert max(gas) < 40_000, gas  # a signed announcement of two addresses (docs/PROTOCOL.md)


# -------------------------------------------------------------------------- peers' garbage


def _garbage(peer: str, domain: EndpointDomain) -> list[bytes]:
    return [
        b"\xff not even UTF-8",
        b'{"addrs":["/ip4/93.184.216.34/tcp/4001"],"peer_id":"QmNotAPeerId","signature":"AA"}',
        BOB_KEY.announcement(peer, "/ip4/192.168.1.5/tcp/4001", domain=domain),
        encode_endpoint(StoreEndpoint(ALICE_ID, PUBLIC), NO_PROOF),  # the first peer's peer id
        BOB_KEY.announcement(peer, f"{PUBLIC[0]}/p2p/{ALICE_ID}", domain=domain),
        b'{"addrs":[' + b",".join([b'"/ip4/93.184.216.34/tcp/1"'] * 9)
        + b'],"peer_id":"x","signature":"AA"}',
        b'{"addrs":["/ip4/93.184.216.34/tcp/4001"],"peer_id":"' + BOB_ID.encode()
        + b'","signature":"AB"}',  # spare bits set
        b'{"addrs":["/ip4/93.184.216.34/tcp/4001"],"peer_id":"' + BOB_ID.encode() + b'"}',
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
    domain = _domain(deployment)
    honest_endpoint = StoreEndpoint(ALICE_ID, PUBLIC)
    honest.announce_endpoint(
        ALICE_KEY.announcement(honest.account_address, *PUBLIC, domain=domain)
    )
    store = EndpointStore(tmp_path / "store", None)
    exchange = _exchange(client_for(dev_accounts[3]), deployment, store)
    exchange.view.refresh(chain.w3.eth.block_number)
    junk_address = junk.account_address
    caplog.set_level(logging.WARNING, logger="node.round.view")
    garbage = _garbage(junk_address, domain)
    for data in garbage:
        junk.announce_endpoint(data)
        exchange.refresh()
        assert exchange.view.endpoint(junk_address) is None
    lines = [r.getMessage() for r in caplog.records if junk_address in r.getMessage()]
    assert len(lines) == len(garbage)
    reasons = "\n".join(lines)
    for reason in (
        "not UTF-8 JSON",
        "not a libp2p peer id",
        "private address",
        "signature is not the peer id's key",
        "names another peer id",
        "9 addresses",
        "not canonical base64url",
        "no signature (the format before endpoint proofs)",
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
    domain = _domain(deployment)
    down_key = Libp2pKey.ed25519("down")
    down = down_key.peer_id
    a_endpoint, b_endpoint = StoreEndpoint(ALICE_ID, LOOPBACK), StoreEndpoint(down, LOOPBACK[:1])
    a.announce_endpoint(ALICE_KEY.announcement(a.account_address, *LOOPBACK, domain=domain))
    b.announce_endpoint(down_key.announcement(b.account_address, *LOOPBACK[:1], domain=domain))
    own = StoreEndpoint(BOB_ID, LOOPBACK[1:])
    store = EndpointStore(tmp_path / "store", own, fail={down}, key=BOB_KEY)
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
    a.announce_endpoint(ALICE_KEY.announcement(a.account_address, *moved.addrs, domain=domain))
    exchange.refresh()
    exchange.reach([a.account_address])
    assert store.connected == [moved]  # the peer restarted on new ports: followed
    exchange.reach([a.account_address])
    assert store.connected == [moved]
    exchange.unreached([a.account_address])  # its batch did not arrive: connect again
    exchange.reach([a.account_address])
    assert store.connected == [moved, moved]

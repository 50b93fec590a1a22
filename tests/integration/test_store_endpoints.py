"""Nodes over real rounds find their peers' stores through the chain: each announces its store's
endpoint once, and before fetching a round's batches connects to the publishers' endpoints.

The stores are one real local folder seen through :class:`EndpointStore` (a fixed endpoint and a
real libp2p key per node, ``connect`` recorded); real Kubo daemons are tested in tests/storage.
"""

from __future__ import annotations

from collections.abc import Callable
from pathlib import Path

import pytest
from eth_account.signers.local import LocalAccount

from node.chain.client import CoordinatorClient
from node.chain.deployment import Deployment
from node.chain.events import EndpointAnnounced, EventReader
from node.policy.adapters import AdapterPool
from node.round.lockstep import run_lockstep
from node.storage.endpoint import StoreEndpoint
from tests.chain.test_endpoints import EndpointStore, _domain
from tests.chain_fixtures import ChainControl
from tests.integration.swarm import make_node
from tests.storage.libp2p_keys import Libp2pKey

pytestmark = pytest.mark.integration


def _key(index: int) -> Libp2pKey:
    return Libp2pKey.ed25519(f"store of node {index}")


def _endpoint(index: int) -> StoreEndpoint:
    return StoreEndpoint(_key(index).peer_id, (f"/ip4/93.184.216.{10 + index}/tcp/4001",))


def test_nodes_announce_once_and_connect_to_the_publishers_they_fetch(
    chain: ChainControl,
    deployment: Deployment,
    client_for: Callable[..., CoordinatorClient],
    dev_accounts: list[LocalAccount],
    pool: AdapterPool,
    fresh_round: int,
    tmp_path: Path,
) -> None:
    unreachable = _endpoint(2).peer_id  # its store refuses every dial; its batches still arrive
    stores = [
        EndpointStore(tmp_path / "store", _endpoint(i), fail={unreachable}, key=_key(i))
        for i in range(3)
    ]
    nodes = [
        make_node(
            dev_accounts[i + 1],
            client=client_for(dev_accounts[i + 1]),
            deployment=deployment,
            store=stores[i],
            pool=pool,
            state_dir=tmp_path / "nodes" / str(i),
            name=f"node-{i}",
            seed=i,
        )
        for i in range(3)
    ]
    reports = run_lockstep(nodes, 2, chain.warp_to_round)

    assert all(r.verified_peers == 2 and not r.rejections for r in reports)
    domain = _domain(deployment)
    reader = EventReader(chain.w3, chain.deployment.coordinator)
    announced = reader.read(
        chain.deployment.deployment_block, chain.w3.eth.block_number, events=[EndpointAnnounced]
    )
    assert sorted((e.peer, e.endpoint) for e in announced) == sorted(
        (node.address, _key(i).announcement(node.address, *_endpoint(i).addrs, domain=domain))
        for i, node in enumerate(nodes)
    )
    for i, store in enumerate(stores):
        others = [_endpoint(j) for j in range(3) if j != i]
        # Once per reachable peer; the unreachable one is dialled again before each round's fetch.
        expected = sorted(
            [e for e in others if e.peer_id != unreachable]
            + [e for e in others if e.peer_id == unreachable] * 2,
            key=lambda e: e.peer_id,
        )
        assert sorted(store.connected, key=lambda e: e.peer_id) == expected, f"node {i}"

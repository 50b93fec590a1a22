"""A node under faults: a reset chain, a failing store, a node that fell behind, wrong setups."""

from __future__ import annotations

from collections.abc import Callable
from pathlib import Path

import pytest
from eth_account.signers.local import LocalAccount

from node.chain.client import CoordinatorClient
from node.chain.deployer import deploy_coordinator
from node.chain.events import EventReader, RolloutsPublished
from node.chain.rpc import RetryPolicy, connect
from node.local.anvil import start_anvil
from node.policy.adapters import AdapterPool
from node.round.errors import ChainReset, NotActive, StateError
from node.round.loop import ChainTime, LoopSettings, run_node
from node.round.node import SwarmNode
from node.round.state import load_state
from node.storage import LocalStore, StoreUnavailable
from tests.chain_fixtures import TEST_CONFIG, TEST_RETRY, ChainControl
from tests.integration.swarm import make_node

pytestmark = pytest.mark.integration

FAST_LOOP = LoopSettings(poll_interval=0.05, max_rounds=1, retry=RetryPolicy(initial_delay=0.01))
NO_STORE_RETRY = RetryPolicy(attempts=1)


class FlakyStore(LocalStore):
    """A real local store whose first ``failures`` puts fail as an unreachable backend would."""

    def __init__(self, root: Path, failures: int) -> None:
        super().__init__(root)
        self.failures = failures

    def put(self, data: bytes, *, pin: bool = False) -> bytes:
        if self.failures > 0:
            self.failures -= 1
            raise StoreUnavailable("store unreachable (injected)")
        return super().put(data, pin=pin)


def my_rounds(chain: ChainControl, node: SwarmNode) -> list[int]:
    reader = EventReader(chain.w3, chain.deployment.coordinator)
    events = reader.read(0, chain.w3.eth.block_number, events=[RolloutsPublished])
    return [e.round for e in events if e.peer == node.address]


def test_a_failing_store_interrupts_the_round_which_is_retried_and_published_once(
    chain: ChainControl,
    dev_accounts: list[LocalAccount],
    node_factory: Callable[..., SwarmNode],
    fresh_round: int,
    tmp_path: Path,
) -> None:
    node = node_factory(dev_accounts[1], "flaky", store_retry=NO_STORE_RETRY)
    store = FlakyStore(tmp_path / "flaky-store", failures=2)
    node.exchange.store = store
    reports = []
    assert run_node(node, FAST_LOOP, on_report=reports.append) == 1
    assert store.failures == 0  # both failures happened, then the round went through
    assert [(r.round, r.published) for r in reports] == [(fresh_round, "yes")]
    assert my_rounds(chain, node) == [fresh_round]


def test_a_node_that_fell_behind_skips_to_the_current_round(
    chain: ChainControl,
    dev_accounts: list[LocalAccount],
    node_factory: Callable[..., SwarmNode],
    fresh_round: int,
) -> None:
    node = node_factory(dev_accounts[1], "slow")
    run_node(node, FAST_LOOP)
    chain.warp_to_round(fresh_round + 3)
    reports = []
    run_node(node, FAST_LOOP, on_report=reports.append)
    assert [r.round for r in reports] == [fresh_round + 3]
    assert my_rounds(chain, node) == [fresh_round, fresh_round + 3]
    assert load_state(node.state_dir).last_round == fresh_round + 3


def test_an_unregistered_peer_is_told_to_register(
    dev_accounts: list[LocalAccount], node_factory: Callable[..., SwarmNode]
) -> None:
    node = node_factory(dev_accounts[6], "stranger", register=False)
    with pytest.raises(NotActive, match="swarm register"):
        node.start()


def test_a_state_folder_of_another_peer_is_refused(
    dev_accounts: list[LocalAccount], node_factory: Callable[..., SwarmNode], fresh_round: int
) -> None:
    first = node_factory(dev_accounts[1], "first")
    run_node(first, FAST_LOOP)
    second = node_factory(dev_accounts[2], "second")
    second.state_dir = first.state_dir
    with pytest.raises(StateError, match="own checkpoint folder"):
        second.start()


def test_a_restarted_chain_is_detected_and_reported(
    tmp_path: Path, pool: AdapterPool, store: LocalStore, dev_accounts: list[LocalAccount]
) -> None:
    """Anvil restarts empty on the same port; the same deployer redeploys to the same address."""
    anvil = start_anvil(tmp_path / "anvil.log")
    try:
        w3 = connect(anvil.url)
        deployment = deploy_coordinator(w3, dev_accounts[0], TEST_CONFIG, retry=TEST_RETRY)
        client = CoordinatorClient(w3, deployment.coordinator, account=dev_accounts[1])
        node = make_node(
            dev_accounts[1], client=client, deployment=deployment, store=store, pool=pool,
            state_dir=tmp_path / "survivor", name="survivor",
        )  # fmt: skip
        node.start()
        anvil.stop()
        anvil = start_anvil(tmp_path / "anvil-2.log", port=anvil.port)
        again = deploy_coordinator(
            connect(anvil.url), dev_accounts[0], TEST_CONFIG, retry=TEST_RETRY
        )
        assert again.coordinator == deployment.coordinator  # same address, different chain
        with pytest.raises(ChainReset, match="the chain was reset"):
            node.check_chain()
    finally:
        anvil.stop()


def test_chain_time_runs_on_between_blocks_and_follows_each_new_one(
    chain: ChainControl, dev_accounts: list[LocalAccount], node_factory: Callable[..., SwarmNode]
) -> None:
    """Never behind the latest block plus the local time since it was seen; a new block (here
    one moved 1000 s ahead) is the time again."""
    node = node_factory(dev_accounts[1], "timer", register=False)
    local = [100.0]
    chain_time = ChainTime(node, clock=lambda: local[0])
    chain.mine()
    start = chain.now()
    assert start <= chain_time.now() < start + 3
    local[0] += 7.5  # no block mined meanwhile: the chain's time still moves on
    assert start + 7.5 <= chain_time.now() < start + 10.5
    chain.warp_to(start + 1000)
    assert start + 1000 <= chain_time.now() < start + 1003

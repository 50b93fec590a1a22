"""A node on a plain Anvil, which mines a block only when a transaction arrives: ``swarm run``
and ``swarm status`` follow the round by the clock (the next block's time), not by the last block,
and rounds that passed while the node was stopped are said as skipped."""

from __future__ import annotations

import time
from collections.abc import Iterator
from pathlib import Path

import pytest
from eth_account.signers.local import LocalAccount

from node.chain.client import CoordinatorClient
from node.chain.deployer import deploy_coordinator
from node.chain.deployment import Deployment
from node.chain.rpc import RetryPolicy, connect
from node.policy.adapters import AdapterPool
from node.round.loop import ChainTime, LoopSettings, run_node
from node.round.node import SwarmNode
from node.status_report import status_lines
from node.storage import LocalStore
from tests.chain_fixtures import TEST_CONFIG, TEST_RETRY, AnvilNode, start_anvil
from tests.integration.swarm import make_node

pytestmark = pytest.mark.integration

#: Short rounds, so that a few pass in seconds on a chain that no one mines.
ROUND_SECONDS = 4
LOOP = LoopSettings(poll_interval=0.1, retry=RetryPolicy(initial_delay=0.05))


@pytest.fixture
def idle_anvil(tmp_path: Path) -> Iterator[AnvilNode]:
    anvil = start_anvil(tmp_path / "anvil.log", extra_args=())  # no --block-time: idle
    yield anvil
    anvil.stop()


@pytest.fixture
def idle_deployment(idle_anvil: AnvilNode, dev_accounts: list[LocalAccount]) -> Deployment:
    config = TEST_CONFIG.model_copy(update={"round_duration": ROUND_SECONDS})
    return deploy_coordinator(connect(idle_anvil.url), dev_accounts[0], config, retry=TEST_RETRY)


def idle_node(
    anvil: AnvilNode,
    deployment: Deployment,
    account: LocalAccount,
    pool: AdapterPool,
    tmp_path: Path,
    *,
    register: bool,
) -> SwarmNode:
    client = CoordinatorClient(connect(anvil.url), deployment.coordinator, account=account)
    return make_node(
        account, client=client, deployment=deployment, store=LocalStore(tmp_path / "store"),
        pool=pool, state_dir=tmp_path / "node", name="idle", register=register,
    )  # fmt: skip


def wait_for_round_start(client: CoordinatorClient) -> None:
    """Sleeps to just after the next round starts by the wall clock (the chain stays idle)."""
    clock = client.clock
    time.sleep(max(0.0, clock.end_of(clock.round_at(int(time.time()))) - time.time() + 0.2))


def test_a_node_on_an_idle_chain_runs_round_after_round_and_says_what_it_skipped(
    idle_anvil: AnvilNode,
    idle_deployment: Deployment,
    dev_accounts: list[LocalAccount],
    pool: AdapterPool,
    tmp_path: Path,
) -> None:
    node = idle_node(idle_anvil, idle_deployment, dev_accounts[1], pool, tmp_path, register=True)
    client = node.exchange.client  # type: ignore[attr-defined]
    wait_for_round_start(client)
    reports = []
    run_node(node, LoopSettings(**{**LOOP.__dict__, "max_rounds": 2}), on_report=reports.append)
    first = reports[0].round
    assert [r.round for r in reports] == [first, first + 1]
    assert [r.published for r in reports] == ["yes", "yes"]

    # Stopped for two rounds; nothing is mined meanwhile, so the latest block stays in the past.
    time.sleep(2 * ROUND_SECONDS)
    by_clock = client.clock.round_at(int(time.time()))
    assert client.current_round() < by_clock  # what the contract says of the latest block
    status = status_lines(
        client, node.address, rounds=1, start_block=idle_deployment.deployment_block
    )
    assert any(line.startswith(f"round    {by_clock} ") for line in status), status

    notices: list[str] = []
    reports.clear()
    settings = LoopSettings(**{**LOOP.__dict__, "max_rounds": 1})
    run_node(node, settings, on_report=reports.append, on_notice=notices.append)
    resumed = reports[0].round
    assert resumed >= by_clock and reports[0].published == "yes"
    skipped = f"{first + 2}-{resumed - 1}" if resumed - 1 > first + 2 else f"{first + 2}"
    assert len(notices) == 1 and f"{skipped} skipped" in notices[0], notices


def test_chain_time_is_the_next_blocks_time_on_an_idle_chain(
    idle_anvil: AnvilNode,
    idle_deployment: Deployment,
    dev_accounts: list[LocalAccount],
    pool: AdapterPool,
    tmp_path: Path,
) -> None:
    node = idle_node(idle_anvil, idle_deployment, dev_accounts[2], pool, tmp_path, register=False)
    client = node.exchange.client  # type: ignore[attr-defined]
    _, latest = client.latest_block()
    time.sleep(3)  # no block is mined meanwhile
    assert client.latest_block()[1] == latest
    now = ChainTime(node).now()
    assert now >= latest + 3 and abs(now - time.time()) < 2

"""Local-chain fixtures: a session Anvil, the coordinator deployed through the real deploy path,
funded dev accounts, chain-time control and per-test snapshot isolation.

Fixtures (loaded for every test by tests/conftest.py):

- ``anvil``          session: an Anvil on a free port (the native binary in node_modules); its
                     log is kept in .artifacts/anvil-<worker>.log, its tail shown on failures;
                     extra Anvil options may come from $SWARM_TEST_ANVIL_ARGS; it keeps every
                     block's state in memory (``KEEP_EVERY_STATE``)
- ``w3``             session: a Web3 on it
- ``dev_accounts``   Anvil's ten dev accounts (10,000 ETH each); [0] deploys, owns the contract
- ``deployment``     session: coordinator deployed with ``TEST_CONFIG`` by ``deploy_coordinator``
- ``chain``          per test: a :class:`ChainControl`; the chain is snapshotted before the test and
                     reverted after it, so tests never see each other's state (chain time included)
- ``client_for``     per test: ``client_for(account)`` -> a fresh CoordinatorClient for that account
"""

from __future__ import annotations

import os
import subprocess
from collections.abc import Callable, Iterator
from pathlib import Path

import pytest
from eth_account import Account
from eth_account.signers.local import LocalAccount
from web3 import Web3

from node.chain.abi import FORGE_ARTIFACT_PATH, REPO_ROOT, artifact_is_stale
from node.chain.client import CoordinatorClient
from node.chain.deploy import DeployConfig, deploy_coordinator
from node.chain.deployment import Deployment
from node.chain.rpc import RetryPolicy, connect
from node.chain.transactions import TransactionSender
from node.local.anvil import DEV_KEYS, AnvilError, AnvilNode
from node.local.anvil import start_anvil as start_local_anvil
from node.local.devchain import DevChain
from node.local.foundry import FoundryMissing, foundry_binary

ARTIFACTS_DIR = REPO_ROOT / ".artifacts"
ETHER = 10**18

#: Deployment used by the tests: one-minute rounds, phases 1 + 2 + 2, 1 ETH stake, 0.1 ETH flag
#: bond, half the stake slashed per upheld dispute; committees of 64 expected seats, so with a
#: handful of 1-ETH peers every peer sits on every other peer's committee with its own weight.
TEST_CONFIG = DeployConfig(
    round_duration=60,
    seed_input=b"swarm-tests".ljust(32, b"\0"),
    grace_rounds=1,
    commit_rounds=2,
    reveal_rounds=2,
    min_stake=1 * ETHER,
    flag_bond=ETHER // 10,
    committee_size=64,
    quorum_bps=5000,
    floor_bps=3334,
    slash_bps=5000,
    reward_bps=5000,
    tip_bps=500,
    # the integration swarms' nodes answer 4 tasks with 4 completions each (tests/integration)
    tasks_per_round=4,
    group_size=4,
)
#: Fast retries and receipt polling for a local chain.
TEST_RETRY = RetryPolicy(attempts=3, initial_delay=0.05, max_delay=0.2)


# ------------------------------------------------------------------------------------------ Anvil


def start_anvil(log_path: Path, *, extra_args: tuple[str, ...] = ()) -> AnvilNode:
    """Starts Anvil on a free port; fails the test run (no traceback) when it cannot."""
    try:
        return start_local_anvil(log_path, extra_args=extra_args)
    except AnvilError as exc:
        pytest.fail(str(exc), pytrace=False)


_RUNNING: list[AnvilNode] = []  # the session's Anvil, for the failure report hook

#: Anvil's default history keeps a few states in memory and the rest on disk, evicting the oldest,
#: and a revert leaves the reverted blocks' states queued. Tests replay the same transactions from
#: the same snapshot, so blocks recur with the same hash: evicting an old copy deleted the state a
#: later test was reading ("BlockOutOfRangeError: block height is 51 but requested was 20").
#: Memory only, with room for every block of a run, nothing is evicted (docs/LOG.md, sixth
#: sitting of 2026-12-07, has the memory it takes).
KEEP_EVERY_STATE = ("--prune-history", "1000000")


@pytest.fixture(scope="session")
def anvil() -> Iterator[AnvilNode]:
    worker = os.environ.get("PYTEST_XDIST_WORKER", "main")
    extra = tuple(os.environ.get("SWARM_TEST_ANVIL_ARGS", "").split())
    if "--prune-history" not in extra and "--max-persisted-states" not in extra:
        extra = KEEP_EVERY_STATE + extra
    node = start_anvil(ARTIFACTS_DIR / f"anvil-{worker}.log", extra_args=extra)
    _RUNNING.append(node)
    yield node
    _RUNNING.remove(node)
    node.stop()


@pytest.hookimpl(hookwrapper=True)
def pytest_runtest_makereport(item: pytest.Item, call: pytest.CallInfo[None]) -> Iterator[None]:
    """Attaches the Anvil log's tail (and the full log's path) to failing chain tests."""
    outcome = yield
    report = outcome.get_result()
    if report.failed and _RUNNING and "anvil" in getattr(item, "fixturenames", ()):
        node = _RUNNING[-1]
        report.sections.append(
            (f"anvil log, last lines (full log: {node.log_path})", node.log_tail())
        )


# ------------------------------------------------------------------------------------------ chain


@pytest.fixture(scope="session")
def contract_artifact() -> Path:
    """The forge artifact of SwarmCoordinator, rebuilt (src only) when older than the sources."""
    if artifact_is_stale():
        try:
            forge = foundry_binary("forge")
        except FoundryMissing as exc:
            pytest.fail(f"contracts/out is missing or stale: {exc}", pytrace=False)
        result = subprocess.run(
            [str(forge), "build", "--skip", "test", "--skip", "script"],
            cwd=REPO_ROOT,
            capture_output=True,
            text=True,
            timeout=600,
        )
        if result.returncode != 0:
            pytest.fail(f"forge build failed:\n{result.stdout}\n{result.stderr}", pytrace=False)
    return FORGE_ARTIFACT_PATH


@pytest.fixture(scope="session")
def w3(anvil: AnvilNode) -> Web3:
    return connect(anvil.url, timeout=10)


@pytest.fixture(scope="session")
def dev_accounts() -> list[LocalAccount]:
    return [Account.from_key(key) for key in DEV_KEYS]


@pytest.fixture(scope="session")
def deployment(w3: Web3, dev_accounts: list[LocalAccount], contract_artifact: Path) -> Deployment:
    """The coordinator, deployed once per session by the same function ``swarm-deploy`` runs."""
    return deploy_coordinator(
        w3,
        dev_accounts[0],
        TEST_CONFIG,
        artifact_path=contract_artifact,
        out=ARTIFACTS_DIR / "deployment-test.json",
        retry=TEST_RETRY,
    )


class ChainControl(DevChain):
    """Time travel and snapshots on the test Anvil."""


@pytest.fixture
def chain(w3: Web3, deployment: Deployment) -> Iterator[ChainControl]:
    """Per-test chain control; everything the test does on the chain is reverted afterwards."""
    control = ChainControl(w3, deployment)
    snapshot_id = control.snapshot()
    yield control
    control.revert(snapshot_id)


@pytest.fixture
def client_for(
    chain: ChainControl, w3: Web3, deployment: Deployment
) -> Callable[..., CoordinatorClient]:
    """``client_for(account=None)``: a fresh client (own nonce counter) on the test deployment."""

    def make(account: LocalAccount | None = None, **sender_options: object) -> CoordinatorClient:
        options = {
            "retry": TEST_RETRY,
            "poll_interval": 0.01,
            "receipt_timeout": 10.0,
            **sender_options,
        }
        sender = TransactionSender(w3, account, **options) if account is not None else None  # type: ignore[arg-type]
        return CoordinatorClient(w3, deployment.coordinator, sender=sender, retry=TEST_RETRY)

    return make

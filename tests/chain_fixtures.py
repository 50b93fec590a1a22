"""Local-chain fixtures: a session Anvil, the coordinator deployed through the real deploy path,
funded dev accounts, chain-time control and per-test snapshot isolation.

Fixtures (loaded for every test by tests/conftest.py):

- ``anvil``          session: an Anvil on a free port (node_modules/.bin/anvil, or $ANVIL); its
                     log is kept in .artifacts/anvil-<worker>.log, its tail shown on failures
- ``w3``             session: a Web3 on it
- ``dev_accounts``   Anvil's ten dev accounts (10,000 ETH each); [0] deploys, owns the contract
- ``deployment``     session: coordinator deployed with ``TEST_CONFIG`` by ``deploy_coordinator``
- ``chain``          per test: a :class:`ChainControl`; the chain is snapshotted before the test and
                     reverted after it, so tests never see each other's state (chain time included)
- ``client_for``     per test: ``client_for(account)`` -> a fresh CoordinatorClient for that account
"""

from __future__ import annotations

import os
import shutil
import socket
import subprocess
import time
from collections.abc import Callable, Iterator
from dataclasses import dataclass
from pathlib import Path

import pytest
import requests
from eth_account import Account
from eth_account.signers.local import LocalAccount
from web3 import Web3

from node.chain.abi import FORGE_ARTIFACT_PATH, REPO_ROOT, artifact_is_stale
from node.chain.client import CoordinatorClient
from node.chain.deploy import DeployConfig, deploy_coordinator
from node.chain.deployment import Deployment
from node.chain.rpc import RetryPolicy, connect
from node.chain.transactions import TransactionSender

ARTIFACTS_DIR = REPO_ROOT / ".artifacts"
BIN_DIR = REPO_ROOT / "node_modules" / ".bin"
CHAIN_ID = 31337
ETHER = 10**18

#: Anvil's published dev keys (mnemonic "test test ... junk"); never use them anywhere real.
DEV_KEYS = (
    "0xac0974bec39a17e36ba4a6b4d238ff944bacb478cbed5efcae784d7bf4f2ff80",
    "0x59c6995e998f97a5a0044966f0945389dc9e86dae88c7a8412f4603b6b78690d",
    "0x5de4111afa1a4b94908f83103eb1f1706367c2e68ca870fc3fb9a804cdab365a",
    "0x7c852118294e51e653712a81e05800f419141751be58f605c371e15141b007a6",
    "0x47e179ec197488593b187f80a00eb0da91f1b9d0b13f8733639f19c30a34926a",
    "0x8b3a350cf5c34c9194ca85829a2df0ec3153be0318b5e2d3348e872092edffba",
    "0x92db14e403b83dfe3df233f83dfa3a0d7096f21ca9b0d6d6b8d88b2b4ec1564e",
    "0x4bbbf85ce3377467afe5d46f804f221813b2bb87f24d81f60f1fcdbf7cbf4356",
    "0xdbda1821b80551c9d65939329250298aa3472ba22feea921c0cf5d620ea67b97",
    "0x2a871d0798f97d79848a013d4936a73bf4cc922c825d33c1cf7073dff6d409c6",
)

#: Deployment used by the tests: one-minute rounds, 1 ETH stake, half the stake slashed per dispute.
TEST_CONFIG = DeployConfig(
    round_duration=60,
    seed_input=b"swarm-tests".ljust(32, b"\0"),
    min_stake=1 * ETHER,
    unbonding_period=300,
    grace_rounds=1,
    attestation_window_rounds=2,
    slash_bps=5000,
    dispute_quorum=2,
)
#: Fast retries and receipt polling for a local chain.
TEST_RETRY = RetryPolicy(attempts=3, initial_delay=0.05, max_delay=0.2)


# ------------------------------------------------------------------------------------------ Anvil


@dataclass
class AnvilNode:
    """A running Anvil process."""

    process: subprocess.Popen[bytes]
    port: int
    log_path: Path

    @property
    def url(self) -> str:
        return f"http://127.0.0.1:{self.port}"

    def log_tail(self, lines: int = 60) -> str:
        try:
            return "\n".join(self.log_path.read_text(errors="replace").splitlines()[-lines:])
        except OSError:
            return "(no log)"

    def stop(self) -> None:
        if self.process.poll() is None:
            self.process.terminate()
            try:
                self.process.wait(timeout=5)
            except subprocess.TimeoutExpired:
                self.process.kill()
                self.process.wait(timeout=5)


def anvil_binary() -> str:
    """Path of the anvil executable; fails the test run with the fix when it is missing."""
    candidate = os.environ.get("ANVIL") or (
        str(BIN_DIR / "anvil") if (BIN_DIR / "anvil").exists() else None
    )
    if candidate is None:
        candidate = shutil.which("anvil")
    if candidate is None:
        pytest.fail(
            "anvil not found (expected node_modules/.bin/anvil): run scripts/bootstrap",
            pytrace=False,
        )
    return candidate


def free_port() -> int:
    with socket.socket() as sock:
        sock.bind(("127.0.0.1", 0))
        return int(sock.getsockname()[1])


def start_anvil(
    log_path: Path, *, extra_args: tuple[str, ...] = (), startup_timeout: float = 20.0
) -> AnvilNode:
    """Starts Anvil on a free port, logging to ``log_path``; returns once it answers JSON-RPC."""
    log_path.parent.mkdir(parents=True, exist_ok=True)
    port = free_port()
    command = [
        anvil_binary(),
        "--host",
        "127.0.0.1",
        "--port",
        str(port),
        "--chain-id",
        str(CHAIN_ID),
        "--accounts",
        str(len(DEV_KEYS)),
        "--balance",
        "10000",
        *extra_args,
    ]
    with log_path.open("wb") as log:
        process = subprocess.Popen(
            command, stdout=log, stderr=subprocess.STDOUT, stdin=subprocess.DEVNULL
        )
    node = AnvilNode(process=process, port=port, log_path=log_path)
    deadline = time.monotonic() + startup_timeout
    while time.monotonic() < deadline:
        if process.poll() is not None:
            break
        try:
            requests.post(
                node.url, json={"jsonrpc": "2.0", "id": 1, "method": "eth_chainId"}, timeout=1
            )
            return node
        except requests.RequestException:
            time.sleep(0.05)
    node.stop()
    pytest.fail(
        f"anvil did not start on port {port} (log {log_path}):\n{node.log_tail()}", pytrace=False
    )


_RUNNING: list[AnvilNode] = []  # the session's Anvil, for the failure report hook


@pytest.fixture(scope="session")
def anvil() -> Iterator[AnvilNode]:
    worker = os.environ.get("PYTEST_XDIST_WORKER", "main")
    node = start_anvil(ARTIFACTS_DIR / f"anvil-{worker}.log")
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
        forge = BIN_DIR / "forge"
        if not forge.exists():
            pytest.fail(
                "contracts/out is missing or stale and forge is not installed: run "
                "scripts/bootstrap",
                pytrace=False,
            )
        env = dict(os.environ, PATH=f"{BIN_DIR}{os.pathsep}{os.environ.get('PATH', '')}")
        result = subprocess.run(
            [str(forge), "build", "--skip", "test", "--skip", "script"],
            cwd=REPO_ROOT,
            env=env,
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


class ChainControl:
    """Time travel and snapshots on the test Anvil."""

    def __init__(self, w3: Web3, deployment: Deployment) -> None:
        self.w3 = w3
        self.deployment = deployment

    def rpc(self, method: str, *params: object) -> object:
        response = self.w3.provider.make_request(method, list(params))  # type: ignore[arg-type]
        if "error" in response:
            raise RuntimeError(f"{method} failed: {response['error']}")
        return response.get("result")

    def now(self) -> int:
        """Timestamp of the latest block."""
        return int(self.w3.eth.get_block("latest")["timestamp"])

    def current_round(self) -> int:
        return (self.now() - self.deployment.genesis) // self.deployment.round_duration

    def round_start(self, round: int) -> int:
        return self.deployment.genesis + round * self.deployment.round_duration

    def mine(self, blocks: int = 1) -> None:
        for _ in range(blocks):
            self.rpc("evm_mine")

    def increase_time(self, seconds: int) -> None:
        """Moves chain time forward and mines a block at the new time."""
        self.rpc("evm_increaseTime", seconds)
        self.mine()

    def warp_to(self, timestamp: int) -> None:
        """Mines a block at exactly ``timestamp`` (which must not be in the chain's past)."""
        if timestamp < self.now():
            raise ValueError(f"cannot warp back from {self.now()} to {timestamp}")
        self.rpc("evm_setNextBlockTimestamp", timestamp)
        self.mine()

    def warp_to_round(self, round: int, offset: int = 1) -> None:
        """Moves to ``offset`` seconds into ``round`` (the current or a future round)."""
        self.warp_to(max(self.now(), self.round_start(round) + offset))

    def fund(self, address: str, wei: int) -> None:
        self.rpc("anvil_setBalance", address, hex(wei))

    def balance(self, address: str) -> int:
        return int(self.w3.eth.get_balance(address))

    def snapshot(self) -> str:
        return str(self.rpc("evm_snapshot"))

    def revert(self, snapshot_id: str) -> None:
        if self.rpc("evm_revert", snapshot_id) is not True:
            raise RuntimeError(f"evm_revert({snapshot_id}) failed")


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

"""``swarm run`` as a volunteer runs it: a real process on the test chain, killed and restarted."""

from __future__ import annotations

import os
import queue
import signal
import subprocess
import sys
import threading
import time
from collections.abc import Callable
from pathlib import Path

import pytest
from eth_account.signers.local import LocalAccount

from node.chain.client import CoordinatorClient
from node.chain.deployment import Deployment
from node.chain.events import EventReader, RolloutsPublished
from node.identity import create_keystore, unlock_keystore
from tests.chain_fixtures import AnvilNode, ChainControl
from tests.integration.swarm import ETHER, published_digest
from tests.waiting import wait_for

pytestmark = [pytest.mark.integration, pytest.mark.slow]

PASSWORD = "run-test-password"
REPO = Path(__file__).resolve().parents[2]


class NodeProcess:
    """``swarm run`` (or another command) in a subprocess, its output lines collected by a thread."""

    def __init__(self, config: Path, cache: Path) -> None:
        self._spawn([sys.executable, "-m", "node.cli", "--config", str(config), "run", "-v"], cache)

    @classmethod
    def start(cls, command: list[str], cache: Path) -> NodeProcess:
        """Any command, with the same environment and output collection."""
        process = cls.__new__(cls)
        process._spawn(command, cache)
        return process

    def _spawn(self, command: list[str], cache: Path) -> None:
        env = dict(
            os.environ,
            SWARM_PW=PASSWORD,
            SWARM_MODEL_CACHE=str(cache),
            OMP_NUM_THREADS="1",
            PYTHONUNBUFFERED="1",
        )
        self.process = subprocess.Popen(
            command,
            cwd=REPO,
            env=env,
            stdout=subprocess.PIPE,
            stderr=subprocess.STDOUT,
            text=True,
        )
        self.lines: queue.Queue[str] = queue.Queue()
        self.output: list[str] = []
        threading.Thread(target=self._read, daemon=True).start()

    def _read(self) -> None:
        assert self.process.stdout is not None
        for line in self.process.stdout:
            self.lines.put(line.rstrip("\n"))

    def wait_for(self, predicate: Callable[[str], bool], timeout: float = 120.0) -> str:
        deadline = time.monotonic() + timeout
        while time.monotonic() < deadline:
            try:
                line = self.lines.get(timeout=0.5)
            except queue.Empty:
                if self.process.poll() is not None and self.lines.empty():
                    break
                continue
            self.output.append(line)
            if predicate(line):
                return line
        raise AssertionError("expected line never came; output:\n" + "\n".join(self.output))

    def stop(self, sig: int | None = signal.SIGKILL) -> int:
        """Sends ``sig`` (None: none, just wait for the exit); returns the exit code."""
        if sig is not None and self.process.poll() is None:
            self.process.send_signal(sig)
        code = self.process.wait(timeout=60)
        while not self.lines.empty():
            self.output.append(self.lines.get())
        return code


@pytest.fixture
def volunteer(
    tmp_path: Path,
    anvil: AnvilNode,
    deployment: Deployment,
    chain: ChainControl,
    client_for: Callable[..., CoordinatorClient],
) -> tuple[Path, LocalAccount]:
    """A registered volunteer's node.toml (tiny model, small rounds of work)."""
    keystore = tmp_path / "keystore.json"
    create_keystore(keystore, PASSWORD)
    account = unlock_keystore(keystore, PASSWORD)
    chain.fund(account.address, 10 * ETHER)
    client_for(account).register("runner", 1 * ETHER)
    deployment_file = deployment.save(tmp_path / "deployment.json")
    config = tmp_path / "node.toml"
    config.write_text(
        f'[chain]\nrpc_url = "{anvil.url}"\ndeployment = "{deployment_file}"\n'
        f'[identity]\nkeystore = "{keystore}"\npassword_env = "SWARM_PW"\n'
        f'[storage]\nstore = "{tmp_path / "store"}"\n'
        "[tasks]\ntasks_per_round = 2\n[sampling]\ngroup_size = 2\n"
        f'[model]\nsource = "tiny"\ndevice = "cpu"\ncheckpoint_dir = "{tmp_path / "node"}"\n'
        "[generation]\nmax_new_tokens = 4\n[training]\ntorch_threads = 1\n"
        "[round]\npoll_interval = 0.2\n"
    )
    return config, account


def test_a_killed_node_restarts_without_publishing_twice_and_stops_cleanly_on_ctrl_c(
    volunteer: tuple[Path, LocalAccount],
    chain: ChainControl,
    dev_accounts: list[LocalAccount],
    client_for: Callable[..., CoordinatorClient],
    tmp_path: Path,
) -> None:
    config, account = volunteer
    # A registered peer that never publishes: the node waits for it until 60 % of the round.
    client_for(dev_accounts[7]).register("idle", 1 * ETHER)
    round_ = chain.current_round() + 1
    chain.warp_to_round(round_)
    client = CoordinatorClient(chain.w3, chain.deployment.coordinator)
    past_the_wait = int(0.7 * chain.deployment.round_duration)

    first = NodeProcess(config, tmp_path / "cache")
    try:
        wait_for(
            lambda: published_digest(client, round_, account.address) is not None,
            timeout=120,
            what="the first process to publish",
        )
        time.sleep(1.0)  # now waiting for the idle peer, mid-round
        assert first.stop(signal.SIGKILL) == -signal.SIGKILL
    finally:
        first.stop()
    assert not any(line.startswith("round ") for line in first.output)  # it never finished

    second = NodeProcess(config, tmp_path / "cache")
    try:
        chain.warp_to_round(round_, offset=past_the_wait)
        second.wait_for(lambda line: line.startswith(f"round {round_}: published already"))
        # The same node started twice: the second refuses in one line, before loading a model.
        twice = NodeProcess(config, tmp_path / "cache")
        refusal = twice.wait_for(lambda line: line.startswith("Error: "), timeout=60)
        assert twice.stop(None) == 1
        assert f"in use by swarm run (pid {second.process.pid})" in refusal
        assert not any("Traceback" in line for line in twice.output)
        chain.warp_to_round(round_ + 1, offset=past_the_wait)
        second.wait_for(lambda line: line.startswith(f"round {round_ + 1}: published yes"))
        assert second.stop(signal.SIGINT) == 0
    finally:
        second.stop()
    assert any("stopped after 2 round(s)" in line for line in second.output), second.output

    reader = EventReader(chain.w3, chain.deployment.coordinator)
    published = reader.read(0, chain.w3.eth.block_number, events=[RolloutsPublished])
    mine = [e.round for e in published if e.peer == account.address]
    assert mine == [round_, round_ + 1]

"""A real-time local swarm of separate processes, for the open-network tests.

Anvil mines a block every second (no time travel); each node has its own keystore, state folder,
model cache and private Kubo daemon, and runs as its own ``swarm run`` process
(``tests.integration.node_process``: the real command with the answering learner, so the tiny
model's groups carry a learning signal). Built from the same pieces as
``swarm local up --processes``.
"""

from __future__ import annotations

import sys
import threading
import time
from collections.abc import Callable
from pathlib import Path

from node.chain.client import CoordinatorClient
from node.chain.events import DisputeSettled, EventReader, RolloutsPublished, VerdictRevealed
from node.config import with_overrides
from node.local.kubo import KuboDaemon, start_kubo
from node.local.processes import NodeProcess, prepare_model_cache
from node.local.swarm import (
    LocalPeer,
    LocalSwarmSettings,
    Services,
    bring_up,
    create_peer,
    start_store,
)
from tests.integration.swarm import TEST_NODE

NODE_COMMAND = (sys.executable, "-m", "tests.integration.node_process")


class OpenSwarm:
    """Chain, daemons and registered peers; node processes started on demand."""

    def __init__(
        self, workdir: Path, shared_cache: Path, *, nodes: int, rounds: int, round_seconds: int
    ):
        node = with_overrides(TEST_NODE, {"round": {"collect_fraction": 0.5}})
        self.settings = LocalSwarmSettings(
            nodes=nodes,
            rounds=rounds,
            workdir=workdir,
            anvil_port=0,  # any free port
            indexer=False,
            node=node,
            store="kubo",
            processes=True,
            round_seconds=round_seconds,
        )
        self.shared_cache = shared_cache
        self.lines: list[str] = []
        self._lock = threading.Lock()
        self.services = Services()
        self.processes: dict[str, NodeProcess] = {}
        try:
            swarm = bring_up(self.settings, self.services, self.echo)
        except BaseException:
            self.close()
            raise
        self.workdir, self.deployment, self.rpc_url = swarm.workdir, swarm.deployment, swarm.rpc_url
        self.peers, self.daemons = swarm.peers, swarm.daemons
        self.client = CoordinatorClient.connect(self.rpc_url, self.deployment)
        self.reader = EventReader(self.client.w3, self.client.address)

    def echo(self, line: str) -> None:
        with self._lock:
            self.lines.append(line)

    # ------------------------------------------------------------------ processes

    def start(self, index: int, *, node: str = "") -> NodeProcess:
        peer = self.peers[index]
        process = NodeProcess.start(
            peer,
            prepare_model_cache(peer, self.shared_cache),
            self.echo,
            swarm=NODE_COMMAND,
            env={"SWARM_TEST_NODE": node},
        )
        self.processes[peer.name] = process
        return process

    def kill(self, index: int) -> None:
        """``kill -9`` of a node's process."""
        process = self.processes[self.peers[index].name].process
        process.kill()
        process.wait()

    def add_peer(self) -> LocalPeer:
        """A late joiner: its own daemon, keystore, registration and config."""
        index = len(self.peers)
        folder = self.workdir / "nodes" / f"node-{index}"
        key = (self.workdir / "swarm.key").read_bytes()
        self.daemons.append(start_store(folder, key, self.services, self.echo))
        peer = create_peer(
            self.settings,
            index,
            self.workdir,
            self.deployment,
            self.rpc_url,
            self.daemons[-1].api_url,
            self.echo,
        )
        self.peers.append(peer)
        return peer

    def restart_daemon(self, index: int, outage: Callable[[], None]) -> KuboDaemon:
        """Stops node ``index``'s daemon, runs ``outage``, starts it again on the same ports."""
        old = self.daemons[index]
        old.process.kill()  # at once: peers must not fetch the last batch first
        old.process.wait()
        outage()
        folder = self.peers[index].folder
        key = (self.workdir / "swarm.key").read_bytes()
        new = start_kubo(
            folder / "kubo",
            key,
            api_port=old.api_port,
            swarm_port=old.swarm_port,
            log_path=folder / "kubo.log",
        )
        self.services.others.append(new)
        self.daemons[index] = new
        return new

    def wait_all(self, timeout: float) -> None:
        """Until every started node process has exited; AssertionError after ``timeout``."""
        deadline = time.monotonic() + timeout
        while any(p.process.poll() is None for p in self.processes.values()):
            if time.monotonic() > deadline:
                raise AssertionError(
                    f"node processes still running after {timeout:.0f} s:\n{self.tail()}"
                )
            time.sleep(1)

    def close(self) -> None:
        for process in self.processes.values():
            process.stop(grace=20)
        self.services.stop(lambda line: None)

    def tail(self, lines: int = 40) -> str:
        with self._lock:
            return "\n".join(self.lines[-lines:])

    # ------------------------------------------------------------------ the chain's record

    def address(self, index: int) -> str:
        return self.peers[index].account.address

    def current_round(self) -> int:
        return self.client.current_round()

    def published(self) -> list[RolloutsPublished]:
        return self._events(RolloutsPublished)

    def attested(self) -> list[VerdictRevealed]:
        """The committee verdicts revealed so far (each counted on its subject's batch)."""
        return self._events(VerdictRevealed)

    def settled(self) -> list[DisputeSettled]:
        return self._events(DisputeSettled)

    def rounds_of(self, index: int) -> list[int]:
        return sorted(e.round for e in self.published() if e.peer == self.address(index))

    def wait_until(
        self, condition: Callable[[], bool], timeout: float, what: str, *, poll: float = 1.0
    ) -> None:
        deadline = time.monotonic() + timeout
        while not condition():
            if time.monotonic() > deadline:
                raise AssertionError(f"timed out waiting for {what}:\n{self.tail()}")
            time.sleep(poll)

    def _events(self, kind: type) -> list:  # type: ignore[type-arg]
        latest = self.client.block_number()
        return [
            e
            for e in self.reader.read(self.deployment.deployment_block, latest, events=[kind])
            if isinstance(e, kind)
        ]

    def node_log(self, index: int) -> str:
        path = self.peers[index].folder / "node.log"
        return path.read_text() if path.exists() else ""

"""``swarm local up --processes``: every node its own ``swarm run`` process, in real time.

What a volunteer's machine runs, N times on one machine: Anvil mines a block every second and is
never time-travelled, so rounds last wall-clock time; each node has its own keystore, state
folder, model cache and Kubo daemon (one private IPFS network, loopback only), announces its
store on-chain and fetches its peers' batches through its own daemon. This process only starts
and watches: it prints every node's output prefixed with the node's name, and on Ctrl-C asks each
node to stop at its next step boundary, then stops the daemons, the indexer and Anvil. Every
child ends with this process, however it ends (``node.local.children``).
"""

from __future__ import annotations

import os
import shutil
import signal
import subprocess
import sys
import threading
import time
from collections.abc import Callable, Iterator, Mapping, Sequence
from dataclasses import dataclass, field
from pathlib import Path
from typing import IO

from node.chain.client import CoordinatorClient
from node.chain.deployment import Deployment
from node.chain.events import DisputeSettled, EventReader, RolloutsPublished, VerdictRevealed
from node.defaults import SHIPPED_MODEL, model_cache_dir
from node.local.children import spawn, stop
from node.local.swarm import (
    Echo,
    LocalPeer,
    LocalSwarmSettings,
    Services,
    bring_up,
    print_where_to_look,
)

#: How long a node gets to finish its step after Ctrl-C before it is terminated.
STOP_GRACE_SECONDS = 60.0


def swarm_executable() -> Path:
    """The ``swarm`` command of this installation."""
    beside = Path(sys.executable).with_name("swarm")
    if beside.exists():
        return beside
    found = shutil.which("swarm")
    if found is None:
        raise FileNotFoundError("the swarm command is not installed (run scripts/bootstrap)")
    return Path(found)


def prepare_model_cache(peer: LocalPeer, shared: Path) -> Path:
    """The node's own model cache, holding hard links to the shipped model's cached files when
    this machine has them (the tiny test model uses its tokenizer too): no second 20 s
    dequantisation per node, no second copy on disk."""
    own = peer.folder / "model-cache"
    source, target = shared / SHIPPED_MODEL, own / SHIPPED_MODEL
    target.mkdir(parents=True, exist_ok=True)
    if source.is_dir():
        for file in source.iterdir():
            if file.is_file() and not (target / file.name).exists():
                _link_or_copy(file, target / file.name)
    return own


def _link_or_copy(source: Path, target: Path) -> None:
    try:
        os.link(source, target)
    except OSError:  # another file system: copy
        shutil.copy2(source, target)


@dataclass
class NodeProcess:
    """One node's ``swarm run``, its output echoed with the node's name and kept in a log."""

    name: str
    process: subprocess.Popen[str]
    log_path: Path
    reader: threading.Thread | None = None
    last_lines: list[str] = field(default_factory=list)

    @classmethod
    def start(
        cls,
        peer: LocalPeer,
        model_cache: Path,
        echo: Echo,
        *,
        swarm: Sequence[str] = (),
        env: Mapping[str, str] | None = None,
    ) -> NodeProcess:
        """Starts ``swarm --config <node.toml> run`` for ``peer`` (``swarm``: another command
        line for the ``swarm`` program, as the tests use)."""
        program = list(swarm) or [str(swarm_executable())]
        command = [*program, "--config", str(peer.config_path), "run"]
        env = {
            **os.environ,
            **(env or {}),
            "SWARM_MODEL_CACHE": str(model_cache),
            "PYTHONUNBUFFERED": "1",
        }
        process = spawn(
            command, stdout=subprocess.PIPE, stderr=subprocess.STDOUT, env=env, text=True
        )
        node = cls(peer.name, process, peer.folder / "node.log")
        node.reader = threading.Thread(
            target=node._pump, args=(echo,), name=f"{peer.name}-output", daemon=True
        )
        node.reader.start()
        return node

    def _pump(self, echo: Echo) -> None:
        assert self.process.stdout is not None
        with self.log_path.open("a", encoding="utf-8") as log:
            for line in _lines(self.process.stdout):
                log.write(line + "\n")
                log.flush()
                self.last_lines = (self.last_lines + [line])[-5:]
                try:
                    echo(f"{self.name} | {line}")
                except (OSError, ValueError):  # our own output went away: the log keeps it all
                    pass

    def stop(self, grace: float = STOP_GRACE_SECONDS) -> int:
        """Ctrl-C for the node (it saves and stops at its next step), then terminate, then kill."""
        stop(self.process, grace=grace, sig=signal.SIGINT)
        if self.reader is not None:
            self.reader.join(timeout=5)
        return self.process.returncode


def _lines(stream: IO[str]) -> Iterator[str]:
    return (line.rstrip("\n") for line in iter(stream.readline, ""))


def watch(nodes: list[NodeProcess], should_stop: Callable[[], bool], poll: float = 0.5) -> None:
    """Returns when every node has exited or a stop was requested."""
    while not should_stop() and any(n.process.poll() is None for n in nodes):
        time.sleep(poll)


def run_process_swarm(
    settings: LocalSwarmSettings,
    *,
    echo: Echo = print,
    should_stop: Callable[[], bool] = lambda: False,
    wait_after: Callable[[str], None] = lambda leaderboard: None,
) -> list[int]:
    """Brings the swarm up, runs every node as its own process until each has done its rounds
    (or a stop), and always takes everything down again. Returns the nodes' exit codes."""
    services = Services()
    try:
        swarm = bring_up(settings, services, echo)
        peers, leaderboard = swarm.peers, swarm.leaderboard
        print_where_to_look(swarm.workdir, swarm.rpc_url, leaderboard, peers, echo)
        shared_cache = model_cache_dir()
        nodes = [NodeProcess.start(p, prepare_model_cache(p, shared_cache), echo) for p in peers]
        services.others += nodes
        watch(nodes, should_stop)
        codes = [node.stop() for node in nodes]
        echo("")
        for line in chain_summary(swarm.rpc_url, swarm.deployment, peers, codes):
            echo(line)
        if leaderboard is not None and not should_stop():
            wait_after(leaderboard)
        return codes
    finally:
        services.stop(echo)


def chain_summary(
    rpc_url: str, deployment: Deployment, peers: list[LocalPeer], codes: list[int]
) -> list[str]:
    """Per node, from the chain: rounds published, verdicts revealed on it and by it (flags
    among them), slashes, exit code."""
    client = CoordinatorClient.connect(rpc_url, deployment)
    reader = EventReader(client.w3, client.address)
    events = reader.read(
        deployment.deployment_block,
        client.block_number(),
        events=[RolloutsPublished, VerdictRevealed, DisputeSettled],
    )
    published = [e for e in events if isinstance(e, RolloutsPublished)]
    verdicts = [e for e in events if isinstance(e, VerdictRevealed)]
    slashes = [e for e in events if isinstance(e, DisputeSettled) and e.slashed]
    return [
        _peer_summary(peer.name, peer.account.address, code, published, verdicts, slashes)
        for peer, code in zip(peers, codes)
    ]


def _peer_summary(
    name: str,
    address: str,
    code: int,
    published: list[RolloutsPublished],
    verdicts: list[VerdictRevealed],
    slashes: list[DisputeSettled],
) -> str:
    received = [v for v in verdicts if v.subject == address]
    return (
        f"{name}: {sum(e.peer == address for e in published)} rounds published, "
        f"judged by peers {len(received)} times ({sum(v.is_flag for v in received)} flags), "
        f"judged {sum(v.attester == address for v in verdicts)} peer batches, "
        f"slashed {sum(e.subject == address for e in slashes)} times, exit code {code}"
    )

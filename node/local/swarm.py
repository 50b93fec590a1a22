"""``swarm local up``: a whole swarm on one machine, from nothing, in one command.

Starts Anvil, deploys the coordinator, creates N encrypted keystores (and a ``node.toml`` for
each, so ``swarm --config <node.toml> status`` works on them), funds them from Anvil's first dev
account and registers them; opens a local content store; loads the base model once and runs the N
nodes in this process, each with its own LoRA adapter, optimizer and seed, for R rounds in
lockstep (every node publishes, then every node verifies, judges, trains; then the chain's
clock jumps to the next round, so nobody waits for wall-clock rounds); starts the indexer and its
leaderboard when they are installed. Everything lives in one working folder, recreated each time.
"""

from __future__ import annotations

import secrets
import shutil
import subprocess
import sys
import time
from collections.abc import Callable, Sequence
from dataclasses import dataclass, field
from pathlib import Path
from typing import IO, Protocol

import requests
from eth_account import Account
from eth_account.signers.local import LocalAccount

from node import folder_lock
from node.chain.client import CoordinatorClient
from node.chain.deployer import DeployConfig, deploy_coordinator
from node.chain.deployment import Deployment
from node.chain.rpc import connect
from node.chain.transactions import TransactionSender
from node.config import NodeConfig, config_toml, with_overrides
from node.identity import create_keystore, unlock_keystore
from node.local.anvil import DEV_KEYS, AnvilNode, start_anvil
from node.local.children import spawn
from node.local.children import stop as stop_child
from node.local.devchain import DevChain
from node.local.kubo import KuboDaemon, new_swarm_key, start_kubo
from node.local.ports import choose_port
from node.round.report import RoundReport

ETHER = 10**18
Echo = Callable[[str], None]
DEFAULT_ANVIL_PORT = 8545
DEFAULT_INDEXER_PORT = 8000


#: What a demo node sets differently from a node's defaults: small rounds, so that 3 nodes on
#: one 2-core machine take seconds per round.
DEMO_NODE = with_overrides(
    NodeConfig(),
    {
        "tasks": {"tasks_per_round": 4},
        "sampling": {"group_size": 4, "local_groups": 2, "external_groups": 2},
        "generation": {"max_new_tokens": 24},
    },
)


@dataclass(frozen=True)
class LocalSwarmSettings:
    """What ``swarm local up`` runs (its command-line options).

    ``node`` is every node's configuration; each node gets its own identity, state folder and
    seed on top of it (``peer_config``).
    """

    nodes: int = 3
    #: Enough for the committees of the first two rounds to reveal (in rounds 3 and 4).
    rounds: int = 5
    workdir: Path = Path(".swarm-local")
    #: None: DEFAULT_ANVIL_PORT if free, else a free port (said); 0: any free port; else that
    #: port, which must be free (``node.local.ports.choose_port``).
    anvil_port: int | None = None
    #: As ``anvil_port``, around DEFAULT_INDEXER_PORT.
    indexer_port: int | None = None
    indexer: bool = True
    node: NodeConfig = DEMO_NODE
    #: "local": one store folder for all nodes; "kubo": a private Kubo daemon per node.
    store: str = "local"
    #: Every node as its own ``swarm run`` process in real time (1 s blocks), each with its own
    #: Kubo daemon; otherwise the nodes run in this process in lockstep.
    processes: bool = False
    #: Round length in seconds in real time (``processes``).
    round_seconds: int = 90
    #: Lockstep rounds are long on the clock: the demo jumps from one to the next when all nodes
    #: are done, so every node completes each round within it and one commit and one reveal
    #: round suffice (J = 3). Real-time rounds last ``round_seconds`` and keep the deployment
    #: defaults' two of each, slack for a node that finishes late (``deploy_config``).
    deploy: DeployConfig = field(
        default_factory=lambda: DeployConfig(
            round_duration=3600,
            min_stake=1 * ETHER,
            grace_rounds=1,
            commit_rounds=1,
            reveal_rounds=1,
            flag_bond=ETHER // 100,
            slash_bps=1000,
        )
    )

    def __post_init__(self) -> None:
        if self.store not in ("local", "kubo"):
            raise ValueError(f"store {self.store!r}: local or kubo")
        if self.processes and self.store != "kubo":
            raise ValueError("separate node processes need their own stores: use store kubo")
        if self.round_seconds < 5:
            raise ValueError("a real-time round needs at least 5 seconds")

    def deploy_config(self) -> DeployConfig:
        """The coordinator's parameters: the nodes' batch shape, and real-time rounds of
        ``round_seconds`` in processes."""
        deploy = self.deploy.with_batch_shape(self.node.batch_shape())
        if not self.processes:
            return deploy
        real_time = {"round_duration": self.round_seconds, "commit_rounds": 2, "reveal_rounds": 2}
        return deploy.model_copy(update=real_time)


@dataclass
class LocalPeer:
    """One demo node's identity and files."""

    name: str
    account: LocalAccount
    folder: Path

    config: NodeConfig

    @property
    def config_path(self) -> Path:
        return self.folder / "node.toml"


class Stoppable(Protocol):
    def stop(self) -> object: ...


@dataclass
class Services:
    """The processes the demo started: ``others`` (node processes, Kubo daemons) are stopped
    first, newest first, then the indexer, then Anvil."""

    anvil: AnvilNode | None = None
    indexer: subprocess.Popen[bytes] | None = None
    others: list[Stoppable] = field(default_factory=list)
    #: The working folder's lock, released last.
    lock: IO[str] | None = None

    def stop(self, echo: Echo) -> None:
        """Stops every one of them, even when stopping one fails (it is killed then)."""
        while self.others:
            other = self.others.pop()
            _stop_quietly(other.stop, getattr(other, "process", None))
        if self.indexer is not None and self.indexer.poll() is None:
            echo("stopping the indexer")
            indexer = self.indexer
            _stop_quietly(lambda: stop_child(indexer, grace=15), indexer)
        if self.anvil is not None:
            echo("stopping anvil")
            _stop_quietly(self.anvil.stop, self.anvil.process)
        if self.lock is not None:
            self.lock.close()
            self.lock = None


def _stop_quietly(stop: Callable[[], object], process: object) -> None:
    """``stop()``; if that raises, kill ``process`` (a Popen, if it is one) and go on."""
    try:
        stop()
    except Exception:  # noqa: BLE001 - the next service must be stopped all the same
        if isinstance(process, subprocess.Popen) and process.poll() is None:
            process.kill()


def prepare_workdir(workdir: Path, services: Services, echo: Echo) -> Path:
    """An empty working folder, locked for this demo until ``services`` stop: FolderInUse (one
    line naming it) while another demo runs in it; a previous demo's state is cleared only once
    its process is gone (it held the lock until then)."""
    workdir = workdir.resolve()
    services.lock = folder_lock.hold(workdir, "swarm local up")
    leftovers = [p for p in workdir.iterdir() if p.name != folder_lock.LOCK_NAME]
    if leftovers:
        echo(f"clearing {workdir} (the demo that ran in it has stopped)")
        for path in leftovers:
            if path.is_dir() and not path.is_symlink():
                shutil.rmtree(path)
            else:
                path.unlink()
    (workdir / "nodes").mkdir(parents=True)
    return workdir


def start_chain(
    settings: LocalSwarmSettings, workdir: Path, services: Services, echo: Echo, port: int
) -> Deployment:
    """Anvil on ``port`` plus a freshly deployed coordinator (recorded in
    ``workdir/deployment.json``)."""
    real_time = ("--block-time", "1") if settings.processes else ()
    services.anvil = start_anvil(workdir / "anvil.log", port=port, extra_args=real_time)
    echo(
        f"anvil on {services.anvil.url}, genesis {services.anvil.genesis_hash[:10]}... "
        f"(log {workdir / 'anvil.log'})"
    )
    w3 = connect(services.anvil.url)
    deployment = deploy_coordinator(
        w3, Account.from_key(DEV_KEYS[0]), settings.deploy_config(), progress=echo
    )
    if not settings.processes:  # lockstep: the chain's clock jumps to each next round
        deployment = deployment.model_copy(update={"clock": "jumps"})
    deployment.save(workdir / "deployment.json")
    return deployment


def create_peers(
    settings: LocalSwarmSettings,
    workdir: Path,
    deployment: Deployment,
    rpc_url: str,
    echo: Echo,
    *,
    stores: Sequence[str] | None = None,
) -> list[LocalPeer]:
    """N keystores (random passwords kept beside them), funded and registered, each with a
    ``node.toml`` (so ``swarm --config node.toml status`` or ``run`` work on them).

    ``stores`` gives each node its own store (a Kubo API URL); by default all share
    ``workdir/store``.
    """
    return [
        create_peer(
            settings,
            i,
            workdir,
            deployment,
            rpc_url,
            stores[i] if stores is not None else str(workdir / "store"),
            echo,
        )
        for i in range(settings.nodes)
    ]


def create_peer(
    settings: LocalSwarmSettings,
    index: int,
    workdir: Path,
    deployment: Deployment,
    rpc_url: str,
    store: str,
    echo: Echo,
) -> LocalPeer:
    """Node ``index``: a keystore, funded from Anvil's first dev account, registered, and its
    ``node.toml``."""
    name = f"node-{index}"
    folder = workdir / "nodes" / name
    folder.mkdir(parents=True, exist_ok=True)
    password = secrets.token_urlsafe(18)
    (folder / "password").write_text(password + "\n")
    (folder / "password").chmod(0o600)
    create_keystore(folder / "keystore.json", password)
    account = unlock_keystore(folder / "keystore.json", password)
    funder = TransactionSender(connect(rpc_url), Account.from_key(DEV_KEYS[0]))
    funder.send(to=account.address, data=b"", value=10 * ETHER, what=f"funding {name}")
    client = CoordinatorClient.connect(rpc_url, deployment, account=account)
    client.register(name, deployment.min_stake)
    config = peer_config(node_config(settings), index, folder, workdir, rpc_url, store)
    peer = LocalPeer(name, account, folder, config)
    peer.config_path.write_text(config_toml(peer.config))
    echo(f"{name}: {account.address} funded and registered ({peer.config_path})")
    return peer


def node_config(settings: LocalSwarmSettings) -> NodeConfig:
    """Every node's configuration: the demo's, plus what this kind of local swarm needs (a Kubo
    peer dials the others on loopback; a process shares 2 cores with the others, runs the
    asked rounds and polls the 1 s chain often)."""
    overrides: dict[str, dict[str, object]] = {}
    if settings.store == "kubo":
        overrides["storage"] = {"allow_private_addresses": True}
    if settings.processes:
        overrides["training"] = {"torch_threads": 1}
        overrides["round"] = {"max_rounds": settings.rounds, "poll_interval": 1.0}
    return with_overrides(settings.node, overrides)


def peer_config(
    node: NodeConfig, index: int, folder: Path, workdir: Path, rpc_url: str, store: str
) -> NodeConfig:
    """Node ``index``'s configuration: ``node`` with its chain, keystore, store, state and seed."""
    return with_overrides(
        node,
        {
            "chain": {"rpc_url": rpc_url, "deployment": workdir / "deployment.json"},
            "identity": {
                "keystore": folder / "keystore.json",
                "password_file": folder / "password",
            },
            "storage": {"store": store},
            "model": {"checkpoint_dir": folder / "state"},
            "training": {"seed": index},
        },
    )


@dataclass
class LocalSwarm:
    """What ``bring_up`` started: the working folder, the chain, the peers, the leaderboard."""

    workdir: Path
    deployment: Deployment
    rpc_url: str
    peers: list[LocalPeer]
    leaderboard: str | None
    daemons: list[KuboDaemon]


def bring_up(settings: LocalSwarmSettings, services: Services, echo: Echo) -> LocalSwarm:
    """A fresh working folder, Anvil and the coordinator, the nodes' stores (a Kubo daemon each
    with ``store = "kubo"``), funded and registered peers, the indexer; every process started is
    in ``services``, for the caller to stop however it ends."""
    workdir = prepare_workdir(settings.workdir, services, echo)
    # Both ports before anything starts: a taken one the user asked for stops the demo right here.
    anvil_port = choose_port(settings.anvil_port, DEFAULT_ANVIL_PORT, "anvil", echo)
    indexer_port = None
    if settings.indexer:
        indexer_port = choose_port(
            settings.indexer_port, DEFAULT_INDEXER_PORT, "the leaderboard", echo
        )
    deployment = start_chain(settings, workdir, services, echo, anvil_port)
    assert services.anvil is not None
    rpc_url = services.anvil.url
    daemons = start_stores(settings, workdir, services, echo)
    peers = create_peers(settings, workdir, deployment, rpc_url, echo, stores=store_urls(daemons))
    leaderboard = start_indexer(settings, workdir, rpc_url, services, echo, indexer_port)
    return LocalSwarm(workdir, deployment, rpc_url, peers, leaderboard, daemons)


def print_where_to_look(
    workdir: Path, rpc_url: str, leaderboard: str | None, peers: list[LocalPeer], echo: Echo
) -> None:
    stores = {peer.config.storage.store for peer in peers}
    store = stores.pop() if len(stores) == 1 else "a Kubo daemon per node (nodes/node-N/kubo)"
    echo("")
    echo(f"chain        {rpc_url}  (deployment {workdir / 'deployment.json'})")
    echo(f"store        {store}")
    echo(f"leaderboard  {leaderboard or 'not running'}")
    echo(f"a node       {swarm_command()} --config {peers[0].config_path} status")
    echo("")


def swarm_command() -> str:
    """How to call ``swarm`` from here: the clone's ``.venv/bin/swarm`` when run from a clone
    (``swarm`` alone is on PATH only in an activated environment)."""
    in_clone = Path(".venv/bin/swarm")
    return str(in_clone) if in_clone.exists() else "swarm"


def start_stores(
    settings: LocalSwarmSettings, workdir: Path, services: Services, echo: Echo
) -> list[KuboDaemon]:
    """With ``store = "kubo"``: one private Kubo daemon per node (its repository in the node's
    folder), all on one swarm key (``workdir/swarm.key``). None with a shared store folder."""
    if settings.store != "kubo":
        return []
    key = new_swarm_key()
    (workdir / "swarm.key").write_bytes(key)
    return [
        start_store(workdir / "nodes" / f"node-{i}", key, services, echo)
        for i in range(settings.nodes)
    ]


def start_store(folder: Path, key: bytes, services: Services, echo: Echo) -> KuboDaemon:
    """A node's Kubo daemon (repository ``folder/kubo``), stopped with the other services."""
    daemon = start_kubo(folder / "kubo", key, log_path=folder / "kubo.log")
    services.others.append(daemon)
    echo(f"{folder.name}: Kubo {daemon.peer_id} on {daemon.api_url}")
    return daemon


def store_urls(daemons: Sequence[KuboDaemon]) -> list[str] | None:
    """The nodes' own stores (their daemons' APIs), or None for the shared folder."""
    return [daemon.api_url for daemon in daemons] or None


def indexer_command(
    settings: LocalSwarmSettings, workdir: Path, rpc_url: str, port: int
) -> list[str] | None:
    """The indexer's command line, or None when the indexer is not installed."""
    executable = Path(sys.executable).with_name("swarm-indexer")
    if not executable.exists():
        found = shutil.which("swarm-indexer")
        if found is None:
            return None
        executable = Path(found)
    return [
        str(executable),
        "run",
        "--rpc",
        rpc_url,
        "--deployment",
        str(workdir / "deployment.json"),
        "--db",
        f"sqlite:///{workdir / 'indexer.db'}",
        "--port",
        str(port),
    ]


def start_indexer(
    settings: LocalSwarmSettings,
    workdir: Path,
    rpc_url: str,
    services: Services,
    echo: Echo,
    port: int | None,
) -> str | None:
    """Starts the indexer and leaderboard on ``port``; returns the leaderboard's URL once it
    serves this demo's coordinator (None if not started)."""
    if port is None:
        return None
    command = indexer_command(settings, workdir, rpc_url, port)
    if command is None:
        echo("no indexer installed (swarm-indexer): running without a leaderboard")
        return None
    log_file = (workdir / "indexer.log").open("wb")
    services.indexer = spawn(command, stdout=log_file, stderr=subprocess.STDOUT)
    url = f"http://127.0.0.1:{port}"
    coordinator = Deployment.load(workdir / "deployment.json").coordinator
    problem = _wait_for_leaderboard(url, coordinator, services.indexer)
    if problem is None:
        echo(f"indexer and leaderboard on {url} (log {workdir / 'indexer.log'})")
        return url
    echo(f"{problem} (see {workdir / 'indexer.log'}); going on without a leaderboard")
    stop_child(services.indexer)
    return None


def _wait_for_leaderboard(
    url: str, coordinator: str, indexer: subprocess.Popen[bytes], timeout: float = 60
) -> str | None:
    """None once ``url``'s ``/api/stats`` names ``coordinator`` and our indexer runs; else why
    not (it exited, timed out, or another leaderboard answers on the port)."""
    deadline = time.monotonic() + timeout
    while time.monotonic() < deadline and indexer.poll() is None:
        try:
            reply = requests.get(f"{url}/api/stats", timeout=1)
        except requests.RequestException:
            time.sleep(0.3)
            continue
        if reply.status_code == 200:
            serves = str(reply.json().get("coordinator", ""))
            if serves.lower() == coordinator.lower() and indexer.poll() is None:
                return None
            return f"{url} serves another leaderboard (coordinator {serves})"
        time.sleep(0.3)
    return "the indexer did not come up"


def advance_clock(chain: DevChain) -> Callable[[int], None]:
    """Jumps the dev chain's clock to the start of a round (plus one second)."""
    return lambda round_: chain.warp_to_round(round_, offset=1)


def summary_lines(reports: list[RoundReport], names: dict[str, str]) -> list[str]:
    """Per node: rounds published, reward in the first and last round, groups shared."""
    lines = []
    for address, name in names.items():
        mine = [r for r in reports if r.peer == address]
        rewards = [r.local_reward for r in mine if r.local_reward is not None]
        first, last = (f"{rewards[0]:.3f}", f"{rewards[-1]:.3f}") if rewards else ("-", "-")
        lines.append(
            f"{name}: {sum(r.published == 'yes' for r in mine)}/{len(mine)} rounds published, "
            f"mean reward per completion {first} -> {last}, external groups trained on "
            f"{sum(r.external_groups for r in mine)}, verdicts committed "
            f"{sum(r.committed for r in mine)}, revealed {sum(r.revealed for r in mine)} "
            f"(flags {sum(r.flagged for r in mine)}), "
            f"rejected {sum(sum(r.rejections.values()) for r in mine)}"
        )
    return lines

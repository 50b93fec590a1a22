"""``swarm local up``: a whole swarm on one machine, from nothing, in one command.

Starts Anvil, deploys the coordinator, creates N encrypted keystores (and a ``node.toml`` for
each, so ``swarm --config <node.toml> status`` works on them), funds them from Anvil's first dev
account and registers them; opens a local content store; loads the base model once and runs the N
nodes in this process, each with its own LoRA adapter, optimizer and seed, for R rounds in
lockstep (every node publishes, then every node verifies, trains and attests; then the chain's
clock jumps to the next round, so nobody waits for wall-clock rounds); starts the indexer and its
leaderboard when they are installed. Everything lives in one working folder, recreated each time.
"""

from __future__ import annotations

import secrets
import shutil
import subprocess
import sys
import time
from collections.abc import Callable
from dataclasses import dataclass, field
from pathlib import Path

import requests
from eth_account import Account
from eth_account.signers.local import LocalAccount

from node.chain.client import CoordinatorClient
from node.chain.deployer import DeployConfig, deploy_coordinator
from node.chain.deployment import Deployment
from node.chain.rpc import connect
from node.chain.transactions import TransactionSender
from node.config import NodeConfig, config_toml, with_overrides
from node.identity import create_keystore, unlock_keystore
from node.local.anvil import DEV_KEYS, AnvilNode, start_anvil
from node.local.devchain import DevChain
from node.round.report import RoundReport

ETHER = 10**18
Echo = Callable[[str], None]


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
    rounds: int = 4
    workdir: Path = Path(".swarm-local")
    anvil_port: int | None = 8545
    indexer_port: int = 8000
    indexer: bool = True
    node: NodeConfig = DEMO_NODE
    #: Rounds are long on the clock; the demo jumps from one to the next when all nodes are done.
    deploy: DeployConfig = field(
        default_factory=lambda: DeployConfig(
            round_duration=3600,
            min_stake=1 * ETHER,
            unbonding_period=3 * 3600,
            grace_rounds=1,
            attestation_window_rounds=2,
            slash_bps=1000,
            dispute_quorum=2,
        )
    )


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


@dataclass
class Services:
    """The processes the demo started (stopped in reverse order)."""

    anvil: AnvilNode | None = None
    indexer: subprocess.Popen[bytes] | None = None

    def stop(self, echo: Echo) -> None:
        if self.indexer is not None and self.indexer.poll() is None:
            echo("stopping the indexer")
            self.indexer.terminate()
            try:
                self.indexer.wait(timeout=15)
            except subprocess.TimeoutExpired:
                self.indexer.kill()
        if self.anvil is not None:
            echo("stopping anvil")
            self.anvil.stop()


def prepare_workdir(workdir: Path, echo: Echo) -> Path:
    """An empty working folder (a previous demo's chain is gone, so is its state)."""
    workdir = workdir.resolve()
    if workdir.exists():
        echo(f"clearing {workdir} (a previous demo's chain no longer exists)")
        shutil.rmtree(workdir)
    (workdir / "nodes").mkdir(parents=True)
    return workdir


def start_chain(
    settings: LocalSwarmSettings, workdir: Path, services: Services, echo: Echo
) -> Deployment:
    """Anvil plus a freshly deployed coordinator (recorded in ``workdir/deployment.json``)."""
    services.anvil = start_anvil(workdir / "anvil.log", port=settings.anvil_port)
    echo(f"anvil on {services.anvil.url} (log {workdir / 'anvil.log'})")
    w3 = connect(services.anvil.url)
    return deploy_coordinator(
        w3,
        Account.from_key(DEV_KEYS[0]),
        settings.deploy,
        out=workdir / "deployment.json",
        progress=echo,
    )


def create_peers(
    settings: LocalSwarmSettings, workdir: Path, deployment: Deployment, rpc_url: str, echo: Echo
) -> list[LocalPeer]:
    """N keystores (random passwords kept beside them), funded and registered, each with a
    ``node.toml`` (so ``swarm --config node.toml status`` or ``run`` work on them)."""
    funder = TransactionSender(connect(rpc_url), Account.from_key(DEV_KEYS[0]))
    peers = []
    for i in range(settings.nodes):
        name = f"node-{i}"
        folder = workdir / "nodes" / name
        folder.mkdir(parents=True)
        password = secrets.token_urlsafe(18)
        (folder / "password").write_text(password + "\n")
        (folder / "password").chmod(0o600)
        create_keystore(folder / "keystore.json", password)
        account = unlock_keystore(folder / "keystore.json", password)
        funder.send(to=account.address, data=b"", value=10 * ETHER, what=f"funding {name}")
        client = CoordinatorClient.connect(rpc_url, deployment, account=account)
        client.register(name, deployment.parameters.min_stake)
        peer = LocalPeer(
            name, account, folder, peer_config(settings.node, i, folder, workdir, rpc_url)
        )
        peer.config_path.write_text(config_toml(peer.config))
        echo(f"{name}: {account.address} funded and registered ({peer.config_path})")
        peers.append(peer)
    return peers


def peer_config(
    node: NodeConfig, index: int, folder: Path, workdir: Path, rpc_url: str
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
            "storage": {"store": str(workdir / "store")},
            "model": {"checkpoint_dir": folder / "state"},
            "training": {"seed": index},
        },
    )


def indexer_command(settings: LocalSwarmSettings, workdir: Path, rpc_url: str) -> list[str] | None:
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
        str(settings.indexer_port),
    ]


def start_indexer(
    settings: LocalSwarmSettings, workdir: Path, rpc_url: str, services: Services, echo: Echo
) -> str | None:
    """Starts the indexer and leaderboard; returns the leaderboard's URL (None if not started)."""
    command = indexer_command(settings, workdir, rpc_url) if settings.indexer else None
    if command is None:
        if settings.indexer:
            echo("no indexer installed (swarm-indexer): running without a leaderboard")
        return None
    log_file = (workdir / "indexer.log").open("wb")
    services.indexer = subprocess.Popen(
        command, stdout=log_file, stderr=subprocess.STDOUT, stdin=subprocess.DEVNULL
    )
    url = f"http://127.0.0.1:{settings.indexer_port}"
    deadline = time.monotonic() + 60
    while time.monotonic() < deadline and services.indexer.poll() is None:
        try:
            if requests.get(f"{url}/health", timeout=1).status_code < 500:
                echo(f"indexer and leaderboard on {url} (log {workdir / 'indexer.log'})")
                return url
        except requests.RequestException:
            time.sleep(0.3)
    echo(f"the indexer did not come up (see {workdir / 'indexer.log'}); going on without it")
    return None


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
            f"local reward {first} -> {last}, external groups trained on "
            f"{sum(r.external_groups for r in mine)}, attested {sum(r.attested for r in mine)}, "
            f"rejected {sum(sum(r.rejections.values()) for r in mine)}"
        )
    return lines

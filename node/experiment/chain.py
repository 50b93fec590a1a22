"""The chain exchange: one fresh Anvil + coordinator + local content store per unit.

The nodes are plain :class:`~node.round.node.SwarmNode` objects on a
:class:`~node.round.exchange.ChainExchange`, driven in lockstep (``run_lockstep``), exactly as
``swarm local up`` runs them: publish on-chain, fetch from the store, verify, judge by committee, settle,
checkpoint. The peers' keys are derived from the experiment seed and the coordinator is deployed
with a seed input derived from it too. The genesis seed also mixes in ``block.prevrandao``, which
Anvil derives from the block's time: so each unit's Anvil starts at a fixed genesis time and the
deployment block gets a fixed timestamp. Then the contract address, the genesis seed and with them
every node's task stream are the same in every configuration of a seed (the runner checks it).
"""

from __future__ import annotations

import shutil
from collections.abc import Callable
from dataclasses import dataclass
from pathlib import Path

from eth_account import Account
from eth_account.signers.local import LocalAccount
from eth_utils import keccak

from node.chain.client import CoordinatorClient
from node.chain.deployer import deploy_coordinator
from node.chain.deployment import Deployment
from node.chain.rpc import connect
from node.chain.transactions import TransactionSender
from node.local.anvil import DEV_KEYS, AnvilNode, start_anvil
from node.local.devchain import DevChain
from node.local.swarm import ETHER, LocalSwarmSettings, advance_clock
from node.round.exchange import ChainExchange
from node.storage import LocalStore


def experiment_accounts(seed: int, count: int) -> list[LocalAccount]:
    """Fixed peer keys: keccak of a public string (test keys, never for anything real)."""
    return [
        Account.from_key(keccak(text=f"sapo-experiment/seed-{seed}/node-{i}")) for i in range(count)
    ]


#: Genesis time of every unit's Anvil (2026-01-01T00:00:00Z) and of its deployment block.
GENESIS_TIME = 1767225600
DEPLOY_TIME = GENESIS_TIME + 60


def seed_input_for(seed: int) -> bytes:
    return keccak(text=f"sapo-experiment/seed-input/{seed}")


@dataclass
class ChainUnit:
    """A running unit: its Anvil, the deployment, each peer's exchange, the clock to advance."""

    anvil: AnvilNode
    deployment: Deployment
    exchanges: list[ChainExchange]
    advance: Callable[[int], None]

    def stop(self) -> None:
        self.anvil.stop()


def start_chain_unit(
    folder: Path, accounts: list[LocalAccount], seed: int, shape: tuple[int, int]
) -> ChainUnit:
    """Anvil, the coordinator (the demo's parameters, batches of ``shape`` = (n, G)), funded
    and registered peers."""
    if folder.exists():
        shutil.rmtree(folder)
    folder.mkdir(parents=True)
    anvil = start_anvil(folder / "anvil.log", extra_args=("--timestamp", str(GENESIS_TIME)))
    try:
        w3 = connect(anvil.url)
        w3.provider.make_request("evm_setNextBlockTimestamp", [DEPLOY_TIME])  # type: ignore[arg-type]
        config = LocalSwarmSettings().deploy.with_batch_shape(shape)
        config = config.model_copy(update={"seed_input": seed_input_for(seed)})
        deployment = deploy_coordinator(
            w3, Account.from_key(DEV_KEYS[0]), config, out=folder / "deployment.json"
        )
        funder = TransactionSender(w3, Account.from_key(DEV_KEYS[0]))
        store = LocalStore(folder / "store")
        exchanges = []
        for i, account in enumerate(accounts):
            funder.send(to=account.address, data=b"", value=10 * ETHER, what=f"funding node {i}")
            client = CoordinatorClient.connect(anvil.url, deployment, account=account)
            client.register(f"node-{i}", deployment.min_stake)
            exchanges.append(ChainExchange(client, deployment, store))
        chain = DevChain(w3, deployment)
        return ChainUnit(anvil, deployment, exchanges, advance_clock(chain))
    except BaseException:
        anvil.stop()
        raise

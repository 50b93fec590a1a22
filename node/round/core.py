"""The state every part of a node's round shares: settings, identity, chain context, state file.

:class:`NodeCore` is the base of :class:`~node.round.produce.Producer` (steps 1-2 of a round) and
:class:`~node.round.node.SwarmNode` (steps 3-6).
"""

from __future__ import annotations

import logging
from dataclasses import dataclass
from pathlib import Path

from eth_utils import to_checksum_address

from node.chain.client import CoordinatorClient
from node.chain.deployment import Deployment
from node.chain.events import EventReader
from node.chain.models import Parameters, PeerStatus
from node.chain.rounds import round_seed
from node.chain.rpc import RetryPolicy
from node.round.errors import NotActive, StateError
from node.round.learner import Learner
from node.round.own import OwnRound
from node.round.report import RoundReport
from node.round.retry import STORE_RETRY
from node.round.state import ChainIdentity, NodeState, load_state, save_state
from node.round.view import SwarmView, check_chain
from node.sampling.selection import UniformSelection, VerifiedHistorySelection
from node.storage import ContentStore
from node.tasks import TaskItem, derive_tasks, get_preset

log = logging.getLogger(__name__)


@dataclass(frozen=True)
class NodeSettings:
    """The protocol-side settings of one node (``NodeConfig`` maps onto these)."""

    preset: str = "smol-easy"
    tasks_per_round: int | None = None
    local_groups: int = 4
    external_groups: int = 4
    group_size: int = 8
    strategy: str = "uniform"
    compress: bool = False
    fetch_timeout: float = 10.0
    fetch_budget: float = 30.0
    settle_disputes: bool = True
    seed: int = 0
    store_retry: RetryPolicy = STORE_RETRY


class NodeCore:
    """One peer: its account's client, a content store, its learner and its state folder."""

    def __init__(
        self,
        client: CoordinatorClient,
        deployment: Deployment,
        store: ContentStore,
        learner: Learner,
        state_dir: Path,
        settings: NodeSettings = NodeSettings(),
    ) -> None:
        if client.account_address is None:
            raise ValueError("a node's client needs the peer's account")
        self.client = client
        self.deployment = deployment
        self.store = store
        self.learner = learner
        self.state_dir = Path(state_dir)
        self.settings = settings
        self.address = to_checksum_address(client.account_address)
        self.preset = get_preset(settings.preset)
        self.view = SwarmView(EventReader(client.w3, client.address), deployment.deployment_block)
        self.strategy = (
            VerifiedHistorySelection()
            if settings.strategy == "verified-history"
            else UniformSelection()
        )
        self.state: NodeState | None = None
        self.trained_round: int | None = None
        self._own: dict[int, OwnRound] = {}
        self._reports: dict[int, RoundReport] = {}
        self._genesis_seed = b""
        self._params: Parameters | None = None

    # ------------------------------------------------------------------ start

    def start(self) -> None:
        """Checks the chain and registration, loads the checkpoint and the state file."""
        self.check_chain()
        status = self.client.peer_info(self.address).status
        if status is not PeerStatus.ACTIVE:
            raise NotActive(
                f"{self.address} is {status.name.lower()} on this coordinator: only an active peer "
                "publishes (swarm register --name NAME --stake AMOUNT)"
            )
        self._genesis_seed = self.client.genesis_seed()
        self._params = self.client.parameters()
        identity = ChainIdentity(
            chain_id=self.deployment.chain_id,
            coordinator=self.deployment.coordinator,
            deployment_block_hash=self.deployment.block_hash,
        )
        state = load_state(self.state_dir)
        if state is not None and (state.chain != identity or state.peer != self.address):
            raise StateError(
                f"{self.state_dir} holds the state of {state.peer} on another deployment "
                f"({state.chain.coordinator}, chain {state.chain.chain_id}): give this node its "
                "own checkpoint folder"
            )
        self.state = state or NodeState(peer=self.address, chain=identity)
        self.view.refresh(self.client.block_number())
        info = self.learner.restore(self.state_dir)
        self.trained_round = None if info is None else info.round
        if info is not None:
            log.info("%s: resumed the adapter of round %d", self.address, info.round)

    @property
    def params(self) -> Parameters:
        if self._params is None:
            raise RuntimeError("call start() first")
        return self._params

    def current_round(self) -> int:
        return self.client.current_round()

    def check_chain(self) -> None:
        """Raises ChainReset when the chain no longer holds this node's deployment."""
        check_chain(self.client, self.deployment, seen_block=self.view.next_block - 1)

    def report(self, round: int) -> RoundReport:
        return self._reports.setdefault(round, RoundReport(round=round, peer=self.address))

    def tasks(self, round: int) -> list[TaskItem]:
        tasks = derive_tasks(round_seed(self._genesis_seed, round), self.address, self.preset)
        return tasks[: self.settings.tasks_per_round or len(tasks)]

    def save(self) -> None:
        """Writes the protocol state now (on shutdown)."""
        if self.state is not None:
            save_state(self.state_dir, self.state)

    # ------------------------------------------------------------------ helpers

    def _state(self) -> NodeState:
        if self.state is None:
            raise RuntimeError("call start() first")
        return self.state

    def _save_state(self, report: RoundReport) -> None:
        with report.timings.measure("checkpoint"):
            save_state(self.state_dir, self._state())

"""The state every part of a node's round shares: configuration, identity, exchange, state file.

:class:`NodeCore` is the base of :class:`~node.round.produce.Producer` (steps 1-2 of a round) and
:class:`~node.round.node.SwarmNode` (steps 3-6). A node is built by
:func:`node.round.factory.build_node`; it reaches the swarm only through its
:class:`~node.round.exchange.Exchange`.
"""

from __future__ import annotations

import logging

from eth_account.signers.local import LocalAccount
from eth_utils import to_checksum_address

from node.chain.models import Phases
from node.chain.rounds import round_seed
from node.chain.rpc import RetryPolicy
from node.config import NodeConfig
from node.round.errors import BatchShapeError, StateError
from node.round.exchange import Exchange, SwarmInfo
from node.round.learner import Learner
from node.round.own import OwnRound
from node.round.report import RoundReport
from node.round.retry import STORE_RETRY
from node.round.state import NodeState, load_state, save_state
from node.sampling.selection import UniformSelection, VerifiedHistorySelection
from node.sampling.verdicts import VerifiedGroup
from node.tasks import TaskItem, derive_tasks, get_preset

log = logging.getLogger(__name__)


class NodeCore:
    """One peer: its account, its exchange with the swarm, its learner and its state folder."""

    def __init__(
        self,
        account: LocalAccount,
        exchange: Exchange,
        learner: Learner,
        config: NodeConfig,
        *,
        store_retry: RetryPolicy = STORE_RETRY,
    ) -> None:
        self.account = account
        self.address = to_checksum_address(account.address)
        self.exchange = exchange
        self.learner = learner
        self.config = config
        self.state_dir = config.model.checkpoint_dir.expanduser()
        self.store_retry = store_retry
        self.preset = get_preset(config.tasks.preset)
        self.strategy = (
            VerifiedHistorySelection()
            if config.sampling.strategy == "verified-history"
            else UniformSelection()
        )
        self.state: NodeState | None = None
        self.trained_round: int | None = None
        #: whether ``finish`` checkpoints the adapter after a round it trained; False where the
        #: caller checkpoints every node itself (the experiment's runner, once all have finished)
        self.saves_adapter = True
        self._own: dict[int, OwnRound] = {}
        #: the groups of each peer batch verified here, by (round, peer), while it can be judged:
        #: a recomputing seat checks them without fetching the batch again (after a restart it does)
        self._verified: dict[tuple[int, str], tuple[VerifiedGroup, ...]] = {}
        self._reports: dict[int, RoundReport] = {}
        self._shapes: dict[int, tuple[int, int]] = {}
        self._swarm: SwarmInfo | None = None

    # ------------------------------------------------------------------ start

    def start(self) -> None:
        """Joins the swarm (checks chain and registration), loads the checkpoint and state file."""
        self._swarm = swarm = self.exchange.join(self.address)
        state = load_state(self.state_dir)
        if state is not None and (state.chain != swarm.identity or state.peer != self.address):
            raise StateError(
                f"{self.state_dir} holds the state of {state.peer} on another deployment "
                f"({state.chain.coordinator}, chain {state.chain.chain_id}): give this node its "
                "own checkpoint folder"
            )
        self.state = state or NodeState(peer=self.address, chain=swarm.identity)
        info = self.learner.restore(self.state_dir)
        self.trained_round = None if info is None else info.round
        if info is not None:
            log.info("%s: resumed the adapter of round %d", self.address, info.round)

    @property
    def swarm(self) -> SwarmInfo:
        if self._swarm is None:
            raise RuntimeError("call start() first")
        return self._swarm

    @property
    def phases(self) -> Phases:
        """The swarm's round phases (grace, commit, reveal), fixed at deployment."""
        return self.swarm.phases

    @property
    def genesis_seed(self) -> bytes:
        """The seed every round's tasks derive from (read from the swarm at ``start``)."""
        return self.swarm.genesis_seed

    def current_round(self) -> int:
        return self.exchange.current_round()

    def check_chain(self) -> None:
        """Raises ChainReset when the chain no longer holds this node's deployment."""
        self.exchange.check()

    def report(self, round: int) -> RoundReport:
        return self._reports.setdefault(round, RoundReport(round=round, peer=self.address))

    def batch_shape(self, round: int) -> tuple[int, int]:
        """(n, G) of ``round``'s batches, ours and our peers', from the round's rules: the one
        source for producing and verifying alike, so that this node never publishes a batch it
        would itself flag."""
        shape = self._shapes.get(round)
        if shape is None:
            rules = self.exchange.rules_at(round)
            shape = self._shapes[round] = (rules.tasks_per_round, rules.group_size)
        return shape

    def tasks(self, round: int) -> list[TaskItem]:
        """The n tasks this node answers in ``round``: tasks 0..n-1 of its preset's, all of them."""
        count, _ = self.batch_shape(round)
        tasks = derive_tasks(round_seed(self.genesis_seed, round), self.address, self.preset)
        if len(tasks) < count:
            raise BatchShapeError(
                f"round {round} has {count} tasks per batch, but preset {self.preset.name!r} "
                f"derives {len(tasks)}: run a preset with at least {count} tasks per round"
            )
        return tasks[:count]

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

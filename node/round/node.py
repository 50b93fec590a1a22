"""One swarm node: the six steps of a round (DESIGN.md, "Node round loop"), restart-safe.

    produce(r)        derive tasks, generate G completions each, score, sign, store, publish
    (the caller waits for peers: :mod:`node.round.loop` in real time, the local swarm in lockstep)
    complete(r)       gather commitments of r and its grace window, fetch, verify, filter;
                      train on I local + J external groups; attest; settle; checkpoint

Restart safety: the batch of a round is recorded (digest) before it is published and the chain
is asked before publishing, so a restarted node publishes the same bytes or nothing; a round
whose training reached the checkpoint is not trained again; verdicts wait in the state file until
attested; attestations below the contract's ``nextAttestRound`` are known to be done.
"""

from __future__ import annotations

import logging
import random
from collections.abc import Sequence
from dataclasses import dataclass
from pathlib import Path

from eth_utils import to_checksum_address

from node.chain.client import CoordinatorClient
from node.chain.deployment import Deployment
from node.chain.errors import ChainError, ContractRevert
from node.chain.events import EventReader, RolloutsPublished
from node.chain.models import Parameters, PeerStatus
from node.chain.rpc import RetryPolicy
from node.chain.reverts import (
    SwarmCoordinatorAlreadyPublished,
    SwarmCoordinatorAlreadySettled,
    SwarmCoordinatorNoDispute,
    SwarmCoordinatorWrongRound,
)
from node.chain.rounds import round_seed
from node.policy.grpo import ScoredGroup
from node.rollouts import decode_batch
from node.rollouts.assemble import assemble_batch
from node.rollouts.reasons import RejectReason
from node.rollouts.schema import ModelInfo
from node.round.attestations import plan_attestations
from node.round.learner import Learner, derived_seed
from node.round.own import BatchToPublish, OwnRound, pick_local
from node.round.report import RoundReport
from node.round.retry import STORE_RETRY, retry_store
from node.round.errors import NotActive, StateError
from node.round.state import ChainIdentity, NodeState, OwnBatch, load_state, save_state
from node.round.view import SwarmView, check_chain
from node.sampling.intake import intake_round
from node.sampling.selection import UniformSelection, VerifiedHistorySelection, select_external
from node.sampling.verdicts import IntakeReport
from node.sampling.verify import RoundContext
from node.storage import ContentStore
from node.tasks import TaskItem, build_messages, derive_tasks, get_preset

log = logging.getLogger(__name__)

# Verdicts that will not change if the batch is fetched again: judged, or not judgeable here.
_FINAL_SKIPS = frozenset({RejectReason.UNKNOWN_SCHEMA, RejectReason.UNKNOWN_PRESET})


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


class SwarmNode:
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
            genesis_block_hash=self.deployment.block_hash,
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

    # ------------------------------------------------------------------ step 1-2: produce

    def tasks(self, round: int) -> list[TaskItem]:
        tasks = derive_tasks(round_seed(self._genesis_seed, round), self.address, self.preset)
        return tasks[: self.settings.tasks_per_round or len(tasks)]

    def produce(self, round: int) -> RoundReport:
        """Generates, stores and publishes this node's batch of ``round`` (once, ever)."""
        state, report = self._state(), self.report(round)
        with report.timings.measure("chain"):
            on_chain = self.client.publication(round, self.address)
        record = state.batches.get(round)
        if record is None and on_chain is not None:
            record = self._adopt_published(round, on_chain, report)
        if record is None:
            record = self._build_and_store(round, report)
        elif round not in self._own:
            self._own_from_store(round, record.digest, report)
        if on_chain is not None and on_chain != record.digest:
            log.error(
                "%s: the chain holds 0x%s for round %d, not our recorded 0x%s",
                self.address,
                on_chain.hex(),
                round,
                record.digest.hex(),
            )
        if on_chain is not None or record.published:
            report.published = "already"
            self._mark_published(record, report)
        else:
            self._publish(record, report)
        own = self._own.get(round)
        report.local_reward = own.mean_reward if own else None
        return report

    def generate_batch(self, round: int, report: RoundReport) -> BatchToPublish:
        """Derives the round's tasks, samples G completions each, scores, signs and encodes."""
        tasks = self.tasks(round)
        with report.timings.measure("generate"):
            texts = self.learner.generate(
                tasks,
                self.settings.group_size,
                seed=derived_seed("gen", self.settings.seed, self.address, round),
            )
        with report.timings.measure("sign"):
            return self.build_batch(round, tasks, texts)

    def _build_and_store(self, round: int, report: RoundReport) -> OwnBatch:
        batch = self.generate_batch(round, report)
        with report.timings.measure("store"):
            retry_store(
                lambda: self.store.put(batch.data, pin=True),
                what=f"storing round {round}",
                policy=self.settings.store_retry,
            )
        record = OwnBatch(
            round=round,
            digest=batch.digest,
            groups=batch.groups,
            completions=batch.completions,
            reward_sum=batch.reward_sum,
        )
        self._state().batches[round] = record
        self._save_state(report)
        return record

    def build_batch(
        self, round: int, tasks: Sequence[TaskItem], texts: Sequence[Sequence[str]]
    ) -> BatchToPublish:
        """Scores, signs and encodes this node's batch (and remembers it for training)."""
        encoded = assemble_batch(
            account=self.client.sender.account,  # type: ignore[union-attr]
            domain=self.client.domain,
            round=round,
            preset=self.preset.name,
            model=ModelInfo(name=self.learner.model_name, adapter_digest=None),
            tasks=tasks,
            texts=texts,
            compress=self.settings.compress,
        )
        groups = encoded.batch.body.groups
        self._own[round] = OwnRound(
            tasks=tuple(tasks),
            texts=tuple(tuple(c.text for c in g.completions) for g in groups),
            rewards=tuple(tuple(c.reward for c in g.completions) for g in groups),
        )
        return BatchToPublish(
            encoded.data,
            encoded.digest,
            encoded.groups,
            encoded.completions,
            encoded.reward_sum_milli,
        )

    def _adopt_published(self, round: int, digest: bytes, report: RoundReport) -> OwnBatch:
        """The chain has our batch but the state file does not (it was lost): take the chain's."""
        log.warning(
            "%s: round %d was published by an earlier run; not publishing again",
            self.address,
            round,
        )
        own = self._own_from_store(round, digest, report)
        groups = len(own.tasks) if own else 0
        completions = sum(len(t) for t in own.texts) if own else 0
        record = OwnBatch(
            round=round,
            digest=digest,
            groups=groups,
            completions=completions,
            reward_sum=0,
            published=True,
        )
        self._state().batches[round] = record
        return record

    def _own_from_store(self, round: int, digest: bytes, report: RoundReport) -> OwnRound | None:
        """Reloads our own batch of ``round`` (after a restart) for training."""
        try:
            with report.timings.measure("store"):
                data = retry_store(
                    lambda: self.store.get(digest),
                    what=f"reading our round {round}",
                    policy=self.settings.store_retry,
                )
            batch = decode_batch(data)
        except Exception as exc:  # our own bytes: any failure only costs the local groups
            log.warning(
                "%s: cannot reload our batch of round %d (%s); training without it",
                self.address,
                round,
                exc,
            )
            return None
        own = OwnRound.from_batch(batch, self.tasks(round))
        self._own[round] = own
        return own

    def _publish(self, record: OwnBatch, report: RoundReport) -> None:
        try:
            with report.timings.measure("chain"):
                self.client.publish_rollouts(
                    record.round,
                    record.digest,
                    record.groups,
                    record.completions,
                    record.reward_sum,
                )
            report.published = "yes"
        except SwarmCoordinatorAlreadyPublished:
            report.published = "already"
        except SwarmCoordinatorWrongRound as exc:
            report.published = "late"
            log.warning(
                "%s: round %d closed before our batch was ready (%s)",
                self.address,
                record.round,
                exc,
            )
            return
        self._mark_published(record, report)

    def _mark_published(self, record: OwnBatch, report: RoundReport) -> None:
        if not record.published:
            self._state().batches[record.round] = record.model_copy(update={"published": True})
            self._save_state(report)

    # ------------------------------------------------------------------ steps 3-6: complete

    def everyone_published(self, round: int) -> bool:
        """Refreshes the view; True when every other active peer has published ``round``."""
        self.view.refresh(self.client.block_number())
        return self.view.everyone_published(round, besides=self.address)

    def complete(self, round: int) -> RoundReport:
        """Collects, verifies, trains, attests, settles and checkpoints ``round``."""
        report = self.report(round)
        with report.timings.measure("chain"):
            complete = self.everyone_published(round)
        intake = self.collect(round, report)
        if self.trained_round is None or self.trained_round < round:
            self.train(round, intake, report)
        self.attest(round, complete=complete, report=report)
        if self.settings.settle_disputes:
            self.settle(report)
        self.finish(round, report)
        return report

    def collect(self, round: int, report: RoundReport) -> IntakeReport:
        """Fetches and judges the not-yet-judged commitments of ``round`` and its grace window."""
        state = self._state()
        first = max(0, round - self.params.grace_rounds)
        new = [
            c
            for c in self.view.commitments(range(first, round + 1))
            if c.peer != self.address and not state.has_seen(c.round, c.peer)
        ]
        combined = IntakeReport(round=round)
        with report.timings.measure("verify"):
            for r in sorted({c.round for c in new}):
                combined.verdicts += self._intake(r, [c for c in new if c.round == r]).verdicts
        for verdict in combined.verdicts:
            final = verdict.attestable or verdict.reason in _FINAL_SKIPS
            if final:
                state.mark_seen(verdict.round, verdict.peer)
            attestation = verdict.attestation()
            if attestation is not None:
                state.pending.append(attestation)
                if attestation.is_flag:
                    state.flagged.append((attestation.round, attestation.subject))
                    report.flagged += 1
        if isinstance(self.strategy, VerifiedHistorySelection):
            self.strategy.record(combined.verdicts)
        report.verified_peers += sum(1 for v in combined.verdicts if v.accepted)
        report.rejections.update(combined.rejections)
        return combined

    def _intake(self, round: int, commitments: list[RolloutsPublished]) -> IntakeReport:
        context = RoundContext(self.client.domain, round, round_seed(self._genesis_seed, round))
        return intake_round(
            commitments,
            self.store,
            context,
            own_address=self.address,
            per_fetch_timeout=self.settings.fetch_timeout,
            total_budget=self.settings.fetch_budget,
        )

    def train(self, round: int, intake: IntakeReport, report: RoundReport) -> None:
        """One GRPO step on up to I local and J verified external groups."""
        rng = random.Random(derived_seed("select", self.settings.seed, self.address, round))
        own = self._own.get(round)
        local = pick_local(own, self.settings.local_groups, rng) if own else []
        external = select_external(intake.groups, self.settings.external_groups, rng, self.strategy)
        groups = local + [
            ScoredGroup(build_messages(g.task), list(g.texts), list(g.rewards)) for g in external
        ]
        report.local_groups, report.external_groups = len(local), len(external)
        report.external_from.update(g.peer for g in external)
        if own is not None:
            report.local_reward = own.mean_reward
        if not groups:
            log.info("%s: round %d: nothing to train on", self.address, round)
            return
        with report.timings.measure("train"):
            metrics = self.learner.train(groups)
        report.trained = not metrics.skipped
        report.loss = metrics.loss
        self.trained_round = round

    def attest(self, round: int, *, complete: bool, report: RoundReport) -> None:
        """Sends the verdicts whose round can get no more commitments, in one transaction."""
        state = self._state()
        if not state.pending:
            return
        with report.timings.measure("chain"):
            next_round = self.client.peer_info(self.address).next_attest_round
            current = self.client.current_round()
        plan = plan_attestations(
            state.pending,
            next_round=next_round,
            current=current,
            window=self.params.attestation_window_rounds,
            final_round=round if complete else round - self.params.grace_rounds,
        )
        for item in plan.expired:
            log.warning(
                "%s: verdict on %s for round %d can no longer be attested",
                self.address,
                item.subject,
                item.round,
            )
        state.pending = plan.later
        if not plan.due:
            return
        try:
            with report.timings.measure("chain"):
                self.client.attest(plan.due)
            report.attested += len(plan.due)
        except ContractRevert as exc:  # retrying cannot help: say why, drop them, go on
            log.error("%s: %d attestations refused: %s", self.address, len(plan.due), exc)
        except ChainError:
            state.pending += plan.due  # kept for the retried round (the window permitting)
            raise

    def settle(self, report: RoundReport) -> None:
        """Settles the disputes this node flagged once their attestation window has closed."""
        state = self._state()
        with report.timings.measure("chain"):
            current = self.client.current_round()
        remaining = []
        for round, subject in state.flagged:
            if current <= round + self.params.attestation_window_rounds:
                remaining.append((round, subject))
                continue
            with report.timings.measure("chain"):
                if not self.client.verdict(round, subject).settled:
                    try:
                        self.client.settle(round, subject)
                        report.settled += 1
                    except (SwarmCoordinatorAlreadySettled, SwarmCoordinatorNoDispute):
                        pass
        state.flagged = remaining

    def finish(self, round: int, report: RoundReport) -> None:
        """Checkpoints the adapter (if it learned this round) and the protocol state."""
        state = self._state()
        with report.timings.measure("checkpoint"):
            if self.trained_round == round:
                self.learner.save(self.state_dir, round, {"peer": self.address})
            state.last_round = round
            oldest = round - self.params.attestation_window_rounds - 1
            state.prune(oldest)
            self.view.forget_before(oldest)
            self._own = {
                r: own for r, own in self._own.items() if r >= round - self.params.grace_rounds
            }
            save_state(self.state_dir, state)
        self._reports.pop(round, None)

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

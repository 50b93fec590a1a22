"""One swarm node: the steps of a round (docs/DESIGN.md, "Node round loop"), restart-safe.

    produce(r)        derive tasks, generate G completions each, score, sign, store, publish
                      (node/round/produce.py)
    (the caller waits for peers: :mod:`node.round.loop` in real time, the local swarm in lockstep)
    complete(r)       gather commitments of r and its grace window, fetch, verify, filter;
                      train on I local + J external groups; attest; settle; checkpoint

Restart safety: a round whose training reached the checkpoint is not trained again; verdicts wait
in the state file until attested; attestations below the contract's ``nextAttestRound`` are known
to be done (publishing once is the producer's part).
"""

from __future__ import annotations

import logging
import random

from node.chain.errors import ChainError, ContractRevert
from node.chain.events import RolloutsPublished
from node.chain.reverts import (
    SwarmCoordinatorAlreadySettled,
    SwarmCoordinatorNoDispute,
)
from node.chain.rounds import round_seed
from node.policy.grpo import ScoredGroup
from node.rollouts.reasons import RejectReason
from node.round.attestations import plan_attestations
from node.round.learner import derived_seed
from node.round.own import pick_local
from node.round.produce import Producer
from node.round.report import RoundReport
from node.round.state import save_state
from node.sampling.intake import intake_round
from node.sampling.selection import VerifiedHistorySelection, select_external
from node.sampling.verdicts import IntakeReport
from node.sampling.verify import RoundContext
from node.tasks import build_messages

log = logging.getLogger(__name__)


# Verdicts that will not change if the batch is fetched again: judged, or not judgeable here.
_FINAL_SKIPS = frozenset({RejectReason.UNKNOWN_SCHEMA, RejectReason.UNKNOWN_PRESET})
# Batches that did not arrive: the node connects to their publishers' stores again.
_NOT_FETCHED = frozenset({RejectReason.FETCH_TIMEOUT, RejectReason.FETCH_FAILED})

__all__ = ["SwarmNode"]


class SwarmNode(Producer):
    """One peer: produce (steps 1-2, :class:`Producer`), then complete (steps 3-6)."""

    # ------------------------------------------------------------------ steps 3-6: complete

    def everyone_published(self, round: int) -> bool:
        """Refreshes the view; True when every other active peer has published ``round``."""
        self.exchange.refresh()
        return self.exchange.everyone_published(round, besides=self.address)

    def complete(self, round: int) -> RoundReport:
        """Collects, verifies, trains, attests, settles and checkpoints ``round``."""
        report = self.report(round)
        with report.timings.measure("chain"):
            complete = self.everyone_published(round)
        intake = self.collect(round, report)
        if self.trained_round is None or self.trained_round < round:
            self.train(round, intake, report)
        self.attest(round, complete=complete, report=report)
        if self.config.round.settle_disputes:
            self.settle(report)
        self.finish(round, report)
        return report

    def collect(self, round: int, report: RoundReport) -> IntakeReport:
        """Fetches and judges the not-yet-judged commitments of ``round`` and its grace window."""
        state = self._state()
        first = max(0, round - self.params.grace_rounds)
        new = [
            c
            for c in self.exchange.commitments(range(first, round + 1))
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
        context = RoundContext(self.exchange.domain, round, round_seed(self.genesis_seed, round))
        self.exchange.reach(c.peer for c in commitments)
        intake = intake_round(
            commitments,
            self.exchange.store,
            context,
            own_address=self.address,
            per_fetch_timeout=self.config.storage.fetch_timeout,
            total_budget=self.config.storage.fetch_budget,
        )
        self.exchange.unreached(v.peer for v in intake.verdicts if v.reason in _NOT_FETCHED)
        return intake

    def train(self, round: int, intake: IntakeReport, report: RoundReport) -> None:
        """One GRPO step on up to I local and J verified external groups."""
        rng = random.Random(derived_seed("select", self.config.training.seed, self.address, round))
        own = self._own.get(round)
        local = pick_local(own, self.config.sampling.local_groups, rng) if own else []
        external = select_external(
            intake.groups, self.config.sampling.external_groups, rng, self.strategy
        )
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
            next_round = self.exchange.next_attest_round(self.address)
            current = self.exchange.current_round()
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
                self.exchange.attest(plan.due)
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
            current = self.exchange.current_round()
        remaining = []
        for round, subject in state.flagged:
            if current <= round + self.params.attestation_window_rounds:
                remaining.append((round, subject))
                continue
            with report.timings.measure("chain"):
                if not self.exchange.is_settled(round, subject):
                    self._settle_one(round, subject, report)
        state.flagged = remaining

    def _settle_one(self, round: int, subject: str, report: RoundReport) -> None:
        """Settles one dispute; another peer settling it first is not an error, and a refusal
        costs only this dispute (anyone may still settle it), never the node's round."""
        try:
            self.exchange.settle(round, subject)
            report.settled += 1
        except (SwarmCoordinatorAlreadySettled, SwarmCoordinatorNoDispute):
            pass
        except ContractRevert as exc:
            log.warning("%s: settling round %d of %s refused: %s", self.address, round, subject, exc)

    def finish(self, round: int, report: RoundReport) -> None:
        """Checkpoints the adapter (if it learned this round) and the protocol state."""
        state = self._state()
        with report.timings.measure("checkpoint"):
            if self.trained_round == round:
                self.learner.save(self.state_dir, round, {"peer": self.address})
            state.last_round = round
            oldest = round - self.params.attestation_window_rounds - 1
            state.prune(oldest)
            self.exchange.forget_before(oldest)
            self._own = {
                r: own for r, own in self._own.items() if r >= round - self.params.grace_rounds
            }
            save_state(self.state_dir, state)
        self._reports.pop(round, None)

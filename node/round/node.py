"""One swarm node: the steps of a round (docs/DESIGN.md, "Node round loop"), restart-safe.

    produce(r)   derive tasks, generate G completions each, score, sign, store, publish
                 (node/round/produce.py)
    (the caller waits for peers: :mod:`node.round.loop` in real time, the local swarm in lockstep)
    complete(r)  1. collect: fetch and verify a random sample of the new commitments of r and its
                    grace window (what training needs), caching every verdict by (round, subject)
                 2. judge: for each round in its commit phase, seal it if nobody has, find this
                    node's committee seats, judge those batches (from the cache, else fetch them),
                    save the ballot with a fresh salt, then commit it
                 3. reveal the saved ballots whose reveal phase has come
                 4. settle the batches this node flagged once settleable, resolve its flags and
                    report the agreements with upheld flags
                 5. train on I local + J external groups; checkpoint; prune old state

Every decision is a pure function of :mod:`node.round.ballots`; this module carries them out.
Restart safety: a round whose training reached the checkpoint is not trained again; a ballot is
saved before it is committed and the chain's ballot slot says whether it was (a saved ballot whose
commitment is on-chain is never committed again, and is revealed with its saved salt); a verdict,
once cached, is never fetched again. A contract refusal of one judging step costs that step only.
"""

from __future__ import annotations

import logging
import random

from node.chain.committee import ballot_commitment, new_salt
from node.chain.errors import ContractRevert
from node.chain.events import RolloutsPublished
from node.chain.models import Rules, SealInfo, VerdictItem, VerdictState
from node.chain.units import format_eth
from node.chain.reverts import (
    SwarmCoordinatorAlreadyPosted,
    SwarmCoordinatorAlreadySealed,
    SwarmCoordinatorBeaconPending,
    SwarmCoordinatorAlreadySettled,
    SwarmCoordinatorNoDispute,
    SwarmCoordinatorNoFlag,
)
from node.chain.rounds import round_seed
from node.policy.grpo import ScoredGroup
from node.provenance.peer_check import BatchProvenance, NamedAdapter, Recomputer, kept_margins
from node.provenance.publish import release_adapter
from node.rollouts.reasons import RejectReason
from node.round.ballots import (
    agreement_reports,
    ballot_items,
    ballot_slot,
    limit_flags,
    plan_reveals,
    sample,
    seats,
    settleable,
)
from node.round.learner import derived_seed
from node.round.provenance_duty import CommitteeSeat, amended, duties, evidence_of, rechecks
from node.round.own import pick_local
from node.round.produce import Producer
from node.round.report import RoundReport
from node.round.sample_stats import cut_rate, format_rate, own_samples
from node.round.state import Ballot, Judged, save_state
from node.sampling.intake import intake_round
from node.sampling.selection import VerifiedHistorySelection, select_external
from node.sampling.verdicts import IntakeReport, PeerVerdict, VerifiedGroup
from node.sampling.verify import RoundContext
from node.storage import StoreError
from node.tasks import build_messages

log = logging.getLogger(__name__)


# Verdicts that will not change if the batch is fetched again: judged, or not judgeable here.
_FINAL_SKIPS = frozenset(
    {RejectReason.UNKNOWN_SCHEMA, RejectReason.UNKNOWN_PRESET, RejectReason.UNKNOWN_MODEL}
)
# Batches that did not arrive: the node connects to their publishers' stores again.
_NOT_FETCHED = frozenset({RejectReason.FETCH_TIMEOUT, RejectReason.FETCH_FAILED})

__all__ = ["SwarmNode"]


class SwarmNode(Producer):
    """One peer: produce (steps 1-2, :class:`Producer`), then complete (the judging round)."""

    def everyone_published(self, round: int) -> bool:
        """Refreshes the view; True when every other active peer has published ``round``."""
        self.exchange.refresh()
        return self.exchange.everyone_published(round, besides=self.address)

    def complete(self, round: int) -> RoundReport:
        """Collects, judges, reveals, settles, trains and checkpoints ``round``."""
        report = self.report(round)
        with report.timings.measure("chain"):
            self.exchange.refresh()
        intake = self.collect(round, report)
        with report.timings.measure("chain"):
            current = self.exchange.current_round()
        self.judge(current, report)
        self.reveal(current, report)
        if self.config.round.settle_disputes:
            self.settle(current, report)
        if self.trained_round is None or self.trained_round < round:
            self.train(round, intake, report)
        self.finish(round, report)
        return report

    # ------------------------------------------------------------------ 1. collect

    def collect(self, round: int, report: RoundReport) -> IntakeReport:
        """Fetches and judges a random sample (``sampling.fetch_peers``) of the not-yet-judged
        commitments of ``round`` and its grace window: the batches training may draw from."""
        state = self._state()
        first = max(0, round - self.phases.grace_rounds)
        new = [
            c
            for c in self.exchange.commitments(range(first, round + 1))
            if c.peer != self.address and state.verdict(c.round, c.peer) is None
        ]
        rng = random.Random(derived_seed("fetch", self.config.training.seed, self.address, round))
        intake = self.judge_batches(sample(new, self.config.sampling.fetch_peers, rng), report)
        if isinstance(self.strategy, VerifiedHistorySelection):
            self.strategy.record(intake.verdicts)
        report.verified_peers += sum(1 for v in intake.verdicts if v.accepted)
        report.rejections.update(intake.rejections)
        return intake

    def judge_batches(
        self, commitments: list[RolloutsPublished], report: RoundReport
    ) -> IntakeReport:
        """Fetches and verifies ``commitments``; caches each final verdict in the state file."""
        combined = IntakeReport(round=max((c.round for c in commitments), default=0))
        with report.timings.measure("verify"):
            for r in sorted({c.round for c in commitments}):
                batch = [c for c in commitments if c.round == r]
                combined.verdicts += self._intake(r, batch).verdicts
        for verdict in combined.verdicts:
            judged = _judged(verdict)
            if judged is not None:
                self._state().record(verdict.round, verdict.peer, judged)
        self._keep_groups(combined.verdicts)
        return combined

    def _keep_groups(self, verdicts: list[PeerVerdict]) -> None:
        """Keeps the groups of the batches whose committed bytes were verified here."""
        for verdict in verdicts:
            if verdict.attestable:
                self._verified[(verdict.round, verdict.peer)] = verdict.groups

    def _intake(self, round: int, commitments: list[RolloutsPublished]) -> IntakeReport:
        tasks_per_round, group_size = self.batch_shape(round)
        context = RoundContext(
            self.exchange.domain,
            round,
            round_seed(self.genesis_seed, round),
            tasks_per_round=tasks_per_round,
            group_size=group_size,
            tokens=self.learner.peer_ids,
            bases=frozenset({self.learner.base_digest}),
        )
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

    # ------------------------------------------------------------------ 2. judge

    def judge(self, current: int, report: RoundReport) -> None:
        """Draws, saves and commits a ballot on every round whose commit phase holds ``current``
        (a saved ballot that is not on-chain yet is committed; one that is, never again)."""
        state = self._state()
        for d in self.phases.committing_rounds(current):
            if d in state.abstained:
                continue
            ballot = state.ballots.get(d) or self._draw_ballot(d, current, report)
            if ballot is not None and not ballot.committed:
                self._commit(ballot, report)

    def _draw_ballot(self, round: int, current: int, report: RoundReport) -> Ballot | None:
        """This node's ballot on ``round``, saved; None when it has nothing to commit (yet)."""
        state = self._state()
        seal = self._sealed(round, report)
        if seal is None:
            return None
        with report.timings.measure("chain"):
            weight = self.exchange.weight_at(self.address, round)
            rules = self.exchange.rules_at(round)
        commitments = [c for c in self.exchange.commitments([round]) if c.peer != self.address]
        subjects = (c.peer for c in commitments)
        seated = seats(seal, rules.committee_size, self.address, weight, subjects)
        unjudged = [
            c for c in commitments if c.peer in seated and state.verdict(round, c.peer) is None
        ]
        if unjudged:
            self.judge_batches(unjudged, report)
        if seated and self.config.sampling.check_provenance:
            seat = CommitteeSeat(round, seal, rules, list(seated), commitments)
            if round not in state.recomputed:
                self._recompute_seats(seat, report)
                state.recomputed.append(round)
            if current < self.phases.commit_phase(round)[-1]:
                self._save_state(report)
                return None  # the ballot waits for the other seats' evidence
            self._recheck_evidence(seat, report)
        items = self._bonded(ballot_items(seated, state.judged.get(round, {})), round, rules)
        if not items:
            if not seated or current >= self.phases.commit_phase(round)[-1]:
                state.abstained.append(round)  # no seat, or nothing judgeable before it closes
            return None
        ballot = Ballot(round=round, items=items, salt=new_salt())
        state.ballots[round] = ballot
        self._save_state(report)  # before the commitment: without the salt it cannot be revealed
        return ballot

    def _recompute_seats(self, seat: CommitteeSeat, report: RoundReport) -> None:
        """Recomputes the chosen groups of each batch this seat recomputes, amends its verdicts
        and posts the evidence against those that fail."""
        chosen = duties(
            seat.seal.beacon,
            seat.rules.committee_size,
            self.address,
            seat.seated,
            seat.rules.tasks_per_round,
        )
        for subject, outcome, _ in self._recompute(seat, chosen, report):
            found = evidence_of(outcome, chosen[subject])
            if found is not None:
                self._post_evidence(seat.round, subject, found)

    def _recheck_evidence(self, seat: CommitteeSeat, report: RoundReport) -> None:
        """Recomputes the groups other recomputing seats posted evidence on, before committing."""
        wanted = rechecks(
            self.exchange.evidence(seat.round),
            seat.seal.beacon,
            seat.rules.committee_size,
            self.address,
            seat.seated,
            seat.rules.tasks_per_round,
        )
        for subject, outcome, _ in self._recompute(seat, wanted, report):
            log.info(
                "%s: re-checked the evidence on %s's round %d: %s",
                self.address,
                subject,
                seat.round,
                "it holds" if outcome.reason is not None else "it does not hold here",
            )

    def _recompute(
        self, seat: CommitteeSeat, wanted: dict[str, list[int]], report: RoundReport
    ) -> list[tuple[str, BatchProvenance, dict[int, VerifiedGroup]]]:
        """Recomputes the groups of ``wanted`` (from the batches verified here, fetched again
        after a restart) and records each amended verdict; what was checked, by subject."""
        state = self._state()
        refetch = [
            c for c in seat.commitments
            if c.peer in wanted and (seat.round, c.peer) not in self._verified
        ]  # fmt: skip
        if refetch:
            with report.timings.measure("verify"):
                self._keep_groups(self._intake(seat.round, refetch).verdicts)
        named = self._named_adapters(seat.round)
        recomputer = self._recomputer()
        seed = round_seed(self.genesis_seed, seat.round)
        done = []
        for subject, indexes in sorted(wanted.items()):
            judged = state.verdict(seat.round, subject)
            verified = self._verified.get((seat.round, subject), ())
            groups = {g.task.index: g for g in verified if g.task.index in indexes}
            if judged is None or not groups:
                continue  # not judged here, or invalid already: nothing to recompute
            with report.timings.measure("provenance"):
                outcome = recomputer.check_chosen(list(groups.values()), seed, named=named)
            self._log_provenance(outcome, report)
            state.record(seat.round, subject, amended(judged, outcome, groups))
            done.append((subject, outcome, groups))
        return done

    def _recomputer(self) -> Recomputer:
        pool, tokenizer = self.learner.pool, self.learner.tokenizer
        return Recomputer(pool, tokenizer, self.exchange.store, kept_margins(pool))

    def _named_adapters(self, round: int) -> list[NamedAdapter]:
        """The adapters this node knows were named in ``round`` and the round before: by the
        batches it verified and by its own, with their chain positions in ``round``."""
        state = self._state()
        positions = {c.peer: c.position for c in self.exchange.commitments([round])}
        named = []
        for r in (round - 1, round):
            adapters = {p: j.adapter for p, j in state.judged.get(r, {}).items()}
            own = state.batches.get(r)
            if own is not None:
                adapters[self.address] = own.adapter
            named += [
                NamedAdapter(r, peer, "0x" + a.hex(), positions.get(peer) if r == round else None)
                for peer, a in adapters.items()
                if a is not None
            ]
        return named

    def _post_evidence(self, round: int, subject: str, found: tuple[int, int, int]) -> None:
        group, completion, token = found
        try:
            self.exchange.post_evidence(round, subject, group, completion, token)
        except SwarmCoordinatorAlreadyPosted:
            pass  # posted before a restart
        except ContractRevert as exc:
            log.error(
                "%s: evidence on %s's round %d refused: %s", self.address, subject, round, exc
            )
            return
        log.warning(
            "%s: posted provenance evidence on %s's round %d: group %d, completion %d, token %d",
            self.address,
            subject,
            round,
            group,
            completion,
            token,
        )

    def _bonded(self, items: list[VerdictItem], round: int, rules: Rules) -> list[VerdictItem]:
        """``items`` without the flags this node's free stake cannot bond in full at reveal time
        (the flags of its committed, unrevealed ballots will lock bonds first)."""
        bondable = self.exchange.bondable_flags(self.address, rules.flag_bond)
        if bondable is None:
            return items
        pending = sum(
            i.is_flag for b in self._state().ballots.values() if not b.revealed for i in b.items
        )
        left = max(0, bondable - pending)
        kept = limit_flags(items, left)
        dropped = len(items) - len(kept)
        if dropped:
            log.warning(
                "%s: %d flag(s) on round %d not cast: the free stake bonds only %d more flag(s) of "
                "%s; add stake (swarm add-stake) to flag every invalid batch",
                self.address,
                dropped,
                round,
                left,
                format_eth(rules.flag_bond),
            )
        return kept

    def _sealed(self, round: int, report: RoundReport) -> SealInfo | None:
        """``round``'s seal, sealing it first when nobody has (another node first is fine)."""
        with report.timings.measure("chain"):
            seal = self.exchange.seal(round)
            if seal is not None:
                return seal
            try:
                self.exchange.seal_round(round)
            except (SwarmCoordinatorAlreadySealed, SwarmCoordinatorBeaconPending):
                pass  # another node sealed, or fixed the beacon block in this very block
            except ContractRevert as exc:
                log.warning("%s: sealing round %d refused: %s", self.address, round, exc)
                return None
            return self.exchange.seal(round)

    def _commit(self, ballot: Ballot, report: RoundReport) -> None:
        state, round = self._state(), ballot.round
        commitment = ballot_commitment(self.address, round, ballot.items, ballot.salt)
        with report.timings.measure("chain"):
            slot = ballot_slot(ballot, commitment, self.exchange.ballot(round, self.address))
            if slot == "empty":
                try:
                    self.exchange.commit_verdicts(round, commitment)
                except ContractRevert as exc:
                    log.error("%s: committing on round %d refused: %s", self.address, round, exc)
                    self._drop_ballot(round)
                    return
                report.committed += len(ballot.items)
            elif slot == "other":
                log.error(
                    "%s: the chain holds another commitment on round %d than the saved ballot "
                    "(an earlier run's, whose ballot was lost): it cannot be revealed",
                    self.address,
                    round,
                )
                self._drop_ballot(round)
                return
        state.ballots[round] = ballot.model_copy(update={"committed": True})
        self._save_state(report)

    def _drop_ballot(self, round: int) -> None:
        state = self._state()
        state.ballots.pop(round, None)
        if round not in state.abstained:
            state.abstained.append(round)

    # ------------------------------------------------------------------ 3. reveal

    def reveal(self, current: int, report: RoundReport) -> None:
        """Reveals each committed ballot whose reveal phase holds ``current``; drops (and logs)
        those whose reveal phase passed without one."""
        state = self._state()
        plan = plan_reveals(list(state.ballots.values()), self.phases, current)
        for ballot in plan.expired:
            log.warning(
                "%s: the ballot on round %d was never revealed and no longer can be",
                self.address,
                ballot.round,
            )
            state.ballots.pop(ballot.round, None)
        for ballot in plan.due:
            self._reveal(ballot, report)

    def _reveal(self, ballot: Ballot, report: RoundReport) -> None:
        state, round = self._state(), ballot.round
        commitment = ballot_commitment(self.address, round, ballot.items, ballot.salt)
        with report.timings.measure("chain"):
            slot = ballot_slot(ballot, commitment, self.exchange.ballot(round, self.address))
            if slot == "committed":
                try:
                    self.exchange.reveal_verdicts(round, ballot.items, ballot.salt)
                except ContractRevert as exc:
                    log.error("%s: revealing round %d refused: %s", self.address, round, exc)
                    self._drop_ballot(round)
                    return
                report.revealed += len(ballot.items)
            elif slot != "revealed":
                log.error("%s: no commitment of round %d to reveal", self.address, round)
                self._drop_ballot(round)
                return
        flags = [(round, i.subject) for i in ballot.items if i.is_flag]
        state.flags += [f for f in flags if f not in state.flags]
        report.flagged += len(flags)
        state.ballots[round] = ballot.model_copy(update={"revealed": True})
        self._save_state(report)

    # ------------------------------------------------------------------ 4. settle

    def settle(self, current: int, report: RoundReport) -> None:
        """Settles, resolves and reports on each flag of this node whose round is settleable."""
        state = self._state()
        due, _ = settleable(state.flags, self.phases, current)
        for round, subject in due:
            try:
                with report.timings.measure("chain"):
                    self._settle_flag(round, subject, report)
            except ContractRevert as exc:  # anyone may still do it; it costs only this flag
                log.warning(
                    "%s: settling round %d of %s refused: %s", self.address, round, subject, exc
                )
            state.flags.remove((round, subject))

    def _settle_flag(self, round: int, subject: str, report: RoundReport) -> None:
        """Settles (if still open), resolves this node's flag, reports agreements when upheld."""
        verdict = self.exchange.verdict(round, subject)
        if verdict.state is VerdictState.PUBLISHED:
            try:
                self.exchange.settle(round, subject)
                report.settled += 1
            except (SwarmCoordinatorAlreadySettled, SwarmCoordinatorNoDispute):
                pass
            verdict = self.exchange.verdict(round, subject)
        if not verdict.settled:
            return  # no counted flag on it: nothing to settle or resolve
        try:
            self.exchange.resolve_flag(round, subject, self.address)
        except SwarmCoordinatorNoFlag:
            pass  # resolved by someone else, or this node's item did not count
        if verdict.state is VerdictState.UPHELD:
            self._report_agreements(round, subject, report)

    def _report_agreements(self, round: int, subject: str, report: RoundReport) -> None:
        """Reports every counted agreement with ``subject``'s upheld batch (each refusal costs
        that report only: another reporter may have been first)."""
        reveals = self.exchange.reveals(round)
        found = agreement_reports(
            {a: b.items for a, b in reveals.items()},
            {a: b.counted for a, b in reveals.items()},
            subject,
            self.address,
        )
        for agreement in found:
            try:
                self.exchange.report_agreement(
                    round, agreement.attester, agreement.items, agreement.index
                )
                report.reported += 1
            except ContractRevert as exc:
                log.warning(
                    "%s: reporting %s's agreement on round %d refused: %s",
                    self.address,
                    agreement.attester,
                    round,
                    exc,
                )

    # ------------------------------------------------------------------ 5. train, checkpoint

    def train(self, round: int, intake: IntakeReport, report: RoundReport) -> None:
        """One GRPO step on up to I local and J verified external groups."""
        rng = random.Random(derived_seed("select", self.config.training.seed, self.address, round))
        own = self._own.get(round)
        local = pick_local(own, self.config.sampling.local_groups, rng) if own else []
        wanted = self.config.sampling.external_groups
        if self.config.sampling.check_provenance:
            ordered = select_external(intake.groups, 2 * wanted, rng, self.strategy)
            external = self._sampled_as_named(ordered, wanted, intake, report)
        else:
            external = select_external(intake.groups, wanted, rng, self.strategy)
        groups = local + [self._peer_group(g) for g in external]
        report.local_groups, report.external_groups = len(local), len(external)
        report.external_from.update(g.peer for g in external)
        if own is not None:
            report.local_reward = own.mean_reward
            samples = own_samples(own)
            report.samples = samples
            report.cut_rate, report.format_rate = cut_rate(samples), format_rate(samples)
        if not groups:
            log.info("%s: round %d: nothing to train on", self.address, round)
            return
        with report.timings.measure("train"):
            metrics = self.learner.train(groups)
        report.record_step(metrics)
        self.trained_round = round

    def _sampled_as_named(
        self,
        candidates: list[VerifiedGroup],
        wanted: int,
        intake: IntakeReport,
        report: RoundReport,
    ) -> list[VerifiedGroup]:
        """Up to ``wanted`` of ``candidates`` (in their order), each recomputed under its
        publisher's adapter and trimmed to the completions that passed; a batch that fails is
        not trained on (docs/PROTOCOL.md, "Seeded sampler"). The store's fetch budget bounds
        the time spent."""
        recomputer = self._recomputer()
        seeds = {r: round_seed(self.genesis_seed, r) for r in {g.round for g in candidates}}
        with report.timings.measure("provenance"):
            kept, outcomes = recomputer.passing(
                candidates,
                wanted,
                seeds,
                others=intake.groups,
                budget=self.config.storage.fetch_budget,
            )
        for outcome in outcomes:
            self._log_provenance(outcome, report)
        return kept

    def _log_provenance(self, outcome: BatchProvenance, report: RoundReport) -> None:
        result = outcome.result
        if outcome.reason is not None:
            report.rejections[outcome.reason.value] += 1
            log.warning(
                "%s: not training on %s's round %d: %s: %s",
                self.address,
                outcome.peer,
                outcome.round,
                outcome.reason.value,
                outcome.detail,
            )
        if result is not None:
            report.provenance_checked += len(result.checked)
            report.provenance_excluded += len(result.excluded)
            report.record_margin(result.worst_margin)

    def _peer_group(self, group: VerifiedGroup) -> ScoredGroup:
        """A peer's verified group as trained on: its ids where they are this node's tokenizer's."""
        completions = self.learner.peer_ids.trained(group.completions, group.tokenizer)
        return ScoredGroup(
            build_messages(group.task), completions, list(group.rewards), origin="peer"
        )

    def finish(self, round: int, report: RoundReport) -> None:
        """Checkpoints the adapter (if it learned this round) and the protocol state."""
        state = self._state()
        with report.timings.measure("checkpoint"):
            if self.trained_round == round and self.saves_adapter:
                self.learner.save(self.state_dir, round, {"peer": self.address})
            state.last_round = round
            oldest = round - self.phases.judging_rounds
            self._release_adapters(oldest)
            state.prune(oldest)
            self.exchange.forget_before(oldest)
            self._own = {
                r: own for r, own in self._own.items() if r >= round - self.phases.grace_rounds
            }
            self._verified = {k: v for k, v in self._verified.items() if k[0] >= oldest}
            kept_margins(self.learner.pool).forget_before(oldest)
            save_state(self.state_dir, state)
        self._reports.pop(round, None)

    def _release_adapters(self, oldest: int) -> None:
        """Unpins the adapters of our batches before round ``oldest``: nobody judges them now.
        A store error costs only the space (logged)."""
        batches = self._state().batches
        keep = [b.adapter for r, b in batches.items() if r >= oldest and b.adapter is not None]
        for r, batch in sorted(batches.items()):
            if r >= oldest or batch.adapter is None:
                continue
            try:
                release_adapter(self.exchange.store, batch.adapter, keep=keep)
            except StoreError as exc:
                log.warning("%s: releasing the adapter of round %d: %s", self.address, r, exc)
                return


def _judged(verdict: PeerVerdict) -> Judged | None:
    """What to cache of a verdict: the counts of a judged batch (and the adapter it names), an
    empty verdict for one this node cannot judge, None for one to fetch again (it did not
    arrive)."""
    if verdict.attestable:
        model = verdict.groups[0].model if verdict.groups else None
        return Judged(
            checked=verdict.checked,
            agreed=verdict.agreed,
            verified_reward_sum=verdict.verified_reward_milli,
            adapter=None if model is None else model.adapter,
        )
    if verdict.reason in _FINAL_SKIPS:
        return Judged()
    return None

"""Steps 1-2 of a round: this node's own batch, built, stored and published exactly once.

The batch of a round is recorded (digest) in the state file before it is published, and the chain
is asked before publishing: a restarted node publishes the same bytes, or nothing when the chain
already has them, and reloads its own batch from the store to train on.
"""

from __future__ import annotations

import logging
from collections.abc import Sequence

from node.chain.reverts import (
    SwarmCoordinatorAlreadyPublished,
    SwarmCoordinatorWrongRound,
)
from node.chain.rounds import round_seed
from node.learning_data import GeneratedGroup
from node.provenance.model_info import lora_shape
from node.provenance.publish import publish_adapter
from node.provenance.seeds import SAMPLER_ID, batch_seeds
from node.rollouts import BatchBody, BatchRejected, decode_batch
from node.rollouts.assemble import assemble_batch
from node.rollouts.schema import ModelInfo
from node.round.core import NodeCore
from node.round.errors import BatchShapeError
from node.round.own import BatchToPublish, OwnRound
from node.round.report import RoundReport
from node.round.retry import retry_store
from node.round.state import OwnBatch
from node.sampling.shape import check_shape
from node.tasks import TaskItem

log = logging.getLogger(__name__)


class Producer(NodeCore):
    """``produce(round)``: derive tasks, generate, score, sign, store, publish."""

    def produce(self, round: int) -> RoundReport:
        """Generates, stores and publishes this node's batch of ``round`` (once, ever)."""
        state, report = self._state(), self.report(round)
        with report.timings.measure("chain"):
            on_chain = self.exchange.publication(round, self.address)
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
        """Derives the round's n tasks, samples G completions each, scores, signs and encodes."""
        tasks = self.tasks(round)
        _, group_size = self.batch_shape(round)
        with report.timings.measure("generate"):
            seeds = batch_seeds(
                round_seed(self.genesis_seed, round),
                self.address,
                [task.index for task in tasks],
                group_size,
            )
            generated = self.learner.generate(tasks, group_size, seeds=seeds)
        with report.timings.measure("store"):
            model = self.model_info(self._publish_adapter(round))
        with report.timings.measure("sign"):
            return self.build_batch(round, tasks, generated, model)

    def _publish_adapter(self, round: int) -> bytes:
        """Stores and pins the adapter the round's samples came from; returns its address."""
        state = self.learner.adapter_state()
        return retry_store(
            lambda: publish_adapter(self.exchange.store, state),
            what=f"storing the adapter of round {round}",
            policy=self.store_retry,
        )

    def model_info(self, adapter: bytes) -> ModelInfo:
        """What a batch says of the model that sampled it, ``adapter`` being its address."""
        learner = self.learner
        return ModelInfo(
            name=learner.model_name,
            base=learner.base_digest,
            adapter="0x" + adapter.hex(),
            lora=lora_shape(learner.lora),
            sampler=SAMPLER_ID,
            tokenizer=learner.peer_ids.digest,
        )

    def _build_and_store(self, round: int, report: RoundReport) -> OwnBatch:
        batch = self.generate_batch(round, report)
        with report.timings.measure("store"):
            retry_store(
                lambda: self.exchange.store.put(batch.data, pin=True),
                what=f"storing round {round}",
                policy=self.store_retry,
            )
        record = OwnBatch(
            round=round,
            digest=batch.digest,
            groups=batch.groups,
            completions=batch.completions,
            reward_sum=batch.reward_sum,
            adapter=batch.adapter,
        )
        self._state().batches[round] = record
        self._save_state(report)
        return record

    def build_batch(
        self,
        round: int,
        tasks: Sequence[TaskItem],
        generated: Sequence[GeneratedGroup],
        model: ModelInfo,
    ) -> BatchToPublish:
        """Scores, signs and encodes this node's batch (and remembers its samples for training)."""
        encoded = assemble_batch(
            account=self.account,
            domain=self.exchange.domain,
            round=round,
            preset=self.preset.name,
            model=model,
            tasks=tasks,
            samples=[g.completions for g in generated],
            compress=self.config.storage.compress,
        )
        _check_own_shape(encoded.batch.body, round, self.batch_shape(round))
        rewards = [[c.reward for c in g.completions] for g in encoded.batch.body.groups]
        self._own[round] = OwnRound.from_generated(tasks, generated, rewards)
        return BatchToPublish(
            encoded.data,
            encoded.digest,
            encoded.groups,
            encoded.completions,
            encoded.reward_sum_milli,
            bytes.fromhex(model.adapter[2:]),
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
                    lambda: self.exchange.store.get(digest),
                    what=f"reading our round {round}",
                    policy=self.store_retry,
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
        own = OwnRound.from_batch(batch, self.tasks(round), trained=self.learner.peer_ids.trained)
        self._own[round] = own
        return own

    def _publish(self, record: OwnBatch, report: RoundReport) -> None:
        try:
            with report.timings.measure("chain"):
                self.exchange.publish(record)
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


def _check_own_shape(body: BatchBody, round: int, shape: tuple[int, int]) -> None:
    """Peers flag a batch of another shape: never publish one (a bug here, if it happens)."""
    try:
        check_shape(body, *shape)
    except BatchRejected as exc:
        raise BatchShapeError(f"our batch of round {round} would be flagged: {exc}") from None

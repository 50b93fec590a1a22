"""Building a node's own batch: score its completions with the task verifier, sign, encode.

The producer's half of the data plane (the receiver's half is ``node.sampling``): given the round's
derived tasks and the completions the policy sampled for each (text, why it ended, and the sampled
ids and log-probs), it scores every completion under the preset's rule, fills a ``BatchBody``,
signs it and returns the stored bytes with the values ``publishRollouts`` commits on-chain.
"""

from __future__ import annotations

import math
from collections.abc import Sequence
from dataclasses import dataclass

from eth_account.signers.local import LocalAccount

from node.chain.eip712 import Domain
from node.learning_data import GeneratedCompletion
from node.rollouts.codec import encode_batch
from node.rollouts.digest import batch_digest
from node.rollouts.schema import (
    BatchBody,
    Completion,
    Group,
    ModelInfo,
    SignedBatch,
    TaskRecord,
    TaskSource,
)
from node.rollouts.signing import sign_batch
from node.tasks import TaskItem, generator_id, score_completion


@dataclass(frozen=True)
class EncodedBatch:
    """A signed batch, its stored bytes, and what goes on-chain about it."""

    batch: SignedBatch
    data: bytes
    digest: bytes

    @property
    def groups(self) -> int:
        return len(self.batch.body.groups)

    @property
    def completions(self) -> int:
        return self.batch.body.completion_count

    @property
    def reward_sum_milli(self) -> int:
        return self.batch.body.reward_sum_milli


def batch_completion(task: TaskItem, sample: GeneratedCompletion) -> Completion:
    """One completion as the batch records it, scored under the task's rule, with its token ids
    and their log-probs (a log-prob that is not finite is stored as the lowest a float allows:
    the schema takes no infinities, and the value is only a weight)."""
    ids = list(sample.token_ids)
    if sample.logprobs is None or len(sample.logprobs) != len(ids):
        raise ValueError("a published completion needs one log-prob per sampled token id")
    logprobs = [round_logprob(x) for x in sample.logprobs]
    return Completion(
        text=sample.text,
        reward=score_completion(task, sample.text, finish_reason=sample.finish_reason),
        finish_reason=sample.finish_reason,
        token_ids=ids,
        logprobs=logprobs,
    )


LOWEST_LOGPROB = -1e9
"""What a log-prob that is not a finite number is stored as."""


def round_logprob(value: float) -> float:
    """A sampler's log-prob as a batch stores it: 6 decimals (a float32's precision), ``<= 0``."""
    value = float(value)
    if not math.isfinite(value):
        return LOWEST_LOGPROB
    return min(0.0, round(value, 6)) + 0.0  # + 0.0 turns -0.0 into 0.0


def score_group(task: TaskItem, samples: Sequence[GeneratedCompletion]) -> Group:
    """One group: the task as the batch records it and each completion with its reward."""
    return Group(
        task=TaskRecord(
            dataset=task.dataset, index=task.index, question=task.question, answer=task.answer
        ),
        completions=[batch_completion(task, sample) for sample in samples],
    )


def assemble_batch(
    *,
    account: LocalAccount,
    domain: Domain,
    round: int,
    preset: str,
    model: ModelInfo,
    tasks: Sequence[TaskItem],
    samples: Sequence[Sequence[GeneratedCompletion]],
    compress: bool = False,
) -> EncodedBatch:
    """Scores ``samples[i]`` against ``tasks[i]``, signs the body as ``account`` and encodes it."""
    if len(tasks) != len(samples):
        raise ValueError(f"{len(tasks)} tasks but {len(samples)} groups of completions")
    body = BatchBody(
        chain_id=domain.chain_id,
        coordinator=domain.verifying_contract,
        round=round,
        peer=account.address,
        model=model,
        tasks=TaskSource(preset=preset, generator=generator_id()),
        groups=[
            score_group(task, group) for task, group in zip(tasks, samples)
        ],
    )
    batch = sign_batch(body, account, domain)
    data = encode_batch(batch, compress=compress)
    return EncodedBatch(batch=batch, data=data, digest=batch_digest(data))

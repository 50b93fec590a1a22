"""Building a node's own batch: score its completions with the task verifier, sign, encode.

The producer's half of the data plane (the receiver's half is ``node.sampling``): given the round's
derived tasks and the texts the policy generated for each (with why each ended, where known), it
scores every completion under the preset's rule, fills a ``BatchBody``, signs it and returns the
stored bytes with the values ``publishRollouts`` commits on-chain.
"""

from __future__ import annotations

from collections.abc import Sequence
from dataclasses import dataclass

from eth_account.signers.local import LocalAccount

from node.chain.eip712 import Domain
from node.learning_data import FinishReason
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


Reasons = Sequence[FinishReason | None] | None
"""Why each completion of a group ended; None where no reason is known for any of them."""


def score_group(task: TaskItem, texts: Sequence[str], *, finish_reasons: Reasons) -> Group:
    """One group: the task as the batch records it and each text with its verified reward."""
    reasons = [None] * len(texts) if finish_reasons is None else list(finish_reasons)
    if len(reasons) != len(texts):
        raise ValueError(f"{len(texts)} texts but {len(reasons)} finish reasons")
    return Group(
        task=TaskRecord(
            dataset=task.dataset, index=task.index, question=task.question, answer=task.answer
        ),
        completions=[
            Completion(text=text, reward=score_completion(task, text, finish_reason=reason))
            for text, reason in zip(texts, reasons)
        ],
    )


def assemble_batch(
    *,
    account: LocalAccount,
    domain: Domain,
    round: int,
    preset: str,
    model: ModelInfo,
    tasks: Sequence[TaskItem],
    texts: Sequence[Sequence[str]],
    finish_reasons: Sequence[Reasons] | None,
    compress: bool = False,
) -> EncodedBatch:
    """Scores ``texts[i]`` against ``tasks[i]``, signs the body as ``account`` and encodes it.

    ``finish_reasons[i]`` says why each of ``texts[i]`` ended; None where unknown.
    """
    if len(tasks) != len(texts):
        raise ValueError(f"{len(tasks)} tasks but {len(texts)} groups of texts")
    reasons = [None] * len(texts) if finish_reasons is None else list(finish_reasons)
    if len(reasons) != len(texts):
        raise ValueError(f"{len(texts)} groups of texts but {len(reasons)} of finish reasons")
    body = BatchBody(
        chain_id=domain.chain_id,
        coordinator=domain.verifying_contract,
        round=round,
        peer=account.address,
        model=model,
        tasks=TaskSource(preset=preset, generator=generator_id()),
        groups=[
            score_group(task, group, finish_reasons=why)
            for task, group, why in zip(tasks, texts, reasons)
        ],
    )
    batch = sign_batch(body, account, domain)
    data = encode_batch(batch, compress=compress)
    return EncodedBatch(batch=batch, data=data, digest=batch_digest(data))

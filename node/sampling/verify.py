"""The checks of one peer's batch, in order, against its on-chain commitment and our own verifier.

1. the bytes hash to the committed digest (else the store or the network lied: not attestable);
2. size, canonical encoding and schema (``decode_batch``); committed bytes over the 1 MiB limit
   (fetched up to ``MAX_FETCH_BYTES``) are the peer's provable fault: ``too_large``;
3. the EIP-712 signature is the publishing peer's, in this chain's and coordinator's domain;
4. round and peer in the body are the commitment's;
5. group, completion and reward-sum counts are the ones committed on-chain;
6. the round's shape (``node.sampling.shape``): one group per task 0..n-1, in order, G
   completions each;
7. the batch's base model (weights digest), tokenizer and sampler are ones this node has (else
   it could not recompute the samples: skipped); the preset and generator are known here, the preset derives at least n tasks, and every task
   is the one regenerated from the round seed for that peer (dataset, question and reference
   answer);
8. every completion's token ids, at most the preset's limit, are a sampling of its text
   (``node.sampling.tokens``: decoded where the tokenizer is this node's);
9. every claimed reward equals this node's own score (compared in milli-units, the on-chain unit).

A failure at 2-8 is the peer's fault and is attested as a flag over everything it committed (except
an unknown schema, model, preset or generator version: skipped, not judged); at 9 each
completion counts on its own, and groups with any mismatch are not kept. Nothing here raises
for any input bytes: every outcome is a :class:`PeerVerdict`.
"""

from __future__ import annotations

import hashlib
import logging
from collections.abc import Callable, Sequence
from dataclasses import dataclass

from node.chain.eip712 import Domain
from node.chain.events import RolloutsPublished
from node.chain.models import max_reward_milli
from node.provenance.seeds import SAMPLER_ID
from node.rollouts import BatchRejected, SignedBatch, decode_batch, recover_batch_signer
from node.rollouts.limits import MAX_BATCH_BYTES
from node.rollouts.reasons import RejectReason
from node.rollouts.schema import Group
from node.sampling.shape import check_round_rules, check_shape
from node.sampling.tokens import TokenCheck, check_tokens
from node.sampling.verdicts import PeerVerdict, VerifiedGroup, to_milli
from node.tasks import TaskError, TaskItem, derive_tasks, generator_id, get_preset, score_completion

log = logging.getLogger(__name__)

TaskDeriver = Callable[[bytes, str, str], Sequence[TaskItem]]

# A schema, preset or generator version this node does not know may be newer than this node, not
# wrong: such a batch is skipped and counted, but neither flagged nor agreed with.
_CANNOT_JUDGE = frozenset(
    {RejectReason.UNKNOWN_SCHEMA, RejectReason.UNKNOWN_PRESET, RejectReason.UNKNOWN_MODEL}
)


@dataclass(frozen=True)
class RoundContext:
    """What a verifier knows of the round independently of any peer: its seed, its rules of
    shape, n tasks per batch and G completions per task (ValueError outside the batch limits),
    this node's tokenizer, which counts and decodes the batches' token ids, and the weights
    digests of the base models it holds (``"0x"`` + hex), the ones whose batches it judges."""

    domain: Domain
    round: int
    round_seed: bytes
    tasks_per_round: int
    group_size: int
    tokens: TokenCheck
    bases: frozenset[str]
    max_batch_bytes: int = MAX_BATCH_BYTES

    def __post_init__(self) -> None:
        check_round_rules(self.tasks_per_round, self.group_size)


def derive_for_preset(round_seed: bytes, peer: str, preset_name: str) -> Sequence[TaskItem]:
    """The tasks ``peer`` must have answered in the round (raises TaskError for unknown presets)."""
    return derive_tasks(round_seed, peer, get_preset(preset_name))


def verify_batch(
    data: bytes,
    commitment: RolloutsPublished,
    context: RoundContext,
    *,
    derive: TaskDeriver = derive_for_preset,
) -> PeerVerdict:
    """Runs every check on one fetched batch; never raises for any ``data``."""
    if hashlib.sha256(data).digest() != commitment.digest:
        return _rejected(
            commitment, RejectReason.DIGEST_MISMATCH, "bytes do not hash to the digest"
        )
    try:
        batch = decode_batch(data, max_size=context.max_batch_bytes)
        _check_signature(batch, commitment, context)
        _check_body(batch, commitment, context)
        _check_model(batch, context)
        check_shape(batch.body, context.tasks_per_round, context.group_size)
        tasks = _expected_tasks(batch, commitment, context, derive)
        limit = get_preset(batch.body.tasks.preset).max_completion_tokens
        check_tokens(batch.body, limit, context.tokens)
        return _rescore(batch, commitment, tasks, context)
    except BatchRejected as rejection:
        if rejection.reason in _CANNOT_JUDGE:
            return _rejected(commitment, rejection.reason, rejection.detail)
        return _flagged(commitment, rejection.reason, rejection.detail)
    except Exception as exc:  # a verifier bug must not crash the node on a peer's data
        log.exception(
            "unexpected error verifying %s's batch of round %d", commitment.peer, commitment.round
        )
        return _rejected(commitment, RejectReason.VERIFIER_ERROR, f"{exc!r}"[:200])


def _check_signature(
    batch: SignedBatch, commitment: RolloutsPublished, context: RoundContext
) -> None:
    signer = recover_batch_signer(batch, context.domain)
    if signer != commitment.peer:
        raise BatchRejected(
            RejectReason.BAD_SIGNATURE, f"signed by {signer}, published by {commitment.peer}"
        )


def _check_body(batch: SignedBatch, commitment: RolloutsPublished, context: RoundContext) -> None:
    """Chain and coordinator were checked with the signature (the EIP-712 domain binds them)."""
    body = batch.body
    if not body.round == commitment.round == context.round:
        raise BatchRejected(
            RejectReason.WRONG_ROUND,
            f"round {body.round}, committed for {commitment.round}, verifying {context.round}",
        )
    if body.peer != commitment.peer:
        raise BatchRejected(
            RejectReason.WRONG_PEER, f"body names {body.peer}, published by {commitment.peer}"
        )
    completions, reward_sum = body.completion_count, body.reward_sum_milli
    committed = (commitment.groups, commitment.completions, commitment.reward_sum)
    if (len(body.groups), completions, reward_sum) != committed:
        raise BatchRejected(
            RejectReason.COMMITMENT_MISMATCH,
            f"batch holds {len(body.groups)} groups, {completions} completions, reward sum "
            f"{reward_sum}; the chain says {committed[0]}, {committed[1]}, {committed[2]}",
        )


def _check_model(batch: SignedBatch, context: RoundContext) -> None:
    model = batch.body.model
    if model.sampler != SAMPLER_ID:
        raise BatchRejected(
            RejectReason.UNKNOWN_MODEL, f"sampler {model.sampler!r} is not {SAMPLER_ID!r}"
        )
    if model.base not in context.bases:
        raise BatchRejected(
            RejectReason.UNKNOWN_MODEL,
            f"base model {model.name!r} ({model.base[:18]}...) is not one this node holds",
        )
    if model.tokenizer != context.tokens.digest:
        raise BatchRejected(
            RejectReason.UNKNOWN_MODEL,
            f"tokenizer {model.tokenizer[:18]}... is not this node's: it cannot encode the "
            "prompts as the sampler did",
        )


def _expected_tasks(
    batch: SignedBatch,
    commitment: RolloutsPublished,
    context: RoundContext,
    derive: TaskDeriver,
) -> Sequence[TaskItem]:
    source = batch.body.tasks
    if source.generator != generator_id():
        raise BatchRejected(
            RejectReason.UNKNOWN_PRESET,
            f"generator {source.generator!r} differs from this node's {generator_id()!r}",
        )
    try:
        tasks = derive(context.round_seed, commitment.peer, source.preset)
    except TaskError as exc:
        raise BatchRejected(RejectReason.UNKNOWN_PRESET, str(exc)) from None
    if len(tasks) < context.tasks_per_round:
        # Not provably the publisher's fault: the round's rules ask more tasks than the preset
        # holds, so no batch under it can be valid and an honest node publishes none. Skipped,
        # such a batch earns no verified reward and is never trained on.
        raise BatchRejected(
            RejectReason.UNKNOWN_PRESET,
            f"preset {source.preset!r} derives {len(tasks)} tasks per round; the round has "
            f"{context.tasks_per_round}",
        )
    for group in batch.body.groups:
        _check_task(group, tasks)
    return tasks


def _check_task(group: Group, tasks: Sequence[TaskItem]) -> None:
    """The shape check made ``group.task.index`` this group's position, below n."""
    record = group.task
    expected = tasks[record.index]
    same = (
        record.dataset == expected.dataset
        and record.question == expected.question
        and record.answer == expected.answer
    )
    if not same:
        raise BatchRejected(
            RejectReason.TASK_MISMATCH,
            f"task {record.index} is not the {expected.dataset} item derived for this peer",
        )


def _rescore(
    batch: SignedBatch,
    commitment: RolloutsPublished,
    tasks: Sequence[TaskItem],
    context: RoundContext,
) -> PeerVerdict:
    checked = agreed = verified_milli = 0
    kept: list[VerifiedGroup] = []
    for group in batch.body.groups:
        task = tasks[group.task.index]
        scores = tuple(
            score_completion(task, c.text, finish_reason=c.finish_reason)
            for c in group.completions
        )
        matches = [to_milli(c.reward) == to_milli(s) for c, s in zip(group.completions, scores)]
        checked += len(matches)
        agreed += sum(matches)
        verified_milli += sum(to_milli(s) for s in scores)
        if all(matches):
            kept.append(
                VerifiedGroup(
                    commitment.peer,
                    commitment.round,
                    task,
                    tuple(group.completions),
                    scores,
                    batch.body.model,
                )
            )
    _check_bound(verified_milli, context)
    reason = None if agreed == checked else RejectReason.REWARD_MISMATCH
    detail = "" if reason is None else f"{checked - agreed} of {checked} claimed rewards wrong"
    return PeerVerdict(
        peer=commitment.peer,
        round=commitment.round,
        digest=commitment.digest,
        reason=reason,
        detail=detail,
        attestable=True,
        checked=checked,
        agreed=agreed,
        verified_reward_milli=verified_milli,
        groups=tuple(kept),
    )


def _check_bound(verified_milli: int, context: RoundContext) -> None:
    """n * G scores in [0, 1] cannot sum outside [0, n * G * 1000]; if they ever do, that is a bug
    here, and raising makes it a ``verifier_error`` (never voted) instead of an inflated vote."""
    ceiling = max_reward_milli(context.tasks_per_round, context.group_size)
    if not 0 <= verified_milli <= ceiling:
        raise RuntimeError(f"verified reward {verified_milli} outside [0, {ceiling}]")


def _rejected(commitment: RolloutsPublished, reason: RejectReason, detail: str) -> PeerVerdict:
    """Not attestable: the bytes in hand are not provably the peer's."""
    return PeerVerdict(commitment.peer, commitment.round, commitment.digest, reason, detail)


def _flagged(commitment: RolloutsPublished, reason: RejectReason, detail: str) -> PeerVerdict:
    """The committed bytes are invalid: a flag over everything the peer committed."""
    return PeerVerdict(
        peer=commitment.peer,
        round=commitment.round,
        digest=commitment.digest,
        reason=reason,
        detail=detail,
        attestable=True,
        checked=max(1, commitment.completions),
        agreed=0,
    )

"""Why a batch was rejected: stable reason codes and the one exception that carries them.

Every stage that looks at another peer's batch (decoding here; fetching, signature, task and
reward checks in the intake stage) reports a failure as ``BatchRejected(reason, detail)``.
``reason`` is a :class:`RejectReason`, a ``StrEnum`` whose values are stable codes meant for
logs, metrics and the indexer: never rename one, only add. ``detail`` is free text for a human.
"""

from __future__ import annotations

from enum import StrEnum
from typing import Any


class RejectReason(StrEnum):
    """Stable codes for rejecting a peer's batch. The value is what gets logged."""

    # --- bytes -> document (node.rollouts.codec) ---
    #: The stored bytes, or what they decompress to, exceed the size limit (1 MiB). In intake,
    #: committed bytes up to ``MAX_FETCH_BYTES`` are read, so this is provable and flagged.
    TOO_LARGE = "too_large"
    #: The bytes start with the zstd magic but are not one valid, complete zstd frame.
    BAD_COMPRESSION = "bad_compression"
    #: Not strict JSON: invalid UTF-8, syntax, duplicate keys, NaN/Infinity, nesting too deep.
    BAD_JSON = "bad_json"
    #: ``body.schema`` is missing or names a schema this node does not speak.
    UNKNOWN_SCHEMA = "unknown_schema"
    #: Valid JSON that does not fit the ``swarm.rollouts/3`` schema (types, fields, limits).
    BAD_SCHEMA = "bad_schema"
    #: The groups of a batch do not all have the same number of completions (the document is
    #: malformed; a size other than the round's G is ``wrong_group_size``).
    GROUP_SIZE = "group_size"
    #: Valid content, but the bytes are not its canonical encoding.
    NOT_CANONICAL = "not_canonical"
    # --- signature (node.rollouts.signing) ---
    #: Malformed signature, or it does not recover to ``body.peer``.
    BAD_SIGNATURE = "bad_signature"
    #: ``body.chain_id`` is not the chain this node verifies for.
    WRONG_CHAIN = "wrong_chain"
    #: ``body.coordinator`` is not the coordinator this node verifies for.
    WRONG_COORDINATOR = "wrong_coordinator"
    # --- intake (fetching and checking a peer's publication) ---
    #: The fetched bytes do not hash to the digest committed on-chain.
    DIGEST_MISMATCH = "digest_mismatch"
    #: The batch could not be fetched in time.
    FETCH_TIMEOUT = "fetch_timeout"
    #: The batch could not be fetched (not found, store error, over ``MAX_FETCH_BYTES``).
    FETCH_FAILED = "fetch_failed"
    #: ``body.peer`` is not the peer that published the digest on-chain.
    WRONG_PEER = "wrong_peer"
    #: ``body.round`` is not the round the digest was published for.
    WRONG_ROUND = "wrong_round"
    #: ``body.tasks.preset`` (or its generator version) is not one this node knows, or it derives
    #: fewer tasks than the round's n (this node cannot say what the missing tasks are).
    UNKNOWN_PRESET = "unknown_preset"
    #: A group's task is not the one derived for (round seed, peer, index).
    TASK_MISMATCH = "task_mismatch"
    #: A claimed reward differs from the verifier's own score.
    REWARD_MISMATCH = "reward_mismatch"
    #: The on-chain commitment's counts (groups, completions, rewardSum) disagree with the batch.
    COMMITMENT_MISMATCH = "commitment_mismatch"
    #: The groups are not one per task of the round, tasks 0..n-1 in order (a subset of the
    #: tasks, a task repeated or out of range, groups out of order).
    BATCH_SHAPE = "batch_shape"
    #: The groups do not have the round's G completions each (padded or short groups).
    WRONG_GROUP_SIZE = "wrong_group_size"
    #: This node's verifier failed on the batch (a bug here, not provably the peer's fault).
    VERIFIER_ERROR = "verifier_error"
    # --- sampled tokens (node.sampling.tokens) ---
    #: The batch names no tokenizer, or a completion carries no token ids: nothing says how
    #: long it is in tokens. (``swarm.rollouts/2`` only: since ``/3`` the schema requires both.)
    MISSING_TOKEN_IDS = "missing_token_ids"
    #: A completion has more token ids than the preset's limit per completion (or, where its
    #: tokenizer is not this node's, a text longer than that many tokens can be).
    TOO_MANY_TOKENS = "too_many_tokens"
    #: A completion's token ids are not a sampling of its text that ends as its finish reason
    #: says (an id out of the vocabulary, a stop misplaced, missing or extra, or they decode to
    #: another text).
    TOKEN_MISMATCH = "token_mismatch"
    # --- the model (``swarm.rollouts/3``) ---
    #: ``body.model`` names a base model (weights digest) or a sampler this node does not have:
    #: it cannot recompute the samples, so it does not judge the batch.
    UNKNOWN_MODEL = "unknown_model"
    # --- provenance (node.provenance): recomputing the samples with the named adapter ---
    #: A recomputed completion is not the seeded sampler's pick under the batch's adapter,
    #: beyond the hard tolerance: it was not sampled from the model the batch names.
    PROVENANCE = "provenance"
    #: The adapter the batch names could not be fetched: the reward is forfeit, nothing is
    #: flagged (unavailability cannot be proven on-chain).
    ADAPTER_MISSING = "adapter_missing"
    #: The bytes at the adapter's address are not a ``swarm.adapter/1`` adapter of the LoRA
    #: shape the batch names over its base model, or another publisher named the same adapter
    #: in that round or the one before (a copy).
    ADAPTER_MISMATCH = "adapter_mismatch"


class BatchRejected(Exception):
    """A peer's batch was rejected; ``reason`` is a stable code, ``detail`` says what exactly."""

    def __init__(self, reason: RejectReason, detail: str = "") -> None:
        self.reason = RejectReason(reason)
        self.detail = detail
        super().__init__(f"{self.reason.value}: {detail}" if detail else self.reason.value)

    def __reduce__(self) -> tuple[Any, ...]:
        return (type(self), (self.reason, self.detail))


#: Recompute outcomes that prove a batch invalid: what it holds, with the adapter it names, shows
#: the fault (docs/PROTOCOL.md, "Who recomputes, and the tolerances"). A missing adapter does not:
#: unavailability cannot be proven.
PROVEN_BY_RECOMPUTE = frozenset({RejectReason.PROVENANCE, RejectReason.ADAPTER_MISMATCH})

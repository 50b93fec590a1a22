"""The rollout batch format ``swarm.rollouts/3``: schema, canonical bytes, signing, reject reasons.

A batch is what a peer publishes each round: its groups of completions for the round's tasks,
signed with EIP-712 and stored as canonical JSON (optionally zstd) under its SHA-256.
No torch, no transformers: verifiers and the indexer import this freely.

Modules, one concern each:

- ``limits``       the document's limits (counts, string lengths, bytes, JSON depth)
- ``reasons``      ``RejectReason`` (stable codes) and ``BatchRejected``
- ``schema``       strict pydantic models: ``SignedBatch``, ``BatchBody``, ``Group``, ...
- ``canonical``    ``canonical_json``: the one byte encoding of a value
- ``strict_json``  parsing untrusted bytes (duplicates, NaN, depth, UTF-8)
- ``codec``        ``encode_batch`` / ``decode_batch`` (size, zstd, JSON, schema, canonical form)
- ``signing``      ``body_hash``, ``sign_batch``, ``recover_batch_signer``, ``verify_batch_signature``
- ``digest``       ``batch_digest`` (SHA-256 of stored bytes) and ``0x`` hex helpers
- ``assemble``     a node's own batch: score, sign, encode (imports node.tasks; not re-exported here)
"""

from __future__ import annotations

from node.rollouts.canonical import canonical_json
from node.rollouts.codec import decode_batch, encode_batch
from node.rollouts.digest import batch_digest, hash_from_hex, hash_to_hex
from node.rollouts.limits import MAX_BATCH_BYTES, SCHEMA
from node.rollouts.reasons import BatchRejected, RejectReason
from node.rollouts.schema import (
    BatchBody,
    Completion,
    Group,
    ModelInfo,
    SignedBatch,
    TaskRecord,
    TaskSource,
)
from node.rollouts.signing import (
    body_hash,
    recover_batch_signer,
    sign_batch,
    verify_batch_signature,
)

__all__ = [
    "MAX_BATCH_BYTES",
    "SCHEMA",
    "BatchBody",
    "BatchRejected",
    "Completion",
    "Group",
    "ModelInfo",
    "RejectReason",
    "SignedBatch",
    "TaskRecord",
    "TaskSource",
    "batch_digest",
    "body_hash",
    "canonical_json",
    "decode_batch",
    "encode_batch",
    "hash_from_hex",
    "hash_to_hex",
    "recover_batch_signer",
    "sign_batch",
    "verify_batch_signature",
]

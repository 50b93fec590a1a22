"""Content-addressed storage: blobs addressed by SHA-256, fetched from stores never trusted.

A blob's address is the SHA-256 of its bytes: the same 32 bytes are the on-chain commitment
and, as CIDv1 (raw, sha2-256, base32), its IPFS address. Every ``get`` re-hashes what came back.
No torch, no transformers.

Modules, one concern each:

- ``errors``   the exception family (retryable: StoreUnavailable/StoreTimeout; not: NotFound,
               DigestMismatch, TooLarge, InvalidAddress, StoreRejected, BadManifest)
- ``base``     ``ContentStore`` (put/get/has/pin, endpoint/connect/sign), size caps, digest checks
- ``cid``      ``cid_from_digest`` / ``digest_from_cid``
- ``local``    ``LocalStore``: a sharded directory, atomic writes, many processes, pins, gc
- ``kubo``     ``KuboStore``: raw blocks through a Kubo daemon's RPC API
- ``chunked``  blobs over the block limit (adapters) as 1 MiB chunks and a manifest
- ``factory``  ``open_store(url_or_path)``
- ``endpoint`` a store endpoint announcement: its bytes, their validation (never trusted)
- ``endpoint_proof``  the libp2p key's signature that makes an announcement count
- ``announced`` which announcement counts, from the chain's events in order
"""

from __future__ import annotations

from node.storage.base import DEFAULT_MAX_BLOB_SIZE, ContentStore, sha256
from node.storage.cid import cid_from_digest, digest_from_cid
from node.storage.errors import (
    DigestMismatch,
    InvalidAddress,
    NotFound,
    PermanentStoreError,
    RetryableStoreError,
    StoreError,
    StoreRejected,
    StoreTimeout,
    StoreUnavailable,
    TooLarge,
)
from node.storage.factory import open_store
from node.storage.kubo import KuboStore
from node.storage.local import LocalStore

__all__ = [
    "DEFAULT_MAX_BLOB_SIZE",
    "ContentStore",
    "DigestMismatch",
    "InvalidAddress",
    "KuboStore",
    "LocalStore",
    "NotFound",
    "PermanentStoreError",
    "RetryableStoreError",
    "StoreError",
    "StoreRejected",
    "StoreTimeout",
    "StoreUnavailable",
    "TooLarge",
    "cid_from_digest",
    "digest_from_cid",
    "open_store",
    "sha256",
]

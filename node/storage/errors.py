"""The storage layer's one exception family.

StoreError                  anything that went wrong storing or fetching a blob
├── RetryableStoreError     transient: the same call may succeed later
│   └── StoreUnavailable    the backend is unreachable, answered 5xx, or broke off
│       └── StoreTimeout    no (complete) answer in time
└── PermanentStoreError     the same call fails the same way
    ├── NotFound            the store does not have the blob
    ├── DigestMismatch      the store returned bytes that do not hash to the digest asked for
    ├── TooLarge            the blob is over the size cap (on put or on get)
    ├── InvalidAddress      a malformed digest or CID (also a ValueError)
    ├── StoreRejected       the backend refused the request (HTTP 4xx, bad arguments)
    └── BadManifest         a chunked blob's manifest that is not one (node.storage.chunked)
"""

from __future__ import annotations

from typing import ClassVar


class StoreError(Exception):
    """Base of every error raised by ``node.storage``."""

    retryable: ClassVar[bool] = False


class RetryableStoreError(StoreError):
    """A transient failure: the same request may succeed later."""

    retryable = True


class StoreUnavailable(RetryableStoreError):
    """The backend could not be reached, failed (5xx) or broke off mid-answer."""


class StoreTimeout(StoreUnavailable):
    """The backend did not answer, or not completely, within the timeout."""


class PermanentStoreError(StoreError):
    """A failure that repeats if the same request is repeated."""


class NotFound(PermanentStoreError):
    """The store does not hold the blob."""


class DigestMismatch(PermanentStoreError):
    """The store returned (or computed) bytes that do not hash to the requested digest."""


class TooLarge(PermanentStoreError):
    """A blob is over the store's size cap."""


class InvalidAddress(PermanentStoreError, ValueError):
    """A digest that is not 32 bytes, or a CID that is not CIDv1/raw/sha2-256/base32."""


class StoreRejected(PermanentStoreError):
    """The backend refused the request itself (bad arguments, forbidden)."""


class BadManifest(PermanentStoreError):
    """A chunked blob's manifest that does not parse, or whose chunks do not add up to it."""

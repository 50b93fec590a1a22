"""The content-store interface: blobs addressed by their SHA-256 digest, never trusted.

    put(data, pin=False)     store bytes (and pin them, atomically with the store);
                             the 32-byte SHA-256 digest is their address
    get(digest, max_size=None) -> bytes
                             fetch; re-hashed here, DigestMismatch if the store lied
    has(digest) -> bool      whether the store holds it (locally, for a network store)
    pin(digest)              keep it through garbage collection
    unpin(digest)            let it go again (no error if it was not pinned)

Every store caps blob sizes on put and on get (``TooLarge``); the default is 1 MiB, the
protocol's batch limit. ``get(digest, max_size=n)`` reads up to ``n`` bytes instead, so that a
verifier can fetch a batch over the protocol's limit and prove, by its digest, that the peer
published it (node.sampling.fetch). Errors are the family in node.storage.errors.
"""

from __future__ import annotations

import hashlib
from abc import ABC, abstractmethod

from node.storage.endpoint import StoreEndpoint
from node.storage.errors import DigestMismatch, InvalidAddress, StoreRejected, TooLarge

#: Default size cap: docs/PROTOCOL.md's 1 MiB per batch (also Kubo's largest block without
#: ``--allow-big-block``).
DEFAULT_MAX_BLOB_SIZE = 1024 * 1024


def sha256(data: bytes) -> bytes:
    """The 32-byte SHA-256 digest: a blob's address."""
    return hashlib.sha256(data).digest()


def check_digest(digest: bytes) -> bytes:
    """``digest`` as bytes if it is 32 bytes long; InvalidAddress otherwise."""
    if not isinstance(digest, (bytes, bytearray, memoryview)) or len(digest) != 32:
        shown = len(digest) if isinstance(digest, (bytes, bytearray, memoryview)) else digest
        raise InvalidAddress(f"a digest is 32 bytes of SHA-256, got {shown!r}")
    return bytes(digest)


def verified(digest: bytes, data: bytes, *, source: str) -> bytes:
    """``data`` if it hashes to ``digest``; DigestMismatch naming ``source`` otherwise."""
    actual = sha256(data)
    if actual != digest:
        raise DigestMismatch(
            f"{source} returned {len(data)} bytes hashing to 0x{actual.hex()}, "
            f"not the requested 0x{digest.hex()}"
        )
    return data


class ContentStore(ABC):
    """A content-addressed blob store (local directory, IPFS, ...)."""

    max_blob_size: int = DEFAULT_MAX_BLOB_SIZE

    @abstractmethod
    def put(self, data: bytes, *, pin: bool = False) -> bytes:
        """Stores ``data`` (pinned if ``pin``); returns its SHA-256 digest. TooLarge over the cap.

        ``pin=True`` pins in the same step, so no garbage collection can come in between.
        """

    @abstractmethod
    def get(self, digest: bytes, *, max_size: int | None = None) -> bytes:
        """The bytes stored under ``digest``, re-hashed: NotFound, DigestMismatch, TooLarge.

        ``max_size`` is this read's cap (default: the store's ``max_blob_size``); a blob over it
        is TooLarge, after reading at most ``max_size + 1`` bytes.
        """

    @abstractmethod
    def has(self, digest: bytes) -> bool:
        """Whether the store holds ``digest`` (without fetching it from elsewhere)."""

    @abstractmethod
    def pin(self, digest: bytes) -> None:
        """Keeps ``digest`` through garbage collection. NotFound if the store cannot get it."""

    @abstractmethod
    def unpin(self, digest: bytes) -> None:
        """Lets ``digest`` be garbage-collected again (no error if it was not pinned)."""

    def endpoint(self) -> StoreEndpoint | None:
        """Where other hosts reach this store (a network store's peer id and addresses);
        None for a store only this host can read."""
        return None

    def connect(self, endpoint: StoreEndpoint) -> None:
        """Connects to a peer's store so that its blobs can be fetched (no-op where a store
        has no network)."""

    def sign(self, message: bytes) -> bytes:
        """The signature of ``message`` by the key of the store's libp2p peer id, as libp2p signs
        (over ``libp2p-key signed message:`` + ``message``): the proof that an endpoint
        announcement names this store's own peer id (node.storage.endpoint_proof).
        StoreRejected for a store that has no endpoint, hence no key."""
        raise StoreRejected(f"{type(self).__name__} has no libp2p key to sign with")

    def _read_cap(self, max_size: int | None) -> int:
        """The cap of one ``get``: ``max_size`` if given (at least 0), else ``max_blob_size``."""
        if max_size is None:
            return self.max_blob_size
        if isinstance(max_size, bool) or not isinstance(max_size, int) or max_size < 0:
            raise ValueError(f"max_size is a byte count of 0 or more, got {max_size!r}")
        return max_size

    def _blob_to_put(self, data: bytes) -> bytes:
        """``data`` as bytes, within the size cap (TooLarge otherwise)."""
        if not isinstance(data, (bytes, bytearray, memoryview)):
            raise TypeError(f"a blob is bytes, got {type(data).__name__}")
        if len(data) > self.max_blob_size:
            raise TooLarge(f"blob of {len(data)} bytes is over the {self.max_blob_size}-byte cap")
        return bytes(data)

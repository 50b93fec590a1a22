"""Blobs larger than a store's block limit, as chunks and a manifest (``swarm.chunks/1``).

Kubo keeps blocks of at most 1 MiB, the protocol's batch cap, and a LoRA adapter is ~20 MB.
``put_chunked`` cuts a blob into chunks of ``CHUNK_SIZE`` bytes (the last one shorter), stores
each, and stores a manifest naming them; the manifest's digest is the blob's address::

    canonical JSON of {"chunks": ["0x" + sha256 of chunk 0, ...], "format": "swarm.chunks/1",
                       "sha256": "0x" + sha256 of the whole blob, "size": bytes}

``get_chunked`` reads only that form: exact fields, as many chunks as ``size`` needs, a size
within the caller's cap (checked before any chunk is fetched), every chunk re-hashed by the
store, each chunk but the last exactly ``CHUNK_SIZE`` long, and the whole blob's SHA-256. Any
other manifest is ``BadManifest``; a whole blob that does not hash to it, ``DigestMismatch``.
"""

from __future__ import annotations

import json
import math
import re
from collections.abc import Iterator

from node.storage.base import DEFAULT_MAX_BLOB_SIZE, ContentStore, sha256
from node.storage.errors import BadManifest, DigestMismatch

MANIFEST_FORMAT = "swarm.chunks/1"
CHUNK_SIZE = DEFAULT_MAX_BLOB_SIZE
_HASH = re.compile(r"0x[0-9a-f]{64}")


def _manifest_bytes(fields: dict[str, object]) -> bytes:
    """The manifest's canonical JSON (ASCII strings and integers only: sorted keys, no spaces)."""
    return json.dumps(fields, sort_keys=True, separators=(",", ":")).encode()


def put_chunked(store: ContentStore, data: bytes, *, pin: bool = False) -> bytes:
    """Stores ``data`` as chunks and a manifest (each pinned if ``pin``); the manifest's digest."""
    chunks = [store.put(piece, pin=pin) for piece in _pieces(data)]
    manifest = {
        "chunks": ["0x" + digest.hex() for digest in chunks],
        "format": MANIFEST_FORMAT,
        "sha256": "0x" + sha256(data).hex(),
        "size": len(data),
    }
    return store.put(_manifest_bytes(manifest), pin=pin)


def get_chunked(store: ContentStore, manifest: bytes, *, max_size: int) -> bytes:
    """The blob whose manifest has digest ``manifest``, if at most ``max_size`` bytes."""
    size, whole, chunks = chunk_list(store, manifest, max_size=max_size)
    data = b"".join(_fetched(store, chunks, size))
    if sha256(data) != whole:
        raise DigestMismatch(f"the chunks of manifest 0x{manifest.hex()} do not hash to its sha256")
    return data


def chunk_list(store: ContentStore, manifest: bytes, *, max_size: int) -> tuple[int, bytes, list[bytes]]:
    """A manifest's blob size, whole-blob digest and chunk digests (to pin or unpin them)."""
    raw = store.get(manifest)
    try:
        fields = json.loads(raw)
    except (UnicodeDecodeError, json.JSONDecodeError):
        raise BadManifest(f"0x{manifest.hex()} is not a JSON manifest") from None
    if not isinstance(fields, dict) or set(fields) != {"chunks", "format", "sha256", "size"}:
        raise BadManifest(f"0x{manifest.hex()}: a manifest has exactly chunks, format, sha256, size")
    size, chunks, whole = fields["size"], fields["chunks"], fields["sha256"]
    if fields["format"] != MANIFEST_FORMAT or _manifest_bytes(fields) != raw:
        raise BadManifest(f"0x{manifest.hex()} is not a canonical {MANIFEST_FORMAT} manifest")
    if isinstance(size, bool) or not isinstance(size, int) or not 0 <= size <= max_size:
        raise BadManifest(f"0x{manifest.hex()}: size {size!r} is not within 0..{max_size}")
    hashes = [whole, *chunks] if isinstance(chunks, list) else None
    if hashes is None or not all(isinstance(h, str) and _HASH.fullmatch(h) for h in hashes):
        raise BadManifest(f"0x{manifest.hex()}: hashes must be 0x and 64 lower-case hex digits")
    if len(chunks) != math.ceil(size / CHUNK_SIZE):
        raise BadManifest(f"0x{manifest.hex()}: {len(chunks)} chunks cannot hold {size} bytes")
    return size, bytes.fromhex(whole[2:]), [bytes.fromhex(c[2:]) for c in chunks]


def _pieces(data: bytes) -> Iterator[bytes]:
    for start in range(0, len(data), CHUNK_SIZE):
        yield data[start : start + CHUNK_SIZE]


def _fetched(store: ContentStore, chunks: list[bytes], size: int) -> Iterator[bytes]:
    for index, digest in enumerate(chunks):
        expected = min(CHUNK_SIZE, size - index * CHUNK_SIZE)
        piece = store.get(digest, max_size=CHUNK_SIZE)
        if len(piece) != expected:
            raise BadManifest(f"chunk {index} has {len(piece)} bytes, the manifest needs {expected}")
        yield piece

"""Blobs over the block limit as chunks and a manifest, on a real local store and a real Kubo
daemon: round trips, pins, and every manifest that is not one refused before its chunks are
fetched."""

from __future__ import annotations

import json
import math
import os
from pathlib import Path

import pytest

from node.storage import LocalStore
from node.storage.base import sha256
from node.storage.chunked import CHUNK_SIZE, chunk_list, get_chunked, put_chunked
from node.storage.errors import BadManifest, DigestMismatch, NotFound

BLOB = os.urandom(2 * CHUNK_SIZE + 12345)


@pytest.fixture
def store(tmp_path: Path) -> LocalStore:
    return LocalStore(tmp_path / "store")


@pytest.mark.parametrize("size", [0, 1, CHUNK_SIZE, CHUNK_SIZE + 1, len(BLOB)])
def test_a_blob_of_any_size_round_trips(store: LocalStore, size: int) -> None:
    manifest = put_chunked(store, BLOB[:size])
    assert get_chunked(store, manifest, max_size=size) == BLOB[:size]
    length, whole, chunks = chunk_list(store, manifest, max_size=size)
    assert (length, whole, len(chunks)) == (size, sha256(BLOB[:size]), math.ceil(size / CHUNK_SIZE))


def test_pinned_chunks_and_manifest_survive_garbage_collection(store: LocalStore) -> None:
    kept = put_chunked(store, BLOB, pin=True)
    dropped = put_chunked(store, BLOB[::-1])
    assert store.gc(older_than=-1) == 4  # the unpinned manifest and its three chunks
    assert get_chunked(store, kept, max_size=len(BLOB)) == BLOB
    with pytest.raises(NotFound):
        get_chunked(store, dropped, max_size=len(BLOB))


def test_real_kubo_holds_a_blob_over_its_block_limit(kubo_daemon) -> None:  # type: ignore[no-untyped-def]
    store = kubo_daemon.store(timeout=30.0)
    manifest = put_chunked(store, BLOB, pin=True)
    assert get_chunked(store, manifest, max_size=len(BLOB)) == BLOB


def manifest_of(store: LocalStore, data: bytes) -> dict:  # type: ignore[type-arg]
    return json.loads(store.get(put_chunked(store, data)))


def stored(store: LocalStore, fields: object, *, spaced: bool = False) -> bytes:
    if spaced:
        return store.put(json.dumps(fields, sort_keys=True).encode())
    return store.put(json.dumps(fields, sort_keys=True, separators=(",", ":")).encode())


@pytest.mark.parametrize(
    ("change", "reason"),
    [
        (lambda m: {**m, "extra": 1}, "exactly chunks, format, sha256, size"),
        (lambda m: {**m, "format": "swarm.chunks/2"}, "not a canonical"),
        (lambda m: {**m, "size": 10**12}, "not within"),
        (lambda m: {**m, "size": True}, "not within"),
        (lambda m: {**m, "chunks": m["chunks"][:-1]}, "cannot hold"),
        (lambda m: {**m, "chunks": m["chunks"] + m["chunks"][:1]}, "cannot hold"),
        (lambda m: {**m, "chunks": [c.upper() for c in m["chunks"]]}, "lower-case hex"),
        (lambda m: [m], "exactly chunks"),
    ],
)
def test_a_manifest_that_is_not_one_is_refused(store: LocalStore, change, reason: str) -> None:  # type: ignore[no-untyped-def]
    digest = stored(store, change(manifest_of(store, BLOB)))
    with pytest.raises(BadManifest, match=reason):
        get_chunked(store, digest, max_size=len(BLOB))


def test_a_non_canonical_or_non_json_manifest_is_refused(store: LocalStore) -> None:
    with pytest.raises(BadManifest, match="not a canonical"):
        get_chunked(store, stored(store, manifest_of(store, BLOB), spaced=True), max_size=len(BLOB))
    with pytest.raises(BadManifest, match="not a JSON manifest"):
        get_chunked(store, store.put(b"\xff not json"), max_size=len(BLOB))


def test_the_size_cap_is_checked_before_any_chunk_is_fetched(tmp_path: Path) -> None:
    writer, reader = LocalStore(tmp_path / "a"), LocalStore(tmp_path / "b")
    manifest = put_chunked(writer, BLOB)
    reader.put(writer.get(manifest))  # the manifest alone: its chunks are nowhere in reader
    with pytest.raises(BadManifest, match="not within"):
        get_chunked(reader, manifest, max_size=len(BLOB) - 1)
    with pytest.raises(NotFound):
        get_chunked(reader, manifest, max_size=len(BLOB))


def test_chunks_that_do_not_add_up_are_refused(store: LocalStore) -> None:
    honest = manifest_of(store, BLOB)
    short = store.put(b"short")
    swapped = {**honest, "chunks": ["0x" + short.hex()] + honest["chunks"][1:]}
    with pytest.raises(BadManifest, match="chunk 0 has 5 bytes"):
        get_chunked(store, stored(store, swapped), max_size=len(BLOB))
    other = manifest_of(store, BLOB[::-1])
    lying = {**honest, "sha256": other["sha256"]}
    with pytest.raises(DigestMismatch, match="do not hash"):
        get_chunked(store, stored(store, lying), max_size=len(BLOB))

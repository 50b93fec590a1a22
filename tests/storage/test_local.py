"""LocalStore: round trips, caps, verification, pins and GC, leftovers, many processes at once."""

from __future__ import annotations

import multiprocessing
import os
import time
from pathlib import Path

import pytest

from node.storage import (
    ContentStore,
    DigestMismatch,
    InvalidAddress,
    LocalStore,
    NotFound,
    TooLarge,
    sha256,
)

HOUR = 3600.0


@pytest.fixture
def store(tmp_path: Path) -> LocalStore:
    return LocalStore(tmp_path / "store", max_blob_size=4096)


def age(store: LocalStore, digest: bytes, seconds: float) -> None:
    """Pretends the blob was last touched ``seconds`` ago."""
    then = time.time() - seconds
    os.utime(store.path_of(digest), (then, then))


def test_round_trip(store: LocalStore) -> None:
    assert isinstance(store, ContentStore)
    digest = store.put(b"hello world")
    assert digest == sha256(b"hello world")
    assert store.get(digest) == b"hello world"
    assert store.has(digest)
    path = store.path_of(digest)
    assert path.parent.name == digest.hex()[:2] and path.name == digest.hex()
    assert store.put(b"hello world") == digest  # idempotent
    assert store.get(store.put(b"")) == b""


def test_missing(store: LocalStore) -> None:
    digest = sha256(b"never stored")
    assert not store.has(digest)
    with pytest.raises(NotFound):
        store.get(digest)
    with pytest.raises(NotFound):
        store.pin(digest)


def test_bad_digest(store: LocalStore) -> None:
    for digest in (b"", bytes(31), "ab" * 32):
        with pytest.raises(InvalidAddress):
            store.get(digest)  # type: ignore[arg-type]


def test_size_caps(store: LocalStore) -> None:
    store.put(bytes(4096))
    with pytest.raises(TooLarge):
        store.put(bytes(4097))
    # A blob that got there another way is refused on read too.
    big = LocalStore(store.root, max_blob_size=10_000)
    digest = big.put(bytes(5000))
    with pytest.raises(TooLarge):
        store.get(digest)


def test_corrupted_blob_is_detected_and_repaired_by_put(store: LocalStore) -> None:
    digest = store.put(b"original")
    store.path_of(digest).write_bytes(b"bit rot")
    with pytest.raises(DigestMismatch):
        store.get(digest)
    assert store.put(b"original") == digest
    assert store.get(digest) == b"original"


def test_half_written_temp_file_is_ignored_and_collected(store: LocalStore) -> None:
    digest = sha256(b"complete")
    shard = store.path_of(digest).parent
    shard.mkdir(parents=True, exist_ok=True)
    leftover = shard / f".tmp-{digest.hex()[:16]}-killed"
    leftover.write_bytes(b"compl")  # a writer was killed here
    assert not store.has(digest)
    assert store.put(b"complete") == digest
    assert store.get(digest) == b"complete"
    then = time.time() - 2 * HOUR
    os.utime(leftover, (then, then))
    assert store.gc(older_than=HOUR) == 0  # temp files are not counted as blobs...
    assert not leftover.exists()  # ...but they are removed
    assert store.get(digest) == b"complete"


def test_gc_removes_old_unpinned_blobs_only(store: LocalStore) -> None:
    old, pinned, fresh = store.put(b"old"), store.put(b"pinned"), store.put(b"fresh")
    store.pin(pinned)
    assert store.is_pinned(pinned)
    for digest in (old, pinned):
        age(store, digest, 2 * HOUR)
    assert store.gc(older_than=HOUR) == 1
    assert not store.has(old)
    assert store.get(pinned) == b"pinned" and store.get(fresh) == b"fresh"
    store.unpin(pinned)
    age(store, pinned, 2 * HOUR)
    assert store.gc(older_than=HOUR) == 1
    assert not store.has(pinned)
    assert store.gc(older_than=0) == 1 and not store.has(fresh)


def test_put_refreshes_age(store: LocalStore) -> None:
    digest = store.put(b"again")
    age(store, digest, 2 * HOUR)
    store.put(b"again")
    assert store.gc(older_than=HOUR) == 0
    assert store.has(digest)


def _writer(root: str, worker: int, rounds: int) -> list[str]:
    """One process: puts shared and own blobs, reads everything back, runs gc now and then."""
    store = LocalStore(root, max_blob_size=1 << 20)
    problems = []
    for i in range(rounds):
        shared = f"shared blob {i}".encode() * 2000
        own = f"worker {worker} blob {i}".encode() * (1 + i)
        for data in (shared, own):
            digest = store.put(data)
            if store.get(digest) != data:
                problems.append(f"worker {worker}: blob {i} read back wrong")
        store.pin(store.put(b"pinned by everyone"))
        if i % 5 == 0:
            store.gc(older_than=HOUR)  # nothing is that old: must delete nothing
    return problems


def test_many_processes_at_once(tmp_path: Path) -> None:
    root = tmp_path / "shared-store"
    LocalStore(root)
    # spawn, not fork: by now the test process runs other threads (torch, HTTP servers, abandoned
    # fetches); a forked child can inherit a lock one of them held and hang (seen once in CI).
    context = multiprocessing.get_context("spawn")
    workers, rounds = 6, 25
    with context.Pool(workers) as pool:
        results = pool.starmap(_writer, [(str(root), w, rounds) for w in range(workers)])
    assert [problem for result in results for problem in result] == []
    store = LocalStore(root, max_blob_size=1 << 20)
    for i in range(rounds):
        assert store.get(sha256(f"shared blob {i}".encode() * 2000))
        for worker in range(workers):
            data = f"worker {worker} blob {i}".encode() * (1 + i)
            assert store.get(sha256(data)) == data
    leftovers = [p for p in (root / "blobs").rglob(".tmp-*")]
    assert leftovers == []
    blobs = [p for p in (root / "blobs").rglob("*") if p.is_file()]
    assert len(blobs) == rounds * (1 + workers) + 1


def _gc_loop(root: str, seconds: float) -> int:
    store = LocalStore(root)
    removed, deadline = 0, time.monotonic() + seconds
    while time.monotonic() < deadline:
        removed += store.gc(older_than=0)
    return removed


def test_pins_hold_against_a_concurrent_gc(tmp_path: Path) -> None:
    root = tmp_path / "gc-store"
    store = LocalStore(root)
    context = multiprocessing.get_context("spawn")  # see test_many_processes_at_once
    with context.Pool(1) as pool:
        collector = pool.apply_async(_gc_loop, (str(root), 1.0))
        pinned = []
        for i in range(100):
            pinned.append(store.put(f"keep {i}".encode(), pin=True))  # never collected
            store.put(f"drop {i}".encode())  # fair game
            time.sleep(0.005)
        assert collector.get(timeout=30) > 0
    for i, digest in enumerate(pinned):
        assert store.get(digest) == f"keep {i}".encode()

"""``get(digest, max_size=n)``: both stores read up to ``n`` bytes instead of their own cap, and
answer the same for blobs under, at and over it (a verifier reads a peer's oversized batch so that
its digest can prove the peer published it)."""

from __future__ import annotations

from collections.abc import Callable, Iterator
from dataclasses import dataclass
from pathlib import Path

import pytest

from node.storage import ContentStore, DigestMismatch, KuboStore, LocalStore, TooLarge, sha256
from tests.storage.fake_kubo import FakeKubo, raw_cid, running_fake_kubo

CAP = 1000  # each store's own cap here


@dataclass
class Holder:
    """A store with a small cap, and ways to place bigger blobs in its backend directly and to
    make the backend return other bytes."""

    store: ContentStore
    place: Callable[[bytes], bytes]
    corrupt: Callable[[bytes], None]


@pytest.fixture(params=["local", "kubo"])
def holder(request: pytest.FixtureRequest, tmp_path: Path) -> Iterator[Holder]:
    if request.param == "local":
        root = tmp_path / "store"
        local = LocalStore(root, max_blob_size=CAP)

        def place(data: bytes) -> bytes:
            return LocalStore(root, max_blob_size=len(data)).put(data)

        def corrupt(digest: bytes) -> None:
            path = local.path_of(digest)
            path.write_bytes(path.read_bytes()[:-1] + b"?")

        yield Holder(local, place, corrupt)
        return
    with running_fake_kubo() as kubo:
        yield Holder(KuboStore(kubo.url, timeout=5, max_blob_size=CAP), *_kubo_backend(kubo))


def _kubo_backend(kubo: FakeKubo) -> tuple[Callable[[bytes], bytes], Callable[[bytes], None]]:
    def place(data: bytes) -> bytes:  # a daemon started with --allow-big-block
        kubo.blocks[raw_cid(data)] = data
        return sha256(data)

    def corrupt(_digest: bytes) -> None:
        kubo.mode = "liar"

    return place, corrupt


def test_the_own_cap_applies_without_max_size(holder: Holder) -> None:
    digest = holder.place(bytes(CAP + 1))
    with pytest.raises(TooLarge, match=str(CAP)):
        holder.store.get(digest)


def test_a_larger_max_size_reads_the_blob(holder: Holder) -> None:
    data = bytes(range(256)) * 20  # 5,120 bytes
    digest = holder.place(data)
    assert holder.store.get(digest, max_size=len(data)) == data
    assert holder.store.get(digest, max_size=10 * len(data)) == data
    with pytest.raises(TooLarge, match=str(len(data) - 1)):
        holder.store.get(digest, max_size=len(data) - 1)


def test_a_smaller_max_size_also_binds(holder: Holder) -> None:
    digest = holder.place(b"twelve bytes")
    assert holder.store.get(digest, max_size=12) == b"twelve bytes"
    with pytest.raises(TooLarge):
        holder.store.get(digest, max_size=11)


def test_big_blobs_are_still_rehashed(holder: Holder) -> None:
    digest = holder.place(bytes(3 * CAP))
    holder.corrupt(digest)
    with pytest.raises(DigestMismatch):
        holder.store.get(digest, max_size=4 * CAP)


@pytest.mark.parametrize("bad", [-1, 1.5, "4096", True])
def test_a_bad_max_size_is_a_clear_error(holder: Holder, bad: object) -> None:
    digest = holder.place(b"x")
    with pytest.raises(ValueError, match="max_size is a byte count"):
        holder.store.get(digest, max_size=bad)  # type: ignore[arg-type]


BIG_CAP = 4 * 1024 * 1024  # the node's fetch cap (MAX_FETCH_BYTES)


@pytest.fixture(params=["local", "kubo"])
def big_capped(request: pytest.FixtureRequest, tmp_path: Path) -> Iterator[ContentStore]:
    if request.param == "local":
        yield LocalStore(tmp_path / "store", max_blob_size=BIG_CAP)
        return
    with running_fake_kubo() as kubo:
        yield KuboStore(kubo.url, timeout=5, max_blob_size=BIG_CAP)


def _peak_bytes(call: Callable[[], object]) -> int:
    import tracemalloc

    tracemalloc.start()
    try:
        call()
        return tracemalloc.get_traced_memory()[1]
    finally:
        tracemalloc.stop()


def test_a_small_blob_costs_memory_as_small_whatever_the_cap(big_capped: ContentStore) -> None:
    """The local store's read(cap + 1) allocated the cap: 4 MiB for a 1 KB fetch, 8 at once
    during intake. Every store's reads now grow with what arrives."""
    digest = big_capped.put(b"x" * 1000)
    _peak_bytes(lambda: big_capped.get(digest, max_size=BIG_CAP))  # warm: imports, connections
    assert _peak_bytes(lambda: big_capped.get(digest, max_size=BIG_CAP)) < 256 * 1024
    assert _peak_bytes(lambda: big_capped.has(digest)) < 256 * 1024

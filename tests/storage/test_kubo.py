"""KuboStore against a real HTTP server speaking Kubo's RPC API (tests/storage/fake_kubo.py),
and against a real Kubo daemon when SWARM_TEST_KUBO_API names one."""

from __future__ import annotations

import os
import time
import urllib.request
from collections.abc import Iterator

import pytest

from node.storage import (
    ContentStore,
    DigestMismatch,
    KuboStore,
    NotFound,
    StoreRejected,
    StoreTimeout,
    StoreUnavailable,
    TooLarge,
    cid_from_digest,
    sha256,
)
from node.storage.kubo import api_multiaddr
from tests.storage.fake_kubo import FakeKubo, raw_cid, running_fake_kubo

# node.storage.kubo silences this for the node; pytest resets warning filters per test.
pytestmark = pytest.mark.filterwarnings("ignore:The 'strict' parameter:FutureWarning")

EMPTY_BLOCK_CID = "bafkreihdwdcefgh4dqkjv67uzcmw7ojee6xedzdetojuzjevtenxquvyku"


@pytest.fixture
def kubo() -> Iterator[FakeKubo]:
    with running_fake_kubo() as fake:
        yield fake


@pytest.fixture
def store(kubo: FakeKubo) -> KuboStore:
    return KuboStore(kubo.url, timeout=2.0)


def test_round_trip(kubo: FakeKubo, store: KuboStore) -> None:
    assert isinstance(store, ContentStore)
    digest = store.put(b"hello world")
    assert digest == sha256(b"hello world")
    assert raw_cid(b"hello world") == cid_from_digest(digest) in kubo.blocks
    path, query = kubo.requests[-1]
    assert path == "/api/v0/block/put"
    assert query["cid-codec"] == ["raw"] and query["mhtype"] == ["sha2-256"]
    assert query["timeout"] == ["2000ms"]
    assert store.get(digest) == b"hello world"
    assert store.has(digest)
    assert kubo.requests[-1][1]["offline"] == ["true"]
    store.pin(digest)
    assert cid_from_digest(digest) in kubo.pins


def test_empty_block_cid(kubo: FakeKubo, store: KuboStore) -> None:
    assert store.get(store.put(b"")) == b""
    assert EMPTY_BLOCK_CID in kubo.blocks


def test_put_and_pin(kubo: FakeKubo, store: KuboStore) -> None:
    digest = store.put(b"keep me", pin=True)
    assert kubo.requests[-1][1]["pin"] == ["true"]
    assert cid_from_digest(digest) in kubo.pins


def test_binary_and_largest_blocks(store: KuboStore) -> None:
    data = bytes(range(256)) * 4096  # 1 MiB, every byte value, CRLFs and "--" included
    assert len(data) == store.max_blob_size
    assert store.get(store.put(data)) == data


def test_missing_block(store: KuboStore) -> None:
    digest = sha256(b"nobody stored this")
    assert not store.has(digest)
    with pytest.raises(NotFound):
        store.get(digest)
    with pytest.raises(NotFound):
        store.pin(digest)


def test_put_over_the_cap(kubo: FakeKubo) -> None:
    store = KuboStore(kubo.url, max_blob_size=100)
    with pytest.raises(TooLarge):
        store.put(bytes(101))
    assert kubo.requests == []  # refused before sending


def test_daemon_refuses_big_blocks(kubo: FakeKubo) -> None:
    store = KuboStore(kubo.url, max_blob_size=2 * 1024 * 1024)
    with pytest.raises(TooLarge, match="over 1MiB"):
        store.put(bytes(1024 * 1024 + 1))


def test_liar_is_caught(kubo: FakeKubo, store: KuboStore) -> None:
    digest = store.put(b"the truth")
    kubo.mode = "liar"
    with pytest.raises(DigestMismatch):
        store.get(digest)


def test_wrong_key_is_caught(kubo: FakeKubo, store: KuboStore) -> None:
    kubo.mode = "wrong_key"
    with pytest.raises(DigestMismatch, match="stored the block as"):
        store.put(b"data")


def test_endless_answer_stops_at_the_cap(kubo: FakeKubo) -> None:
    store = KuboStore(kubo.url, timeout=5.0, max_blob_size=100_000)
    digest = store.put(b"small")
    kubo.mode = "huge"
    with pytest.raises(TooLarge):
        store.get(digest)


def test_hanging_daemon_times_out(kubo: FakeKubo) -> None:
    store = KuboStore(kubo.url, timeout=0.3)
    kubo.mode = "hang"
    digest = sha256(b"anything")
    for call in (lambda: store.get(digest), lambda: store.put(b"x"), lambda: store.pin(digest)):
        started = time.monotonic()
        with pytest.raises(StoreTimeout) as excinfo:
            call()
        assert time.monotonic() - started < 3
        assert excinfo.value.retryable


def test_daemon_stalling_mid_answer_times_out(kubo: FakeKubo) -> None:
    store = KuboStore(kubo.url, timeout=0.3)
    digest = store.put(b"a block that arrives only halfway")
    kubo.mode = "stall"
    with pytest.raises(StoreTimeout):
        store.get(digest)


def test_unreachable_daemon() -> None:
    with running_fake_kubo() as other:
        pass  # started and stopped: its port is now closed
    store = KuboStore(other.url, timeout=1.0)
    with pytest.raises(StoreUnavailable) as excinfo:
        store.get(sha256(b"x"))
    assert excinfo.value.retryable and not isinstance(excinfo.value, StoreTimeout)


def test_not_a_kubo(kubo: FakeKubo, store: KuboStore) -> None:
    kubo.mode = "teapot"
    with pytest.raises(StoreRejected, match="418"):
        store.put(b"x")
    wrong_path = KuboStore(kubo.url + "/not/the/api", timeout=1.0)
    kubo.mode = "honest"
    with pytest.raises(StoreRejected, match="404"):
        wrong_path.put(b"x")


@pytest.mark.parametrize(
    ("url", "expected"),
    [
        ("http://127.0.0.1:5001", ("/ip4/127.0.0.1/tcp/5001/http", "api/v0")),
        (
            "https://ipfs.example.org:5001/api/v0/",
            ("/dns/ipfs.example.org/tcp/5001/https", "api/v0"),
        ),
        ("http://[::1]:5001", ("/ip6/::1/tcp/5001/http", "api/v0")),
        ("http://localhost", ("/dns/localhost/tcp/80/http", "api/v0")),
    ],
)
def test_api_multiaddr(url: str, expected: tuple[str, str]) -> None:
    assert api_multiaddr(url) == expected


@pytest.mark.parametrize("url", ["ftp://host:5001", "127.0.0.1:5001", "http://", "http://h:x"])
def test_api_multiaddr_refuses(url: str) -> None:
    with pytest.raises(ValueError):
        api_multiaddr(url)


# --- a real Kubo daemon, when one is named ---

KUBO_API = os.environ.get("SWARM_TEST_KUBO_API", "")
HOW_TO_ENABLE = (
    "set SWARM_TEST_KUBO_API=http://127.0.0.1:5001 to the RPC API of a running Kubo daemon "
    "(`ipfs daemon`) to run these; no Kubo binary installs from PyPI or npm here (npm's "
    "kubo/go-ipfs download it at install time)"
)


def _reachable(url: str) -> bool:
    try:
        request = urllib.request.Request(url.rstrip("/") + "/api/v0/version", method="POST")
        with urllib.request.urlopen(request, timeout=3) as answer:
            return answer.status == 200
    except OSError:
        return False


@pytest.fixture(scope="module")
def real_kubo() -> KuboStore:
    if not KUBO_API:
        pytest.skip(HOW_TO_ENABLE)
    if not _reachable(KUBO_API):
        pytest.skip(f"SWARM_TEST_KUBO_API={KUBO_API} is not reachable; {HOW_TO_ENABLE}")
    return KuboStore(KUBO_API, timeout=10.0)


def test_real_kubo_cids_match(real_kubo: KuboStore) -> None:
    assert real_kubo.put(b"") == sha256(b"")  # put checks Kubo's CID: EMPTY_BLOCK_CID
    data = f"swarm test block {time.time_ns()}".encode()
    digest = real_kubo.put(data)
    assert real_kubo.has(digest)
    assert real_kubo.get(digest) == data
    real_kubo.pin(digest)
    assert (
        real_kubo.get(real_kubo.put(bytes(range(256)) * 4096, pin=True)) == bytes(range(256)) * 4096
    )


def test_real_kubo_missing_block_is_not_local(real_kubo: KuboStore) -> None:
    assert not real_kubo.has(sha256(f"never stored {time.time_ns()}".encode()))

"""KuboStore against a real HTTP server speaking Kubo's RPC API (tests/storage/fake_kubo.py):
its answers, misbehaviours and garbage. The real daemons are in test_kubo_daemon.py."""

from __future__ import annotations

from collections.abc import Iterator

import pytest

from node.storage import (
    ContentStore,
    DigestMismatch,
    KuboStore,
    NotFound,
    StoreError,
    StoreRejected,
    StoreTimeout,
    StoreUnavailable,
    TooLarge,
    cid_from_digest,
    sha256,
)
from node.storage.endpoint import StoreEndpoint
from node.storage.kubo import api_base
from tests.storage.fake_kubo import FakeKubo, raw_cid, running_fake_kubo

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
        with pytest.raises(StoreTimeout) as excinfo:  # the daemon never answers: only the timeout
            call()
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
        ("http://127.0.0.1:5001", "http://127.0.0.1:5001/api/v0"),
        ("https://ipfs.example.org:5001/api/v0/", "https://ipfs.example.org:5001/api/v0"),
        ("http://[::1]:5001", "http://[::1]:5001/api/v0"),
        ("http://localhost", "http://localhost/api/v0"),
    ],
)
def test_api_base(url: str, expected: str) -> None:
    assert api_base(url) == expected


@pytest.mark.parametrize("url", ["ftp://host:5001", "127.0.0.1:5001", "http://", "http://h:x"])
def test_api_base_refuses(url: str) -> None:
    with pytest.raises(ValueError):
        api_base(url)


def test_endpoint(kubo: FakeKubo, store: KuboStore) -> None:
    endpoint = store.endpoint()
    assert endpoint == StoreEndpoint(kubo.peer_id, tuple(kubo.addresses))  # no /p2p/ suffix
    assert kubo.requests[-1][0] == "/api/v0/id"


def test_connect(kubo: FakeKubo, store: KuboStore) -> None:
    peer = StoreEndpoint("12D3KooWPeer", ("/ip4/127.0.0.1/tcp/4002", "/ip4/127.0.0.1/tcp/4003"))
    kubo.reachable.add(peer.peer_id)
    store.connect(peer)
    path, query = kubo.requests[-1]
    assert path == "/api/v0/swarm/connect"
    assert query["arg"] == [f"{a}/p2p/{peer.peer_id}" for a in peer.addrs]  # one call, all addrs


def test_connect_failure_is_retryable_and_one_line(kubo: FakeKubo, store: KuboStore) -> None:
    peer = StoreEndpoint("12D3KooWGone", ("/ip4/127.0.0.1/tcp/9", "/ip4/127.0.0.1/tcp/10"))
    with pytest.raises(StoreUnavailable) as excinfo:
        store.connect(peer)
    assert excinfo.value.retryable
    assert "\n" not in str(excinfo.value) and "connection refused" in str(excinfo.value)
    with pytest.raises(StoreUnavailable, match="no address"):
        store.connect(StoreEndpoint("12D3KooWNowhere", ()))


@pytest.mark.parametrize("mode", ["garbage", "odd_json", "teapot"])
def test_garbage_answers_are_store_errors(kubo: FakeKubo, store: KuboStore, mode: str) -> None:
    kubo.mode = mode
    for call in (
        store.endpoint,
        lambda: store.put(b"x"),
        lambda: store.pin(sha256(b"x")),
        lambda: store.has(sha256(b"x")),
        lambda: store.sign(b"swarm.endpoint/1"),
    ):
        with pytest.raises(StoreError):
            call()
    with pytest.raises(StoreError):
        store.connect(StoreEndpoint("12D3KooWPeer", ("/ip4/127.0.0.1/tcp/4002",)))

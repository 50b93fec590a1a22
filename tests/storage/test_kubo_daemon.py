"""KuboStore on real Kubo daemons (the bootstrap's build) started by node.local.kubo: the RPC calls,
the private network, bitswap between two daemons, restarts, and daemons dying with their parent.
"""

from __future__ import annotations

import json
import os
import shutil
import signal
import socket
import stat
import subprocess
import sys
import time
from concurrent.futures import ThreadPoolExecutor
from pathlib import Path

import pytest
import requests

from node.local.kubo import (
    KUBO_VERSION,
    KuboDaemon,
    KuboDaemonError,
    KuboMissing,
    init_repo,
    kubo_binary,
    start_kubo,
    swarm_key_text,
)
from node.rollouts import decode_batch, encode_batch
from node.storage import StoreTimeout, StoreUnavailable, sha256
from tests.rollouts.factories import make_batch
from tests.storage.kubo_daemons import KuboSwarm, require_kubo
from tests.waiting import wait_for

ROOT = Path(__file__).resolve().parents[2]
EMPTY_BLOCK = sha256(b"")


def real_batch(round: int) -> bytes:
    """A signed, encoded rollout batch of realistic size (8 x 8 completions, ~80 kB)."""
    text = "first add the tens then the ones so the total is " * 24
    return encode_batch(make_batch(groups=8, group_size=8, text=text, round=round))


def rpc(daemon: KuboDaemon, command: str, **params: str) -> object:
    """A direct RPC call, for what KuboStore does not do (gc, pin/ls)."""
    answer = requests.post(f"{daemon.api_url}/api/v0/{command}", params=params, timeout=30)
    answer.raise_for_status()
    return [json.loads(line) for line in answer.text.splitlines() if line.strip()]


# --- the binary


def test_the_built_kubo_is_the_pinned_version() -> None:
    binary = require_kubo()
    result = subprocess.run([binary, "version", "--number"], capture_output=True, text=True)
    assert result.stdout.strip() == KUBO_VERSION.removeprefix("v")
    build_script = (ROOT / "scripts" / "build-kubo").read_text()
    assert f"\nversion={KUBO_VERSION}\n" in build_script


def test_kubo_binary_lookup_order(tmp_path: Path, monkeypatch: pytest.MonkeyPatch) -> None:
    def executable(path: Path) -> Path:
        path.parent.mkdir(parents=True, exist_ok=True)
        path.write_text("#!/bin/sh\n")
        path.chmod(0o755)
        return path

    on_path = executable(tmp_path / "bin" / "ipfs")
    built = executable(tmp_path / "cache" / "tools" / f"kubo-{KUBO_VERSION}" / "ipfs")
    named = executable(tmp_path / "named-ipfs")
    monkeypatch.setenv("PATH", str(on_path.parent))
    monkeypatch.setenv("SWARM_CACHE_DIR", str(tmp_path / "cache"))
    monkeypatch.setenv("SWARM_KUBO_BIN", str(named))
    assert kubo_binary() == named
    monkeypatch.delenv("SWARM_KUBO_BIN")
    assert kubo_binary() == built
    built.unlink()
    assert kubo_binary() == on_path
    on_path.unlink()
    with pytest.raises(KuboMissing, match="run scripts/bootstrap"):
        kubo_binary()
    monkeypatch.setenv("SWARM_KUBO_BIN", str(tmp_path / "nothing"))
    with pytest.raises(KuboMissing, match="SWARM_KUBO_BIN"):
        kubo_binary()


def test_swarm_key_file() -> None:
    key = bytes(range(32))
    assert swarm_key_text(key) == f"/key/swarm/psk/1.0.0/\n/base16/\n{key.hex()}\n"
    with pytest.raises(ValueError, match="32 bytes"):
        swarm_key_text(b"short")


# --- one daemon: the store's RPC calls


def test_real_kubo_cids_match(kubo_daemon: KuboDaemon) -> None:
    store = kubo_daemon.store(timeout=10.0)
    assert store.put(b"") == EMPTY_BLOCK  # put checks Kubo's CID: bafkreihdwdcef...
    data = f"swarm test block {time.time_ns()}".encode()
    digest = store.put(data)
    assert store.has(digest)
    assert store.get(digest) == data
    store.pin(digest)
    largest = bytes(range(256)) * 4096  # 1 MiB, Kubo's block limit, every byte value
    assert store.get(store.put(largest, pin=True)) == largest


def test_real_kubo_unpins_and_then_collects(kubo_daemon: KuboDaemon) -> None:
    store = kubo_daemon.store(timeout=10.0)
    digest = store.put(f"swarm unpin test {time.time_ns()}".encode(), pin=True)
    rpc(kubo_daemon, "repo/gc")
    assert store.has(digest)  # pinned: kept
    store.unpin(digest)
    store.unpin(digest)  # twice: no error
    rpc(kubo_daemon, "repo/gc")
    assert not store.has(digest)


def test_real_kubo_missing_block_is_not_local(kubo_daemon: KuboDaemon) -> None:
    store = kubo_daemon.store(timeout=1.0)
    missing = sha256(f"never stored {time.time_ns()}".encode())
    assert not store.has(missing)
    with pytest.raises(StoreTimeout):  # no peer has it: Kubo gives up at the store's timeout
        store.get(missing)


def test_real_kubo_endpoint_is_the_daemon(kubo_daemon: KuboDaemon) -> None:
    endpoint = kubo_daemon.store().endpoint()
    assert endpoint == kubo_daemon.endpoint()
    assert endpoint.peer_id.startswith("12D3KooW")
    assert endpoint.addrs and all(a.startswith("/ip4/127.0.0.1/tcp/") for a in endpoint.addrs)
    assert not any("/p2p/" in a for a in endpoint.addrs)


def test_the_daemon_is_private_and_local(kubo_daemon: KuboDaemon) -> None:
    config = json.loads((kubo_daemon.repo / "config").read_text())
    assert config["Bootstrap"] == [] and config["Peering"].get("Peers") in (None, [])
    assert config["AutoConf"]["Enabled"] is False
    assert config["Routing"]["Type"] == "none"
    assert config["Discovery"]["MDNS"]["Enabled"] is False
    assert config["Addresses"]["Gateway"] == []
    assert config["Addresses"]["API"].startswith("/ip4/127.0.0.1/")
    for name in ("config", "swarm.key"):
        assert stat.S_IMODE((kubo_daemon.repo / name).stat().st_mode) == 0o600
    log = kubo_daemon.log_path.read_text()
    assert "Swarm is limited to private network of peers with the swarm key" in log
    assert rpc(kubo_daemon, "swarm/peers") == [{"Peers": None}]  # it dialled nobody


# --- two daemons: bitswap through one's own API


def test_a_peer_fetches_a_batch_through_its_own_daemon(kubo_swarm: KuboSwarm) -> None:
    a, b = kubo_swarm.start("a"), kubo_swarm.start("b")
    batches = [real_batch(round) for round in range(3)]
    digests = [a.store().put(batch, pin=True) for batch in batches]
    b_store = b.store(timeout=20.0)  # knows B's API only
    b_store.connect(a.store().endpoint())
    assert [peer["Peer"] for peer in rpc(b, "swarm/peers")[0]["Peers"]] == [a.peer_id]
    for digest, batch in zip(digests, batches, strict=True):
        assert not b_store.has(digest)
        fetched = b_store.get(digest)
        assert fetched == batch and decode_batch(fetched).body.round in (0, 1, 2)
        assert b_store.has(digest)  # B now holds a copy


def test_concurrent_fetches_through_one_store(kubo_swarm: KuboSwarm) -> None:
    a, b = kubo_swarm.start("a"), kubo_swarm.start("b")
    batches = [real_batch(round) for round in range(24)]
    digests = [a.store().put(batch, pin=True) for batch in batches]
    b_store = b.store(timeout=30.0)
    b_store.connect(a.endpoint())
    with ThreadPoolExecutor(max_workers=8) as pool:  # as node.sampling.fetch does
        assert list(pool.map(b_store.get, digests)) == batches


def test_without_connecting_a_fetch_ends_at_the_timeout(kubo_swarm: KuboSwarm) -> None:
    a, b = kubo_swarm.start("a"), kubo_swarm.start("b")
    digest = a.store().put(real_batch(0))
    with pytest.raises(StoreTimeout) as excinfo:
        b.store(timeout=2.0).get(digest)
    assert excinfo.value.retryable


def test_another_swarm_key_cannot_connect(kubo_swarm: KuboSwarm) -> None:
    a = kubo_swarm.start("a")
    stranger = kubo_swarm.start("stranger", swarm_key=os.urandom(32))
    with pytest.raises(StoreUnavailable) as excinfo:
        stranger.store(timeout=10.0).connect(a.endpoint())
    assert "\n" not in str(excinfo.value)


def test_connecting_to_a_stopped_daemon_is_retryable(kubo_swarm: KuboSwarm) -> None:
    a, b = kubo_swarm.start("a"), kubo_swarm.start("b")
    a.stop()
    with pytest.raises(StoreUnavailable) as excinfo:
        b.store(timeout=10.0).connect(a.endpoint())
    assert excinfo.value.retryable and a.peer_id in str(excinfo.value)


# --- restarts and failures


def test_a_restart_keeps_the_peer_id_and_the_pinned_blocks(kubo_swarm: KuboSwarm) -> None:
    first = kubo_swarm.start("a")
    kept = first.store().put(real_batch(1), pin=True)
    dropped = first.store().put(real_batch(2))
    first.stop()
    assert not first.running()
    again = kubo_swarm.start("a")
    assert again.peer_id == first.peer_id
    rpc(again, "repo/gc")
    store = again.store(timeout=2.0)
    assert store.has(kept) and store.get(kept) == real_batch(1)
    assert not store.has(dropped)  # the unpinned one was collected: the pin is what kept it


def test_a_busy_repo_is_refused_untouched(kubo_swarm: KuboSwarm) -> None:
    running = kubo_swarm.start("a")
    config = (running.repo / "config").read_bytes()
    with pytest.raises(KuboDaemonError, match="in use by another ipfs daemon"):
        start_kubo(running.repo, os.urandom(32))
    assert running.running() and (running.repo / "config").read_bytes() == config
    assert swarm_key_text(kubo_swarm.swarm_key) == (running.repo / "swarm.key").read_text()


def test_a_daemon_that_fails_to_start_is_reported_with_its_log(kubo_swarm: KuboSwarm) -> None:
    daemon = kubo_swarm.start("a")
    daemon.stop()
    shutil.rmtree(daemon.repo / "blocks")
    (daemon.repo / "blocks").write_text("not a folder")  # a broken block store
    with pytest.raises(KuboDaemonError, match=r"exited with \d+ \(log .*daemon\.log\)") as excinfo:
        kubo_swarm.start("a")
    assert "not a directory" in str(excinfo.value)  # the log's tail


def test_init_refuses_a_folder_that_is_not_a_repo(tmp_path: Path) -> None:
    require_kubo()
    (tmp_path / "notes.txt").write_text("mine")
    with pytest.raises(KuboDaemonError, match="neither empty nor a Kubo repository"):
        init_repo(tmp_path)


def test_a_fixed_swarm_port_that_is_taken_is_refused(kubo_swarm: KuboSwarm) -> None:
    with socket.socket() as taken:
        taken.bind(("127.0.0.1", 0))
        taken.listen()
        port = taken.getsockname()[1]
        with pytest.raises(KuboDaemonError, match=f"swarm port 127.0.0.1:{port} is taken"):
            start_kubo(kubo_swarm.folder / "a", kubo_swarm.swarm_key, swarm_port=port)


CHILD = """
import json, sys, time
from pathlib import Path
from node.local.kubo import start_kubo
daemon = start_kubo(Path(sys.argv[1]), bytes.fromhex(sys.argv[2]))
ports = [int(daemon.api_url.rsplit(":", 1)[1])] + [int(a.rsplit("/", 1)[1]) for a in daemon.addrs]
print(json.dumps({"pid": daemon.pid, "ports": ports}), flush=True)
time.sleep(600)
"""


def gone(pid: int) -> bool:
    try:
        state = Path(f"/proc/{pid}/stat").read_text().rsplit(")", 1)[1].split()[0]
    except (OSError, IndexError):
        return True
    return state in ("Z", "X")  # a zombie is dead; reaping it is its new parent's business


def port_free(port: int) -> bool:
    with socket.socket() as probe:
        probe.setsockopt(socket.SOL_SOCKET, socket.SO_REUSEADDR, 1)
        try:
            probe.bind(("127.0.0.1", port))
        except OSError:
            return False
    return True


@pytest.mark.skipif(not sys.platform.startswith("linux"), reason="PR_SET_PDEATHSIG is Linux's")
def test_the_daemon_dies_when_its_parent_is_killed(tmp_path: Path) -> None:
    require_kubo()
    parent = subprocess.Popen(
        [sys.executable, "-c", CHILD, str(tmp_path / "repo"), os.urandom(32).hex()],
        stdout=subprocess.PIPE,
        text=True,
        cwd=ROOT,
    )
    try:
        assert parent.stdout is not None
        started = json.loads(parent.stdout.readline())
        pid, ports = started["pid"], started["ports"]
        assert not gone(pid) and not any(port_free(port) for port in ports)
        parent.send_signal(signal.SIGKILL)
        parent.wait(timeout=10)
        wait_for(lambda: gone(pid), timeout=20, what=f"Kubo daemon {pid} to die with its parent")
        wait_for(lambda: all(port_free(p) for p in ports), timeout=20, what=f"ports {ports} free")
    finally:
        parent.kill()
        parent.wait(timeout=10)

"""The local swarm reports only its own services: an Anvil answering on the port must be the one
it started (chain id, genesis block), a leaderboard must serve its coordinator."""

from __future__ import annotations

import json
import subprocess
import threading
import time
from collections.abc import Iterator
from contextlib import contextmanager
from http.server import BaseHTTPRequestHandler, ThreadingHTTPServer
from pathlib import Path

import pytest

from node.local.anvil import AnvilError, start_anvil
from node.local.swarm import _wait_for_leaderboard

pytestmark = pytest.mark.integration

COORDINATOR = "0x5FbDB2315678afecb367f032d93F642f64180aa3"
OTHER = "0xe7f1725E7734CE288F8367e1Bb143E90bb3F0512"


def test_an_anvil_already_on_the_port_is_not_taken_for_ours(tmp_path: Path) -> None:
    stale = start_anvil(tmp_path / "stale.log")
    try:
        time.sleep(1.1)  # a stale chain started at another time: another genesis block
        with pytest.raises(AnvilError, match=f"port {stale.port}"):
            start_anvil(tmp_path / "ours.log", port=stale.port)
    finally:
        stale.stop()


def test_an_anvil_keeps_its_states_next_to_its_log_and_stop_removes_them(
    tmp_path: Path,
) -> None:
    """Not in ~/.foundry/anvil/tmp, where every Anvil's states would stay for good."""
    anvil = start_anvil(tmp_path / "chain.log", extra_args=("--block-time", "1"))
    try:
        time.sleep(2.5)  # a few blocks: Anvil persists states as it mines
        assert anvil.cache_dir == tmp_path / "chain.states"
        command = " ".join(anvil.process.args)  # type: ignore[arg-type]
        assert f"--cache-path {tmp_path / 'chain.states'}" in command
    finally:
        anvil.stop()
    assert not (tmp_path / "chain.states").exists()


@contextmanager
def stats_server(coordinator: str) -> Iterator[str]:
    """A leaderboard stand-in whose ``/api/stats`` names ``coordinator``."""

    class Handler(BaseHTTPRequestHandler):
        def do_GET(self) -> None:
            body = json.dumps({"coordinator": coordinator, "chain_id": 31337}).encode()
            self.send_response(200)
            self.send_header("Content-Type", "application/json")
            self.end_headers()
            self.wfile.write(body)

        def log_message(self, *args: object) -> None:
            pass

    server = ThreadingHTTPServer(("127.0.0.1", 0), Handler)
    threading.Thread(target=server.serve_forever, daemon=True).start()
    try:
        yield f"http://127.0.0.1:{server.server_address[1]}"
    finally:
        server.shutdown()
        server.server_close()


@contextmanager
def running_process() -> Iterator[subprocess.Popen[bytes]]:
    process = subprocess.Popen(["sleep", "60"])
    try:
        yield process
    finally:
        process.kill()
        process.wait()


def test_a_leaderboard_of_another_coordinator_is_not_reported() -> None:
    with stats_server(OTHER) as url, running_process() as indexer:
        problem = _wait_for_leaderboard(url, COORDINATOR, indexer, timeout=10)
    assert problem == f"{url} serves another leaderboard (coordinator {OTHER})"


def test_the_leaderboard_of_our_coordinator_is_reported() -> None:
    with stats_server(COORDINATOR.lower()) as url, running_process() as indexer:
        assert _wait_for_leaderboard(url, COORDINATOR, indexer, timeout=10) is None


def test_a_leaderboard_whose_indexer_exited_is_not_reported() -> None:
    with stats_server(COORDINATOR) as url:
        exited = subprocess.Popen(["true"])
        exited.wait()
        assert _wait_for_leaderboard(url, COORDINATOR, exited, timeout=10) is not None

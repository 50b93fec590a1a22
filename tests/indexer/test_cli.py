"""``swarm-indexer`` as a launcher runs it: a subprocess that signals readiness, serves, and stops
cleanly on SIGINT and SIGTERM; user mistakes are one-line errors."""

from __future__ import annotations

import os
import signal
import socket
import subprocess
import sys
import time
from pathlib import Path

import pytest
import requests

from tests.indexer.scenario import play

pytestmark = pytest.mark.integration

COMMAND = [sys.executable, "-m", "coordinator_indexer"]


def run_args(chain, deployment_path: Path, db: Path, *extra: str) -> list[str]:
    return [
        *COMMAND,
        "run",
        "--rpc",
        chain.w3.provider.endpoint_uri,
        "--deployment",
        str(deployment_path),
        "--db",
        f"sqlite:///{db}",
        "--poll-interval",
        "0.05",
        *extra,
    ]


def wait_ready(process: subprocess.Popen, ready_file: Path, timeout: float = 60) -> str:
    deadline = time.monotonic() + timeout
    while time.monotonic() < deadline:
        if ready_file.exists() and ready_file.read_text().strip():
            return ready_file.read_text().strip()
        if process.poll() is not None:
            raise AssertionError(f"exited early: {process.communicate()}")
        time.sleep(0.05)
    process.kill()
    raise AssertionError("no ready file")


@pytest.mark.parametrize("sig", [signal.SIGTERM, signal.SIGINT])
def test_run_serves_then_stops_cleanly_on_a_signal(
    chain, client_for, dev_accounts, deployment, tmp_path, sig
) -> None:
    play(chain, client_for, dev_accounts[1:], phases=1)
    head = chain.w3.eth.block_number
    ready = tmp_path / "ready"
    process = subprocess.Popen(
        run_args(
            chain, deployment.save(tmp_path / "d.json"), tmp_path / "i.db",
            "--port", "0", "--ready-file", str(ready),
        ),
        stdout=subprocess.PIPE,
        stderr=subprocess.PIPE,
        text=True,
    )  # fmt: skip
    try:
        url = wait_ready(process, ready)
        deadline = time.monotonic() + 30
        while requests.get(url + "health", timeout=5).json()["indexed_block"] != head:
            assert time.monotonic() < deadline
            time.sleep(0.05)
        assert requests.get(url + "api/leaderboard", timeout=5).json()["total"] == 6
        process.send_signal(sig)
        out, err = process.communicate(timeout=20)
    finally:
        if process.poll() is None:
            process.kill()
    assert process.returncode == 0, err
    assert f"serving {url}" in out and "caught up at block" in out and "stopped" in out
    assert "Traceback" not in err
    with pytest.raises(requests.ConnectionError):
        requests.get(url + "health", timeout=2)


def test_run_keeps_answering_503_after_a_deep_reorg_and_exits_1_when_stopped(
    chain, client_for, dev_accounts, deployment, tmp_path
) -> None:
    play(chain, client_for, dev_accounts[1:], phases=2)
    ready = tmp_path / "ready"
    process = subprocess.Popen(
        run_args(
            chain, deployment.save(tmp_path / "d.json"), tmp_path / "i.db",
            "--port", "0", "--ready-file", str(ready), "--confirmations", "1",
        ),
        stdout=subprocess.PIPE,
        stderr=subprocess.PIPE,
        text=True,
    )  # fmt: skip
    try:
        url = wait_ready(process, ready)
        head = chain.w3.eth.block_number
        deadline = time.monotonic() + 30
        while requests.get(url + "health", timeout=5).json()["indexed_block"] != head:
            assert time.monotonic() < deadline
            time.sleep(0.05)
        chain.rpc("anvil_reorg", 5, [])
        deadline = time.monotonic() + 30
        while requests.get(url + "health", timeout=5).status_code != 503:
            assert time.monotonic() < deadline and process.poll() is None
            time.sleep(0.05)
        time.sleep(0.5)
        assert process.poll() is None  # the server stays up to say why
        refused = requests.get(url + "api/leaderboard", timeout=5)
        assert refused.status_code == 503
        assert refused.json()["detail"].startswith("indexing stopped: ")
        assert "reorganised below block" in refused.json()["detail"]
        process.send_signal(signal.SIGTERM)
        out, err = process.communicate(timeout=30)
    finally:
        if process.poll() is None:
            process.kill()
    assert process.returncode == 1  # stopped, but ingestion had failed
    assert "error: " in out and "still serving" in out
    assert "reorganised below block" in err and "Traceback" not in err


def test_help_explains_the_commands() -> None:
    top = subprocess.run([*COMMAND, "--help"], capture_output=True, text=True, timeout=60)
    assert top.returncode == 0
    assert "verified" in top.stdout and "run" in top.stdout and "sync" in top.stdout
    script = Path(sys.executable).with_name("swarm-indexer")  # the console script
    run = subprocess.run([str(script), "run", "--help"], capture_output=True, text=True, timeout=60)
    for option in ("--rpc", "--deployment", "--db", "--confirmations", "--port", "--ready-file"):
        assert option in run.stdout
    assert "SWARM_INDEXER_DB" in run.stdout


def test_the_database_url_can_come_from_the_environment(chain, deployment, tmp_path) -> None:
    db = tmp_path / "from-env.db"
    synced = subprocess.run(
        [*COMMAND, "sync", "--rpc", chain.w3.provider.endpoint_uri],
        capture_output=True,
        text=True,
        timeout=120,
        env={
            **os.environ,
            "SWARM_INDEXER_DB": f"sqlite:///{db}",
            "SWARM_INDEXER_DEPLOYMENT": str(deployment.save(tmp_path / "d.json")),
        },
    )
    assert synced.returncode == 0, synced.stderr
    assert db.exists() and "indexed to block" in synced.stdout


def test_mistakes_are_one_line_errors(chain, deployment, tmp_path) -> None:
    missing = subprocess.run(
        [*COMMAND, "sync", "--deployment", str(tmp_path / "nope.json"), "--db", "sqlite:///x"],
        capture_output=True,
        text=True,
        timeout=60,
    )
    assert missing.returncode == 1 and "not found" in missing.stderr
    assert "Traceback" not in missing.stderr
    bad_db = subprocess.run(
        [*COMMAND, "sync", "--deployment", str(deployment.save(tmp_path / "d.json")),
         "--db", "mysql://nobody@nowhere/x"],
        capture_output=True,
        text=True,
        timeout=60,
    )  # fmt: skip
    assert bad_db.returncode == 1 and "unsupported database" in bad_db.stderr
    with socket.socket() as busy:
        busy.bind(("127.0.0.1", 0))
        busy.listen(1)
        port = busy.getsockname()[1]
        taken = subprocess.run(
            run_args(chain, tmp_path / "d.json", tmp_path / "i.db", "--port", str(port)),
            capture_output=True,
            text=True,
            timeout=60,
        )
    assert taken.returncode == 1 and f"cannot listen on 127.0.0.1:{port}" in taken.stderr
    assert "Traceback" not in taken.stderr

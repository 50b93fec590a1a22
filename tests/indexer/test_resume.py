"""Kill-and-resume: ``swarm-indexer sync`` killed with SIGKILL at arbitrary moments, then rerun,
ends with exactly the tables of an indexer that was never interrupted. A crash inside a range's
transaction leaves the database at the previous range."""

from __future__ import annotations

import os
import random
import signal
import subprocess
import sys
import tempfile
import time
from pathlib import Path

import pytest

from coordinator_indexer import derive
from tests.indexer.scenario import play
from tests.waiting import wait_for

pytestmark = [pytest.mark.integration, pytest.mark.slow]

EMPTY_BLOCKS = 400


def sync_command(rpc_url: str, deployment_path, db_url: str) -> list[str]:
    return [
        sys.executable,
        "-m",
        "coordinator_indexer",
        "sync",
        "--rpc",
        rpc_url,
        "--deployment",
        str(deployment_path),
        "--db",
        db_url,
        "--max-range",
        "1",
        "--confirmations",
        "3",
    ]


def readers_of(pid: int) -> list[str]:
    """The read-ahead processes of the indexer process ``pid`` (their spool folder names it)."""
    marker = f"read-ahead-{pid}-".encode()
    found = []
    for entry in Path("/proc").iterdir():
        try:
            if entry.name.isdigit() and marker in (entry / "cmdline").read_bytes():
                found.append(entry.name)
        except OSError:
            continue  # gone meanwhile
    return found


def cursor_of(store) -> int:
    state = store.state()
    return state.cursor_block if state else -1


def test_sigkill_at_random_moments_then_resume_gives_identical_tables(
    chain, client_for, dev_accounts, deployment, tmp_path, open_store, sqlite_url, make_indexer
) -> None:
    play(chain, client_for, dev_accounts[1:])
    chain.rpc("anvil_mine", hex(EMPTY_BLOCKS))  # a longer chain: many one-block ranges to cut
    head = chain.w3.eth.block_number
    deployment_path = deployment.save(tmp_path / "deployment.json")
    url = sqlite_url("killed")
    command = sync_command(chain.w3.provider.endpoint_uri, deployment_path, url)
    observer = open_store(url)
    rng = random.Random(1234)
    kills_mid_way = 0
    last_cursor = -1
    killed: list[int] = []
    with_reader = 0
    for _ in range(4):
        process = subprocess.Popen(command, stdout=subprocess.DEVNULL, stderr=subprocess.PIPE)
        deadline = time.monotonic() + 60
        while cursor_of(observer) <= last_cursor and time.monotonic() < deadline:
            if process.poll() is not None:
                break
            time.sleep(0.02)
        time.sleep(rng.uniform(0.0, 0.4))  # somewhere inside some later range
        pid = process.pid
        killed.append(pid)
        with_reader += bool(readers_of(pid))  # it reads ahead: far behind the head
        process.send_signal(signal.SIGKILL)
        process.wait(timeout=10)
        wait_for(lambda pid=pid: not readers_of(pid), what="the killed sync's reader to end")
        cursor = cursor_of(observer)
        assert cursor > last_cursor, process.stderr.read().decode() if process.stderr else ""
        kills_mid_way += cursor < head
        last_cursor = cursor
    assert kills_mid_way >= 3, "the sync finished too fast to be killed mid-way"
    assert with_reader >= 3

    finished = subprocess.run(command, capture_output=True, text=True, timeout=120)
    assert finished.returncode == 0, finished.stderr
    assert f"indexed to block {head:,}" in finished.stdout
    spools = Path(tempfile.gettempdir()).glob("swarm-indexer-read-ahead-*")
    assert not [s for s in spools if any(f"-{pid}-" in s.name for pid in killed)]

    reference = make_indexer(max_range=50, confirmations=3)
    reference.sync()
    assert observer.dump() == reference.store.dump()
    assert observer.counts()["votes"] == 25 and observer.counts()["duties"] == 12


def test_a_crash_inside_a_range_transaction_leaves_the_previous_range(
    chain, client_for, dev_accounts, make_indexer, monkeypatch
) -> None:
    """The rows are inserted, then the derived step fails: nothing of the range remains."""
    indexer = make_indexer(max_range=1)
    indexer.sync()
    before = indexer.store.dump()
    play(chain, client_for, dev_accounts[1:], phases=1)

    def crash(*_args: object) -> None:
        raise RuntimeError("power cut")

    monkeypatch.setattr(derive, "recompute_peers", crash)
    with pytest.raises(RuntimeError, match="power cut"):
        indexer.step()
    assert indexer.store.dump() == before

    monkeypatch.undo()
    indexer.sync()
    reference = make_indexer()
    reference.sync()
    assert indexer.store.dump()["peers"] == reference.store.dump()["peers"]
    assert os.path.exists(indexer.store.engine.url.database)

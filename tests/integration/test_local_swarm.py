"""``swarm local up``, the README's demo command, as a user runs it (tiny model, small rounds)."""

from __future__ import annotations

import re
import signal
import socket
import sys
import time
from pathlib import Path

import pytest
import requests

from node.local.anvil import free_port
from tests.integration.test_swarm_run import NodeProcess

#: node-1's first round line (the demo starts a round after registering: any round).
_FIRST_ROUND_LINE = re.compile(r"node-1 round \d+:")

pytestmark = [pytest.mark.integration, pytest.mark.slow]


def local_up(workdir: Path, *options: str) -> list[str]:
    return [
        sys.executable, "-m", "node.cli", "local", "up", "--model", "tiny", "--nodes", "2",
        "--workdir", str(workdir), "--anvil-port", str(free_port()),
        "--indexer-port", str(free_port()), *options,
    ]  # fmt: skip


def port_is_closed(url: str) -> bool:
    port = int(url.rsplit(":", 1)[1])
    with socket.socket() as sock:
        return sock.connect_ex(("127.0.0.1", port)) != 0


def test_the_demo_runs_its_rounds_then_takes_everything_down(tmp_path: Path) -> None:
    """Five rounds: verdicts on round r are committed in r + 2 and revealed in r + 3 (the
    lockstep demo's phases: grace, commit and reveal one round each)."""
    demo = NodeProcess.start(
        local_up(tmp_path / "demo", "--rounds", "5", "--no-keep", "--no-indexer"), tmp_path
    )
    try:
        demo.wait_for(lambda line: line == "local swarm stopped", timeout=180)
        assert demo.stop(None) == 0
    finally:
        demo.stop()
    rounds = [line for line in demo.output if re.match(r"node-\d round \d+: ", line)]
    assert len(rounds) == 10
    assert all("published yes" in line and "peers verified 1" in line for line in rounds)
    committed = [int(re.search(r"verdicts committed (\d+)", line)[1]) for line in rounds]
    revealed = [int(re.search(r"revealed (\d+) \(flags 0\)", line)[1]) for line in rounds]
    assert committed == [0] * 4 + [1] * 6 and revealed == [0] * 6 + [1] * 4
    for name in ("node-0", "node-1"):
        assert f"{name}: 5/5 rounds published" in "\n".join(demo.output)
        assert (tmp_path / "demo" / "nodes" / name / "keystore.json").exists()
        assert (tmp_path / "demo" / "nodes" / name / "state" / "round-state.json").exists()
    chain = next(line for line in demo.output if line.startswith("chain "))
    assert port_is_closed(chain.split()[1])  # anvil is gone


def test_the_lockstep_demo_on_a_kubo_daemon_per_node(tmp_path: Path) -> None:
    """--store kubo: each node stores in its own daemon and fetches its peer's batches through
    it (bitswap), after finding the peer's endpoint on-chain; the daemons end with the demo."""
    workdir = tmp_path / "demo"
    demo = NodeProcess.start(
        local_up(workdir, "--rounds", "2", "--no-keep", "--no-indexer", "--store", "kubo"),
        tmp_path,
    )
    try:
        demo.wait_for(lambda line: line == "local swarm stopped", timeout=180)
        assert demo.stop(None) == 0
    finally:
        demo.stop()
    rounds = [line for line in demo.output if re.match(r"node-\d round \d+: ", line)]
    assert len(rounds) == 4
    assert all("published yes" in line and "peers verified 1" in line for line in rounds)
    apis = [line.split(" on ")[1] for line in demo.output if re.match(r"node-\d: Kubo ", line)]
    assert len(apis) == 2 and all(port_is_closed(url) for url in apis)  # the daemons are gone
    assert not (workdir / "store").exists()  # no shared folder
    for name in ("node-0", "node-1"):
        assert (workdir / "nodes" / name / "kubo" / "config").exists()


def test_the_leaderboard_shows_the_demo_nodes_until_ctrl_c(tmp_path: Path) -> None:
    demo = NodeProcess.start(local_up(tmp_path / "demo", "--rounds", "5"), tmp_path)
    try:
        line = demo.wait_for(lambda line: "the leaderboard stays up on" in line, timeout=180)
        url = line.split(" on ")[1].split(";")[0]
        addresses = {
            match.group(2): match.group(1)
            for match in (
                re.match(r"(node-\d): (0x[0-9a-fA-F]{40}) funded", x) for x in demo.output
            )
            if match
        }
        board = wait_for_leaderboard(url, peers=2, rounds=5, verified=2)
        assert {e["address"]: e["name"] for e in board["entries"]} == addresses
        for entry in board["entries"]:  # the first two rounds revealed (in the 4th and 5th)
            assert entry["rounds"] == 5 and entry["verified_batches"] == 2
            assert entry["verdicts_counted"] == 2 and entry["flags_received"] == 0
            assert entry["duty_done"] == 2 and entry["duty_missed"] == 0
        assert demo.stop(signal.SIGINT) == 0
    finally:
        demo.stop()
    output = "\n".join(demo.output)
    assert "stopping the indexer" in output and "local swarm stopped" in output
    assert port_is_closed(url)


def wait_for_leaderboard(url: str, *, peers: int, rounds: int, verified: int) -> dict:
    """The leaderboard once the indexer has caught up with ``rounds`` rounds of ``peers``, of
    which ``verified`` are verified by revealed verdicts."""
    deadline = time.monotonic() + 60
    while True:
        board = requests.get(f"{url}/api/leaderboard", timeout=5).json()
        entries = board["entries"]
        caught_up = all(
            e["rounds"] == rounds and e["verified_batches"] == verified for e in entries
        )
        if len(entries) == peers and caught_up:
            return board
        if time.monotonic() > deadline:
            raise AssertionError(f"the leaderboard never showed {rounds} rounds: {board}")
        time.sleep(0.5)


def test_ctrl_c_stops_the_demo_midway_and_shuts_down_cleanly(tmp_path: Path) -> None:
    demo = NodeProcess.start(
        local_up(tmp_path / "demo", "--rounds", "50", "--no-indexer"), tmp_path
    )
    try:
        demo.wait_for(lambda line: _FIRST_ROUND_LINE.match(line) is not None, timeout=180)
        assert demo.stop(signal.SIGINT) == 0
    finally:
        demo.stop()
    output = "\n".join(demo.output)
    assert "stopping anvil" in output and "local swarm stopped" in output
    assert "node-0: " in output and "Traceback" not in output
    chain = next(line for line in demo.output if line.startswith("chain "))
    assert port_is_closed(chain.split()[1])

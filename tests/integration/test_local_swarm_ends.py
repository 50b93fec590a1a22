"""``swarm local up`` leaves nothing behind however it ends, and never reports someone else's
chain or leaderboard as its own (tiny model, real Anvil, real indexer, real subprocesses).

Each test asserts that no process of the demo survives and that its ports are free again.
``kill -9`` of the demo is tested in test_open_network.py (``--processes``).
"""

from __future__ import annotations

import os
import queue
import re
import signal
import socket
import subprocess
import sys
import threading
from collections.abc import Callable, Iterator
from contextlib import ExitStack, contextmanager
from pathlib import Path

import pytest

from tests.integration.process_tree import descendants, mentioning, ports_free, wait_gone

#: node-1's first round line (the demo starts a round after registering: any round).
_FIRST_ROUND_LINE = re.compile(r"node-1 round \d+:")

pytestmark = [pytest.mark.integration, pytest.mark.slow]

REPO = Path(__file__).resolve().parents[2]
TIMEOUT = 180


class Demo:
    """``swarm local up --model tiny --nodes 2`` in its own session (as a terminal's job is in
    its own process group), stdout read line by line, stderr kept in a file."""

    def __init__(self, tmp_path: Path, *options: str, env: dict[str, str] | None = None) -> None:
        self.workdir = tmp_path / "demo"
        self.stderr_path = tmp_path / "stderr"
        command = [
            sys.executable, "-m", "node.cli", "local", "up", "--model", "tiny", "--nodes", "2",
            "--workdir", str(self.workdir), *options,
        ]  # fmt: skip
        with self.stderr_path.open("wb") as stderr:
            self.process = subprocess.Popen(
                command,
                cwd=REPO,
                env={
                    **os.environ,
                    "SWARM_MODEL_CACHE": str(tmp_path / "cache"),
                    "OMP_NUM_THREADS": "1",
                    "PYTHONUNBUFFERED": "1",
                    **(env or {}),
                },
                stdout=subprocess.PIPE,
                stderr=stderr,
                text=True,
                start_new_session=True,
            )
        self.output: list[str] = []

    def read_until(self, predicate: Callable[[str], bool]) -> str:
        """Reads stdout until a line matches (bounded: the test's own timeout and the demo's
        exit end it)."""
        assert self.process.stdout is not None
        for line in iter(self.process.stdout.readline, ""):
            self.output.append(line.rstrip("\n"))
            if predicate(self.output[-1]):
                return self.output[-1]
        raise AssertionError("expected line never came:\n" + self.text())

    def finish(self) -> int:
        """The rest of stdout (in a thread, so a hung demo fails the test) and the exit code."""
        assert self.process.stdout is not None
        lines: queue.Queue[list[str]] = queue.Queue()
        stdout = self.process.stdout
        threading.Thread(target=lambda: lines.put(stdout.read().splitlines()), daemon=True).start()
        code = self.process.wait(timeout=TIMEOUT)
        self.output += lines.get(timeout=30)
        return code

    def ports(self) -> list[int]:
        """The ports it printed for its chain and leaderboard."""
        urls = re.findall(
            r"^(?:anvil on|leaderboard) +http://127\.0\.0\.1:(\d+)", self.text(), re.MULTILINE
        )
        return [int(port) for port in urls]

    def stderr(self) -> str:
        return self.stderr_path.read_text(errors="replace")

    def text(self) -> str:
        return "\n".join(self.output)

    def kill(self) -> None:
        if self.process.poll() is None:
            self.process.kill()
            self.process.wait()


@contextmanager
def demo(tmp_path: Path, *options: str, env: dict[str, str] | None = None) -> Iterator[Demo]:
    running = Demo(tmp_path, *options, env=env)
    try:
        yield running
    finally:
        running.kill()


def assert_nothing_left(running: Demo, children: set[int], ports: list[int]) -> None:
    assert ports, running.text()
    assert wait_gone(children) == set(), running.text()
    assert mentioning(str(running.workdir)) == set()  # the indexer, a node, a daemon
    assert ports_free(ports), (ports, running.text())


def test_sighup_a_closed_terminal_shuts_everything_down(tmp_path: Path) -> None:
    """SIGHUP to the demo's process group, as a terminal sends when it closes: only the demo
    gets it (its children have their own groups), and it stops them in order."""
    with demo(tmp_path, "--rounds", "50", "--anvil-port", "0", "--indexer-port", "0") as running:
        running.read_until(lambda line: _FIRST_ROUND_LINE.match(line) is not None)
        children = descendants(running.process.pid)
        assert len(children) >= 2  # Anvil and the indexer
        os.killpg(running.process.pid, signal.SIGHUP)
        assert running.finish() == 0, running.text() + running.stderr()
    output = running.text()
    assert "stopping the indexer" in output and "stopping anvil" in output
    assert "local swarm stopped" in output and "Traceback" not in running.stderr()
    assert (running.workdir / "nodes" / "node-0" / "state" / "round-state.json").exists()
    assert_nothing_left(running, children, running.ports())


def test_a_reader_that_closes_early_stops_the_demo_cleanly(tmp_path: Path) -> None:
    """``scripts/demo | head``: the next write fails; the demo stops as on Ctrl-C, quietly."""
    with demo(tmp_path, "--rounds", "50", "--anvil-port", "0", "--indexer-port", "0") as running:
        running.read_until(lambda line: line.startswith("leaderboard "))
        children = descendants(running.process.pid)
        assert len(children) >= 2  # Anvil and the indexer
        assert running.process.stdout is not None
        running.process.stdout.close()  # the reader goes away before the rounds' lines
        assert running.process.wait(timeout=TIMEOUT) == 0, running.stderr()
    stderr = running.stderr()
    assert "Traceback" not in stderr and "Exception ignored" not in stderr, stderr
    assert_nothing_left(running, children, running.ports())


def test_an_error_during_startup_stops_what_was_started(tmp_path: Path) -> None:
    """Kubo cannot start (``SWARM_KUBO_BIN=/bin/false``) after Anvil has: Anvil is stopped and
    the user gets one line."""
    env = {"SWARM_KUBO_BIN": "/bin/false"}
    with demo(tmp_path, "--store", "kubo", "--anvil-port", "0", env=env) as running:
        code = running.finish()
    assert code == 1, running.text()
    assert "anvil on " in running.text()  # it had started
    errors = running.stderr().strip().splitlines()
    assert len(errors) == 1 and errors[0].startswith("Error: "), errors
    assert "stopping anvil" in running.text()
    assert_nothing_left(running, set(), running.ports())


@contextmanager
def holding(*ports: int) -> Iterator[list[int]]:
    """Listens on ``ports`` (the ones it could bind: a port held by another process is held
    all the same); yields those this process holds."""
    with ExitStack() as stack:
        held = []
        for port in ports:
            sock = stack.enter_context(socket.socket())
            sock.setsockopt(socket.SOL_SOCKET, socket.SO_REUSEADDR, 1)
            try:
                sock.bind(("127.0.0.1", port))
            except OSError:
                continue
            sock.listen()
            held.append(port)
        yield held


def test_taken_default_ports_are_neither_used_nor_reported(tmp_path: Path) -> None:
    with holding(8545, 8000) as held:
        with demo(tmp_path, "--rounds", "1", "--no-keep") as running:
            code = running.finish()
        assert code == 0, running.text() + running.stderr()
        output = running.text()
        for port in (8545, 8000):
            assert re.search(
                rf"^port {port} is taken by .*: .* uses port \d+ instead$", output, re.MULTILINE
            )
            if port in held:
                assert f"port {port} is taken by pid {os.getpid()} (" in output
        chain, board = running.ports()[0], running.ports()[-1]
        assert chain != 8545 and board != 8000 and len(running.ports()) == 2
        assert re.search(
            rf"^indexer and leaderboard on http://127.0.0.1:{board} ", output, re.MULTILINE
        )
        assert "local swarm stopped" in output
        assert_nothing_left(running, set(), [chain, board])


def test_a_requested_port_that_is_taken_is_a_one_line_error(tmp_path: Path) -> None:
    with socket.socket() as sock:
        sock.bind(("127.0.0.1", 0))
        sock.listen()
        port = sock.getsockname()[1]
        with demo(tmp_path, "--anvil-port", str(port)) as running:
            code = running.finish()
    assert code == 1
    errors = running.stderr().strip().splitlines()
    assert len(errors) == 1, errors
    assert errors[0].startswith(f"Error: port {port} for anvil is taken by pid {os.getpid()} (")
    assert errors[0].endswith("): choose another (0: any free port)"), errors
    assert "anvil on" not in running.text()

"""One process per working folder: a second ``swarm local up`` (or ``swarm run``) on a folder in
use refuses in one line and destroys nothing; a folder whose holder died is taken over."""

from __future__ import annotations

import os
import signal
import subprocess
import sys
import textwrap
from pathlib import Path

import pytest
from click.testing import CliRunner

from node import folder_lock
from node.cli import main
from node.local.swarm import Services, prepare_workdir


def _holder(folder: Path) -> subprocess.Popen[str]:
    """Another process that holds ``folder``'s lock until it is killed."""
    code = textwrap.dedent(
        f"""
        import sys, time
        from pathlib import Path
        from node import folder_lock
        handle = folder_lock.hold(Path({str(folder)!r}), "a test holder")
        print("held", flush=True)
        time.sleep(600)
        """
    )
    process = subprocess.Popen(
        [sys.executable, "-c", code], stdout=subprocess.PIPE, text=True, cwd=Path.cwd()
    )
    assert process.stdout is not None and process.stdout.readline().strip() == "held"
    return process


def test_a_second_holder_is_refused_until_the_first_lets_go(tmp_path: Path) -> None:
    first = folder_lock.hold(tmp_path, "first")
    with pytest.raises(folder_lock.FolderInUse, match=rf"first \(pid {os.getpid()}\)"):
        folder_lock.hold(tmp_path, "second")
    first.close()
    folder_lock.hold(tmp_path, "second").close()


def test_a_killed_holder_releases_the_folder(tmp_path: Path) -> None:
    holder = _holder(tmp_path)
    try:
        with pytest.raises(folder_lock.FolderInUse, match=rf"pid {holder.pid}\)"):
            folder_lock.hold(tmp_path, "me")
    finally:
        holder.send_signal(signal.SIGKILL)
        holder.wait()
    folder_lock.hold(tmp_path, "me").close()  # provably gone: the kernel dropped its lock


def test_a_running_demo_s_folder_is_neither_cleared_nor_reused(tmp_path: Path) -> None:
    workdir = tmp_path / "demo"
    (workdir / "nodes" / "node-0").mkdir(parents=True)
    state = workdir / "nodes" / "node-0" / "round-state.json"
    state.write_text("{}")
    holder = _holder(workdir)
    try:
        lines: list[str] = []
        with pytest.raises(folder_lock.FolderInUse, match="a test holder"):
            prepare_workdir(workdir, Services(), lines.append)
        assert state.read_text() == "{}" and not lines  # nothing cleared, nothing said
    finally:
        holder.send_signal(signal.SIGKILL)
        holder.wait()
    services = Services()
    lines = []
    assert prepare_workdir(workdir, services, lines.append) == workdir.resolve()
    assert not state.exists() and (workdir / "nodes").is_dir()
    assert lines == [f"clearing {workdir.resolve()} (the demo that ran in it has stopped)"]
    with pytest.raises(folder_lock.FolderInUse):  # held by this demo until its services stop
        folder_lock.hold(workdir, "another demo")
    services.stop(lines.append)
    folder_lock.hold(workdir, "another demo").close()


def test_swarm_local_up_on_a_folder_in_use_says_so_in_one_line(tmp_path: Path) -> None:
    workdir = tmp_path / "demo"
    holder = _holder(workdir)
    try:
        result = CliRunner().invoke(main, ["local", "up", "--workdir", str(workdir)])
    finally:
        holder.send_signal(signal.SIGKILL)
        holder.wait()
    assert result.exit_code == 1
    (line,) = result.output.strip().splitlines()[-1:]
    assert line.startswith("Error: ") and f"pid {holder.pid}" in line and "Traceback" not in line
    assert "anvil" not in result.output  # refused before anything started

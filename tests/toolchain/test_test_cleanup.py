"""scripts/test leaves no temporary folders behind, and a plain pytest run that passes leaves none.

scripts/test runs on a copy of the project whose bootstrap and forge steps do nothing (this
checkout's .venv is linked) and whose tests write temporary files every way the suite does:
pytest's tmp_path and tmp_path_factory, tempfile.mkdtemp without cleanup. Its TMPDIR is a fresh
folder, which must be empty again once scripts/test has exited: after a pass, a failure, Ctrl-C or
SIGTERM; a folder that a killed run left is removed by the next run.
"""

from __future__ import annotations

import json
import os
import shutil
import signal
import subprocess
import sys
import time
from pathlib import Path

import pytest

from node.chain.abi import REPO_ROOT

NOTHING = "#!/usr/bin/env bash\nexit 0\n"
LEAVER = """\
import json, os, pathlib, tempfile, time

def test_writes_temporary_files(tmp_path, tmp_path_factory):
    made = [tmp_path, tmp_path_factory.mktemp("shared"), pathlib.Path(tempfile.mkdtemp())]
    for folder in made:
        (folder / "data").write_bytes(b"x" * 4096)
    record = {
        "made": [str(p) for p in made],
        "tempdir": tempfile.gettempdir(),
        "anvil_args": os.environ.get("SWARM_TEST_ANVIL_ARGS", ""),
    }
    pathlib.Path(os.environ["LEAVER_RECORD"]).write_text(json.dumps(record))
    time.sleep(float(os.environ.get("LEAVER_SLEEP", "0")))
    assert os.environ.get("LEAVER_FAILS") != "1", "deliberate failure"
"""


def copy_project(dest: Path) -> Path:
    """scripts/test with no-op bootstrap and forge steps, .venv linked, one test file."""
    (dest / "scripts").mkdir(parents=True)
    shutil.copy2(REPO_ROOT / "scripts" / "test", dest / "scripts" / "test")
    for name in ("bootstrap", "forge-test"):
        (dest / "scripts" / name).write_text(NOTHING)
        (dest / "scripts" / name).chmod(0o755)
    (dest / ".venv").symlink_to(REPO_ROOT / ".venv", target_is_directory=True)
    (dest / "tests").mkdir()
    (dest / "tests" / "test_leaver.py").write_text(LEAVER)
    return dest


@pytest.fixture()
def project(tmp_path: Path) -> Path:
    return copy_project(tmp_path / "project")


@pytest.fixture()
def temp_parent(tmp_path: Path) -> Path:
    """The TMPDIR scripts/test is started with."""
    folder = tmp_path / "tmp"
    folder.mkdir()
    return folder


def environment(temp_parent: Path, record: Path, **extra: str) -> dict[str, str]:
    env = {
        k: v
        for k, v in os.environ.items()
        if not k.startswith(("PYTEST_", "LEAVER_", "SWARM_TEST_", "SWARM_KEEP_"))
    }
    env.update(TMPDIR=str(temp_parent), LEAVER_RECORD=str(record), **extra)
    return env


def run_tests(project: Path, env: dict[str, str]) -> subprocess.CompletedProcess[str]:
    return subprocess.run(
        ["scripts/test", "-q", "-p", "no:cacheprovider", "tests"],
        cwd=project,
        env=env,
        capture_output=True,
        text=True,
        timeout=300,
        check=False,
    )


def leftovers(folder: Path) -> list[str]:
    return sorted(str(p.relative_to(folder)) for p in folder.rglob("*"))


@pytest.mark.parametrize(("fails", "status"), [("0", 0), ("1", 1)])
def test_scripts_test_removes_every_temporary_folder(
    project: Path, temp_parent: Path, tmp_path: Path, fails: str, status: int
) -> None:
    record = tmp_path / "record.json"
    result = run_tests(project, environment(temp_parent, record, LEAVER_FAILS=fails))
    assert result.returncode == status, result.stdout + result.stderr
    made = json.loads(record.read_text())
    scratch = Path(made["tempdir"])
    # the tests ran in a folder of their own below TMPDIR, and the session Anvil's state cache too
    assert scratch.parent == temp_parent and scratch.name.startswith("swarm-test.")
    assert all(Path(p).is_relative_to(scratch) for p in made["made"])
    assert made["anvil_args"] == f"--cache-path {scratch}/anvil"
    # and nothing is left of any of it
    assert not any(Path(p).exists() for p in made["made"])
    assert leftovers(temp_parent) == []


def test_a_callers_anvil_arguments_are_kept(
    project: Path, temp_parent: Path, tmp_path: Path
) -> None:
    record = tmp_path / "record.json"
    env = environment(temp_parent, record, SWARM_TEST_ANVIL_ARGS="--block-time 1")
    assert run_tests(project, env).returncode == 0
    scratch = json.loads(record.read_text())["tempdir"]
    assert json.loads(record.read_text())["anvil_args"] == (
        f"--block-time 1 --cache-path {scratch}/anvil"
    )
    env = environment(temp_parent, record, SWARM_TEST_ANVIL_ARGS="--cache-path /x/y")
    assert run_tests(project, env).returncode == 0
    assert json.loads(record.read_text())["anvil_args"] == "--cache-path /x/y"


@pytest.mark.parametrize(
    ("signal_number", "status"),
    [(signal.SIGINT, 130), (signal.SIGTERM, 143)],  # Ctrl-C; a CI job's timeout
)
def test_an_interrupted_run_still_cleans_up(
    project: Path, temp_parent: Path, tmp_path: Path, signal_number: int, status: int
) -> None:
    record = tmp_path / "record.json"
    process = subprocess.Popen(
        ["scripts/test", "-q", "-p", "no:cacheprovider", "tests"],
        cwd=project,
        env=environment(temp_parent, record, LEAVER_SLEEP="60"),
        stdout=subprocess.PIPE,
        stderr=subprocess.STDOUT,
        start_new_session=True,
    )
    try:
        deadline = time.monotonic() + 120
        while not record.exists() and time.monotonic() < deadline and process.poll() is None:
            time.sleep(0.1)
        assert record.exists(), "the test never started"
        assert leftovers(temp_parent) != []
        os.killpg(process.pid, signal_number)  # the whole process group, as a terminal does
        assert process.wait(timeout=60) == status
    finally:
        if process.poll() is None:
            os.killpg(process.pid, signal.SIGKILL)
            process.wait()
    assert leftovers(temp_parent) == []


def test_a_killed_runs_folder_is_removed_by_the_next_run(
    project: Path, temp_parent: Path, tmp_path: Path
) -> None:
    dead = subprocess.run([sys.executable, "-c", "import os; print(os.getpid())"],
                          capture_output=True, text=True, check=True)  # fmt: skip
    stale = temp_parent / "swarm-test.killed"
    (stale / "pytest").mkdir(parents=True)
    (stale / "pytest" / "data").write_text("x")
    (stale / ".owner").write_text(dead.stdout)
    alive = temp_parent / "swarm-test.running"  # another scripts/test, still running: kept
    alive.mkdir()
    (alive / ".owner").write_text(f"{os.getpid()}\n")
    assert run_tests(project, environment(temp_parent, tmp_path / "record.json")).returncode == 0
    assert leftovers(temp_parent) == ["swarm-test.running", "swarm-test.running/.owner"]


def test_keep_leaves_the_folder_and_says_where(
    project: Path, temp_parent: Path, tmp_path: Path
) -> None:
    record = tmp_path / "record.json"
    result = run_tests(project, environment(temp_parent, record, SWARM_KEEP_TEST_TMP="1"))
    assert result.returncode == 0, result.stdout + result.stderr
    scratch = Path(json.loads(record.read_text())["tempdir"])
    assert scratch.is_dir() and f"temporary files kept in {scratch}" in result.stderr
    assert not (scratch / ".owner").exists()  # so the next run does not take it for a stale one


def test_a_plain_pytest_run_that_passes_leaves_no_temporary_folders(
    project: Path, tmp_path: Path
) -> None:
    """pyproject.toml's pytest options (tmp_path_retention_policy), for pytest run directly."""
    shutil.copy2(REPO_ROOT / "pyproject.toml", project / "pyproject.toml")
    temproot, other = tmp_path / "temproot", tmp_path / "other"
    temproot.mkdir()
    other.mkdir()  # TMPDIR: tempfile.mkdtemp's folder, which is the test's own to remove
    env = environment(other, tmp_path / "record.json", PYTEST_DEBUG_TEMPROOT=str(temproot))
    python = str(project / ".venv" / "bin" / "python")
    command = [python, "-m", "pytest", "-q", "-p", "no:cacheprovider"]
    result = subprocess.run(
        command, cwd=project, env=env, capture_output=True, text=True, timeout=300, check=False
    )
    assert result.returncode == 0, result.stdout + result.stderr
    made = [Path(p) for p in json.loads((tmp_path / "record.json").read_text())["made"]]
    assert all(p.is_relative_to(temproot) for p in made[:2])  # pytest's: tmp_path, mktemp
    assert not any(p.exists() for p in made[:2])
    # pytest-of-<user>/ may stay, with a dangling pytest-current link; no file, no numbered folder
    assert [p for p in temproot.rglob("*") if p.is_file() and not p.is_symlink()] == []
    assert [p for p in temproot.glob("pytest-of-*/pytest-*") if p.is_dir()] == []

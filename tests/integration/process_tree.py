"""What a test needs to know about processes it did not start itself: a process's descendants,
which are still alive, processes found by their command line, and whether a port is free."""

from __future__ import annotations

import os
import subprocess
import time
from pathlib import Path

from node.local.ports import port_is_free


def descendants(pid: int) -> set[int]:
    """Every process below ``pid`` (node processes, Kubo daemons, Anvil, the indexer)."""
    found: set[int] = set()
    todo = [pid]
    while todo:
        listed = subprocess.run(
            ["ps", "-o", "pid=", "--ppid", str(todo.pop())],
            capture_output=True,
            text=True,
            check=False,  # ps exits 1 when there is no child
        )
        children = {int(x) for x in listed.stdout.split()}
        found |= children
        todo += children
    return found


def alive(pids: set[int]) -> set[int]:
    """Those of ``pids`` that still run (zombies do not count)."""
    running = set()
    for pid in pids:
        try:
            state = Path(f"/proc/{pid}/stat").read_text().rsplit(")", 1)[1].split()[0]
        except (FileNotFoundError, IndexError):
            continue
        if state != "Z":
            running.add(pid)
    return running


def wait_gone(pids: set[int], timeout: float = 30) -> set[int]:
    """Waits (bounded) until none of ``pids`` runs; those still running."""
    deadline = time.monotonic() + timeout
    while alive(pids) and time.monotonic() < deadline:
        time.sleep(0.2)
    return alive(pids)


def mentioning(text: str) -> set[int]:
    """Live processes (not this one) whose command line contains ``text``."""
    found = set()
    for proc in Path("/proc").glob("[0-9]*"):
        try:
            command = (proc / "cmdline").read_bytes().replace(b"\0", b" ").decode(errors="replace")
        except OSError:
            continue
        if text in command and int(proc.name) != os.getpid():
            found.add(int(proc.name))
    return alive(found)


def ports_free(ports: list[int], timeout: float = 30) -> bool:
    """Waits (bounded) until a server could bind every one of ``ports`` again."""
    deadline = time.monotonic() + timeout
    while not all(port_is_free(p) for p in ports):
        if time.monotonic() > deadline:
            return False
        time.sleep(0.2)
    return True

"""One process at a time per working folder: the demo's ``.swarm-local`` and a node's state folder.

``hold(folder, what)`` takes an exclusive ``flock`` on ``folder/.lock`` and writes its pid and
``what`` there; the lock lasts until the returned handle is closed or the process ends, however it
ends (the kernel drops it), so a folder whose lock can be taken is provably not in use by a live
holder. A second holder gets :class:`FolderInUse`, one line naming the process that has it.
POSIX only (``fcntl.flock``), like the local store's lock.
"""

from __future__ import annotations

import fcntl
import os
from pathlib import Path
from typing import IO

LOCK_NAME = ".lock"


class FolderInUse(RuntimeError):
    """Another live process holds the folder."""


def hold(folder: Path, what: str) -> IO[str]:
    """Locks ``folder`` (created if missing) for this process; FolderInUse when another has it."""
    folder.mkdir(parents=True, exist_ok=True)
    handle = open(folder / LOCK_NAME, "a+", encoding="utf-8")  # noqa: SIM115 - held by the caller
    try:
        fcntl.flock(handle, fcntl.LOCK_EX | fcntl.LOCK_NB)
    except BlockingIOError:
        handle.seek(0)
        holder = handle.read().strip() or "another process"
        handle.close()
        raise FolderInUse(
            f"{folder} is in use by {holder}: stop that one first (Ctrl-C), or use another folder"
        ) from None
    handle.seek(0)
    handle.truncate()
    handle.write(f"{what} (pid {os.getpid()})\n")
    handle.flush()
    return handle

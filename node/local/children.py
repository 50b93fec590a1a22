"""Child processes that end with their parent, however the parent ends.

``spawn`` starts a child whose ``preexec_fn`` asks the kernel (Linux:
``prctl(PR_SET_PDEATHSIG, SIGKILL)``) to kill it when its parent dies, so even a parent killed
with SIGKILL leaves nothing behind; ``stop`` ends one on a normal exit (a signal, a grace period,
then SIGTERM, then SIGKILL). The kernel tracks the *thread* that started the child: start
long-lived children from a thread that lives as long as they should (the main thread).
Elsewhere (macOS) only ``stop`` ends them.

Each child gets its own process group, so what a terminal sends to its foreground group (Ctrl-C,
SIGHUP when it closes) reaches only the parent, which then stops its children in order (nodes
first, the chain last) instead of every process dying at once under the others.
"""

from __future__ import annotations

import ctypes
import os
import signal
import subprocess
import sys
from collections.abc import Sequence
from typing import Any

_PR_SET_PDEATHSIG = 1


def die_with_parent() -> None:
    """In the child, before exec: get SIGKILL when the parent dies (Linux; no-op elsewhere)."""
    if not sys.platform.startswith("linux"):
        return
    libc = ctypes.CDLL(None, use_errno=True)
    if libc.prctl(_PR_SET_PDEATHSIG, signal.SIGKILL, 0, 0, 0) != 0:
        os._exit(127)  # cannot promise to die with the parent: do not run at all
    if os.getppid() == 1:
        os._exit(127)  # the parent died before prctl took effect


def spawn(command: Sequence[str], **popen: Any) -> subprocess.Popen[Any]:
    """``subprocess.Popen(command, **popen)`` for a child that dies with this process (stdin
    from /dev/null and its own process group unless given)."""
    popen.setdefault("stdin", subprocess.DEVNULL)
    popen.setdefault("process_group", 0)
    return subprocess.Popen(list(command), preexec_fn=die_with_parent, **popen)


def stop(
    process: subprocess.Popen[Any], *, grace: float = 5.0, sig: int = signal.SIGTERM
) -> int:
    """Sends ``sig`` and waits ``grace`` seconds, then terminates, then kills; the exit status."""
    for send, wait in ((sig, grace), (signal.SIGTERM, 5.0), (signal.SIGKILL, 5.0)):
        if process.poll() is not None:
            break
        try:
            process.send_signal(send)
            process.wait(timeout=wait)
        except subprocess.TimeoutExpired:
            continue
        except ProcessLookupError:
            break
    return process.wait()

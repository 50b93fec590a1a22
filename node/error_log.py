"""Where a command's tracebacks go: a log file, never the terminal (the terminal gets one line).

``swarm`` writes every failure's traceback to ``$SWARM_ERROR_LOG``, else
``<cache root>/logs/swarm-errors.log`` (``node.defaults.cache_root``), appended with the time
and the command line; the local swarm demo writes its own to ``<workdir>/error.log``.
"""

from __future__ import annotations

import os
import sys
import time
import traceback
from pathlib import Path

from node.defaults import cache_root

#: A log that grew past this is started anew (the newest failures are the ones asked about).
MAX_LOG_BYTES = 1_000_000


def error_log_path() -> Path:
    named = os.environ.get("SWARM_ERROR_LOG")
    return Path(named) if named else cache_root() / "logs" / "swarm-errors.log"


def save_traceback(exc: BaseException, path: Path | None = None) -> Path | None:
    """Appends ``exc``'s traceback to the log; returns the log's path, or None when it cannot be
    written (a failure to log never hides the error itself)."""
    path = (path or error_log_path()).expanduser().resolve()
    header = f"--- {time.strftime('%Y-%m-%d %H:%M:%S')} {' '.join(sys.argv)}\n"
    try:
        path.parent.mkdir(parents=True, exist_ok=True)
        mode = "w" if path.exists() and path.stat().st_size > MAX_LOG_BYTES else "a"
        with path.open(mode, encoding="utf-8") as log:
            log.write(header + "".join(traceback.format_exception(exc)))
    except OSError:
        return None
    return path


def unexpected_error_line(exc: BaseException, log: Path | None, *, after: str = "") -> str:
    """One line for an error the program did not expect: its type and first line, what was done
    about it (``after``), and where its traceback is."""
    line = f"{type(exc).__name__}: {exc}".splitlines()[0]
    where = f"traceback in {log}, please report it" if log else "the log file is not writable"
    said = "; ".join(part for part in (after, where) if part)
    return f"{line} ({said})"

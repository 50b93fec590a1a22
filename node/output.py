"""The command line's output when its terminal or pipe may go away.

``Output.echo`` is ``click.echo`` that never raises: when a write fails (a reader that closed
early: BrokenPipeError; a closed terminal: EIO), that stream is pointed at /dev/null (so nothing
more fails, not even Python's final flush, which would print "Exception ignored ...
BrokenPipeError"), and ``on_lost`` is called once: the command decides whether to stop.
"""

from __future__ import annotations

import os
import sys
import threading
from collections.abc import Callable

import click


class Output:
    """Thread-safe echo to stdout (or stderr) that survives the stream going away."""

    def __init__(self, on_lost: Callable[[], None] = lambda: None) -> None:
        self.on_lost = on_lost
        self.lost = False
        self._lock = threading.Lock()

    def echo(self, message: str = "") -> None:
        self._write(message, err=False)

    def error(self, message: str) -> None:
        self._write(message, err=True)

    def _write(self, message: str, *, err: bool) -> None:
        with self._lock:
            try:
                click.echo(message, err=err)
                return
            except (OSError, ValueError):
                _to_devnull(sys.stderr if err else sys.stdout)
                first, self.lost = not self.lost, True
        if first:
            self.on_lost()


def _to_devnull(stream: object) -> None:
    """Points ``stream``'s file descriptor at /dev/null (what it still buffers goes there too)."""
    try:
        fd = stream.fileno()  # type: ignore[attr-defined]
    except (AttributeError, OSError, ValueError):
        return
    null = os.open(os.devnull, os.O_WRONLY)
    try:
        os.dup2(null, fd)
    finally:
        os.close(null)

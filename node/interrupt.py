"""Stopping long work early: once a stop is asked for (Ctrl-C, SIGTERM), generation and training
end within one decode step or micro-batch instead of at the end of the round's step.

A driver (``swarm run``'s loop, the lockstep demo) marks the work it runs as
``interruptible(stop_requested)``; the long loops call ``check()``, which raises
:class:`Interrupted` when a stop was asked for. The interrupted step's work is dropped: every step
of a round is idempotent and saves only what it finished, so nothing half-done is kept.
"""

from __future__ import annotations

import threading
from collections.abc import Callable, Iterator
from contextlib import contextmanager

_lock = threading.Lock()
_stop_requested: list[Callable[[], bool]] = []


class Interrupted(Exception):
    """A stop was asked for while long work ran; the work was abandoned."""


@contextmanager
def interruptible(stop_requested: Callable[[], bool]) -> Iterator[None]:
    """While inside, ``check()`` (in any thread) raises once ``stop_requested()`` is true."""
    with _lock:
        _stop_requested.append(stop_requested)
    try:
        yield
    finally:
        with _lock:
            _stop_requested.remove(stop_requested)


def check() -> None:
    """Raises Interrupted when a driver's stop was asked for; cheap enough for every step."""
    if any(requested() for requested in tuple(_stop_requested)):
        raise Interrupted("stopped on request")

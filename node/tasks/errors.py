"""The task layer's exception family.

    TaskError               anything wrong with task presets or task derivation inputs
    ├── UnknownPreset       a preset name this node does not know (never guessed)
    ├── InvalidTaskInput    a round seed, peer address or item index outside the protocol's ranges
    └── UnsafeScorer        the dataset's scorer is not reviewed for untrusted answers (never run)

A malformed preset definition is a ``pydantic.ValidationError`` raised when the ``Preset`` is built,
so a bad preset never exists. Scoring never raises: a completion a scorer chokes on earns 0.0.
"""

from __future__ import annotations


class TaskError(Exception):
    """Base of every error raised by ``node.tasks``."""


class UnknownPreset(TaskError, LookupError):
    """The preset name is not one of ``node.tasks.PRESETS``."""

    def __init__(self, name: str, known: list[str]) -> None:
        super().__init__(f"unknown task preset {name!r}; known presets: {', '.join(sorted(known))}")
        self.name = name
        self.known = sorted(known)

    def __reduce__(self):  # keep the attributes when pickled (e.g. across processes)
        return (type(self), (self.name, self.known))


class InvalidTaskInput(TaskError, ValueError):
    """A derivation input is outside its protocol range (32-byte seed, 20-byte address, uint32)."""


class UnsafeScorer(TaskError):
    """The dataset's reasoning-gym scorer is not on the reviewed list; it is never called."""

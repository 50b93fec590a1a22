"""Real Kubo daemons for tests: the bootstrap's build (node.local.kubo), one private swarm key.

``require_kubo()`` skips a test when no Kubo is installed, with the reason, and fails it under
``CI=true`` (CI must run every Kubo test). ``KuboSwarm`` starts daemons in one folder, all on the
same swarm key, and stops every one it started when closed.
"""

from __future__ import annotations

import os
from collections.abc import Iterator
from contextlib import contextmanager
from pathlib import Path

import pytest

from node.local.kubo import KuboDaemon, KuboMissing, kubo_binary, new_swarm_key, start_kubo


def require_kubo() -> Path:
    """The Kubo binary; skips the test (fails it under CI) when there is none."""
    try:
        return kubo_binary()
    except KuboMissing as error:
        if os.environ.get("CI"):
            pytest.fail(str(error), pytrace=False)
        pytest.skip(str(error))


class KuboSwarm:
    """Daemons sharing one swarm key, each in ``folder/<name>``."""

    def __init__(self, folder: Path, swarm_key: bytes | None = None) -> None:
        self.folder = folder
        self.swarm_key = swarm_key or new_swarm_key()
        self.daemons: list[KuboDaemon] = []

    def start(self, name: str, *, swarm_key: bytes | None = None) -> KuboDaemon:
        daemon = start_kubo(self.folder / name, swarm_key or self.swarm_key)
        self.daemons.append(daemon)
        return daemon

    def close(self) -> None:
        for daemon in self.daemons:
            daemon.stop()


@contextmanager
def kubo_swarm(folder: Path) -> Iterator[KuboSwarm]:
    require_kubo()
    swarm = KuboSwarm(folder)
    try:
        yield swarm
    finally:
        swarm.close()

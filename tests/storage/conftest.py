"""Real Kubo daemons for the storage tests (tests/storage/kubo_daemons.py).

- ``kubo_daemon``  session: one private daemon shared by the tests that only put and get
- ``kubo_swarm``   per test: a KuboSwarm (daemons on one swarm key), all stopped afterwards
"""

from __future__ import annotations

from collections.abc import Iterator
from pathlib import Path

import pytest

from node.local.kubo import KuboDaemon
from tests.storage.kubo_daemons import KuboSwarm, kubo_swarm as running_kubo_swarm


@pytest.fixture(scope="session")
def kubo_daemon(tmp_path_factory: pytest.TempPathFactory) -> Iterator[KuboDaemon]:
    with running_kubo_swarm(tmp_path_factory.mktemp("kubo-session")) as swarm:
        yield swarm.start("shared")


@pytest.fixture
def kubo_swarm(tmp_path: Path) -> Iterator[KuboSwarm]:
    with running_kubo_swarm(tmp_path) as swarm:
        yield swarm

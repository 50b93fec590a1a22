"""Fixtures of the indexer tests: fresh databases (SQLite files; Postgres when a server can be
started, see postgres.py) and indexers on the session's test chain."""

from __future__ import annotations

import itertools
from collections.abc import Callable, Iterator

import pytest
from web3 import Web3

from coordinator_indexer.ingest import Indexer, IngestSettings
from coordinator_indexer.store import Store
from node.chain.deployment import Deployment
from tests.chain_fixtures import TEST_RETRY
from tests.indexer.scenario import play
from tests.waiting import wait_for


@pytest.fixture
def sqlite_url(tmp_path) -> Callable[[str], str]:
    """``sqlite_url(name)`` -> a URL of a new SQLite file in the test's directory."""
    return lambda name="indexer": f"sqlite:///{tmp_path / name}.db"


@pytest.fixture
def open_store() -> Iterator[Callable[[str], Store]]:
    """``open_store(url)`` -> a migrated Store, closed after the test."""
    opened: list[Store] = []

    def make(url: str) -> Store:
        store = Store.open(url)
        opened.append(store)
        return store

    yield make
    for store in opened:
        store.close()


@pytest.fixture
def make_indexer(
    w3: Web3, deployment: Deployment, open_store: Callable[[str], Store], sqlite_url
) -> Iterator[Callable[..., Indexer]]:
    """``make_indexer(url=None, **settings)`` -> a prepared Indexer on the test chain, on a new
    SQLite database of its own unless ``url`` is given; closed (its reader ended) after the
    test."""
    made = itertools.count()
    indexers: list[Indexer] = []

    def make(url: str | None = None, **settings: object) -> Indexer:
        options = {"confirmations": 6, "poll_interval": 0.05, **settings}
        indexer = Indexer(
            w3,
            deployment,
            open_store(url or sqlite_url(f"indexer-{next(made)}")),
            IngestSettings(**options),  # type: ignore[arg-type]
            retry=TEST_RETRY,
        )
        indexers.append(indexer)
        indexer.prepare()
        return indexer

    yield make
    for indexer in indexers:
        indexer.close()


@pytest.fixture
def served(chain, client_for, dev_accounts, deployment, tmp_path) -> Iterator[tuple]:
    """The scenario played (tests/indexer/scenario.py), and a running service that indexed all
    of it."""
    from tests.indexer.test_api import caught_up, start_service

    swarm = play(chain, client_for, dev_accounts[1:])
    service = start_service(chain, deployment, tmp_path)
    head = chain.w3.eth.block_number
    wait_for(lambda: caught_up(service, head), what="the indexer to reach the head")
    yield service, swarm
    service.stop()

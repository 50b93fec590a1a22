"""Ingestion against the real test chain: the scenario's transactions end up as the right rows."""

from __future__ import annotations

import pytest
from sqlalchemy import select
from web3 import HTTPProvider, Web3

from coordinator_indexer import schema
from coordinator_indexer.errors import DeploymentMismatch
from coordinator_indexer.ingest import Indexer, IngestSettings
from node.chain.deployment import Deployment
from tests.chain_fixtures import TEST_RETRY
from tests.indexer.scenario import (
    EXPECTED_CLAIMED,
    EXPECTED_RANKING,
    EXPECTED_STAKE,
    EXPECTED_VERIFIED,
    ETHER,
    play,
)

pytestmark = pytest.mark.integration


def peers_by_name(store) -> dict:
    with store.engine.connect() as conn:
        return {row.name: row for row in conn.execute(select(schema.peers))}


def test_scenario_is_indexed_with_verified_and_claimed_rewards(
    chain, client_for, dev_accounts, make_indexer
) -> None:
    swarm = play(chain, client_for, dev_accounts[1:])
    indexer = make_indexer()
    result = indexer.sync()
    assert result.caught_up and result.cursor == chain.w3.eth.block_number
    peers = peers_by_name(indexer.store)
    assert {n: p.verified_milli for n, p in peers.items()} == EXPECTED_VERIFIED
    assert {n: p.claimed_milli for n, p in peers.items()} == EXPECTED_CLAIMED
    assert {n: int(p.stake_wei) for n, p in peers.items()} == {
        n: eth * ETHER for n, eth in EXPECTED_STAKE.items()
    }
    assert {n: p.status for n, p in peers.items()} == {
        "alice": "active",
        "bob": "active",
        "carol": "active",
        "dave": "exiting",
        "erin": "active",
    }
    assert (peers["carol"].slashes, peers["carol"].slashed_wei) == (1, str(ETHER))
    assert peers["carol"].flags_received == 2
    assert {n: p.rounds for n, p in peers.items()} == {
        "alice": 2,
        "bob": 2,
        "carol": 2,
        "dave": 2,
        "erin": 0,
    }
    assert peers["dave"].attestations_given == 3 and peers["alice"].attestations_given == 6
    # what the contract itself says agrees with the derived rows
    for name, client in swarm.clients.items():
        assert int(peers[name].stake_wei) == client.peer_info(client.account_address).stake
    ranking = sorted(peers.values(), key=lambda p: (-p.verified_milli, -p.claimed_milli))
    assert [p.name for p in ranking] == EXPECTED_RANKING


def test_batches_rounds_and_disputes(chain, client_for, dev_accounts, make_indexer) -> None:
    swarm = play(chain, client_for, dev_accounts[1:])
    indexer = make_indexer()
    indexer.sync()
    carol, r = swarm.address("carol"), swarm.round
    with indexer.store.engine.connect() as conn:
        batch = conn.execute(
            select(schema.publications).where(
                schema.publications.c.round == r, schema.publications.c.peer == carol
            )
        ).one()
        rounds = {row.round: row for row in conn.execute(select(schema.rounds))}
        (dispute,) = conn.execute(select(schema.disputes)).all()
    assert (batch.attestations, batch.flags, batch.agreements) == (3, 2, 1)
    assert (batch.verified_milli, batch.claimed_milli) == (1200, 9000)
    assert batch.settled and batch.slashed
    assert (dispute.round, dispute.subject, dispute.slashed) == (r, carol, True)
    assert int(dispute.amount_wei) == ETHER
    assert sorted(rounds) == [r, r + 1]
    assert (rounds[r].publications, rounds[r].attestations, rounds[r].flags) == (4, 12, 2)
    assert rounds[r].verified_milli == 4900 + 4000 + 1200 + 3000
    assert rounds[r + 1].claimed_milli == 6000 + 4500 + 8000 + 3500
    assert (rounds[r].slashes, rounds[r + 1].slashes) == (1, 0)


def test_small_ranges_and_incremental_syncs_give_the_same_tables(
    chain, client_for, dev_accounts, make_indexer
) -> None:
    """One range per block, synced after every phase == one big range at the end."""
    step_by_step = make_indexer(max_range=1)
    play(chain, client_for, dev_accounts[1:], between=lambda _phase: step_by_step.sync())
    at_once = make_indexer(max_range=10_000)
    at_once.sync()
    assert step_by_step.store.dump() == at_once.store.dump()
    assert step_by_step.store.counts()["publications"] == 8


class RangeLimitedProvider(HTTPProvider):
    """A real RPC that, like hosted ones, refuses eth_getLogs over more than ``max_range`` blocks."""

    def __init__(self, url: str, max_range: int) -> None:
        super().__init__(url, exception_retry_configuration=None)
        self.max_range = max_range
        self.refused = 0

    def make_request(self, method, params):
        if method == "eth_getLogs":
            low, high = int(params[0]["fromBlock"], 16), int(params[0]["toBlock"], 16)
            if high - low + 1 > self.max_range:
                self.refused += 1
                return {
                    "jsonrpc": "2.0",
                    "id": 1,
                    "error": {"code": -32005, "message": "query exceeds max block range 3"},
                }
        return super().make_request(method, params)


def test_an_rpc_that_limits_ranges_is_read_in_smaller_ranges(
    chain, client_for, dev_accounts, deployment, open_store, sqlite_url, make_indexer
) -> None:
    play(chain, client_for, dev_accounts[1:])
    provider = RangeLimitedProvider(chain.w3.provider.endpoint_uri, max_range=3)
    limited = Indexer(
        Web3(provider), deployment, open_store(sqlite_url("limited")), retry=TEST_RETRY
    )
    limited.prepare()
    limited.sync()
    reference = make_indexer()
    reference.sync()
    assert provider.refused > 0
    assert limited.store.dump()["publications"] == reference.store.dump()["publications"]
    assert limited.store.dump()["peers"] == reference.store.dump()["peers"]


def test_nothing_new_is_an_idle_step(chain, make_indexer) -> None:
    indexer = make_indexer()
    indexer.sync()
    before = indexer.store.dump()
    result = indexer.step()
    assert result.kind == "idle" and result.events == 0
    chain.mine(3)
    assert indexer.step().kind == "applied"
    assert indexer.store.state().cursor_block == chain.w3.eth.block_number
    assert indexer.store.dump()["peers"] == before["peers"]


def test_a_database_of_another_deployment_is_refused(
    chain, w3, deployment, make_indexer, open_store, sqlite_url
) -> None:
    url = sqlite_url("shared")
    make_indexer(url).sync()
    other = Deployment.model_validate(
        {
            **deployment.model_dump(by_alias=True),
            "coordinator": "0x" + "11" * 20,
        }
    )
    with pytest.raises(DeploymentMismatch, match="use another database"):
        Indexer(w3, other, open_store(url), IngestSettings(), retry=TEST_RETRY).prepare()


def test_a_chain_without_the_deployment_block_is_refused(
    w3, deployment, open_store, sqlite_url
) -> None:
    moved = Deployment.model_validate(
        {**deployment.model_dump(by_alias=True), "block_hash": "0x" + "22" * 32}
    )
    with pytest.raises(DeploymentMismatch, match="was the chain reset"):
        Indexer(w3, moved, open_store(sqlite_url()), retry=TEST_RETRY).prepare()

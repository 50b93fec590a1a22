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
    ETHER,
    EXPECTED_CLAIMED,
    EXPECTED_DUTY,
    EXPECTED_STAKE_WEI,
    EXPECTED_VERIFIED,
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
    assert {n: int(p.stake_wei) for n, p in peers.items()} == EXPECTED_STAKE_WEI
    assert {n: p.status for n, p in peers.items()} == {
        **{n: "active" for n in EXPECTED_VERIFIED},
        "erin": "exiting",
    }
    assert (peers["carol"].slashes, peers["carol"].slashed_wei) == (1, str(ETHER))
    assert (peers["carol"].flags_received, peers["alice"].flags_received) == (2, 1)
    assert peers["dave"].attestations_given == 6 and peers["frank"].attestations_given == 1
    assert peers["erin"].withdrawable_at == chain.current_round() + 2 * 5 + 1  # exit + 2J + 1
    # what the contract itself says agrees with the derived rows
    for name, client in swarm.clients.items():
        assert int(peers[name].stake_wei) == client.peer_info(client.account_address).stake
    ranking = sorted(
        peers.values(), key=lambda p: (-p.verified_milli, -p.claimed_milli, int(p.address, 16))
    )
    assert [p.name for p in ranking] == swarm.ranking()


def test_batches_votes_settlements_and_duty(chain, client_for, dev_accounts, make_indexer) -> None:
    swarm = play(chain, client_for, dev_accounts[1:])
    indexer = make_indexer()
    indexer.sync()
    r, names = swarm.round, swarm.names_by_address()
    p, d = schema.publications, schema.settlements
    with indexer.store.engine.connect() as conn:
        batches = {names[row.peer]: row for row in conn.execute(select(p).where(p.c.round == r))}
        rounds = {row.round: row for row in conn.execute(select(schema.rounds))}
        settlements = {names[row.subject]: row for row in conn.execute(select(d))}
        duties = conn.execute(select(schema.duties)).all()
        (seal,) = conn.execute(select(schema.seals).where(schema.seals.c.round == r)).all()
        counts = indexer.store.counts()
    carol, alice = batches["carol"], batches["alice"]
    assert (carol.attestations, carol.flags, carol.agreements) == (3, 2, 1)
    assert (carol.flag_weight_wei, carol.agree_weight_wei) == (str(4 * ETHER), str(ETHER))
    assert (carol.verified_milli, carol.claimed_milli, carol.outcome) == (0, 9000, "upheld")
    assert carol.settled and carol.slashed and not carol.verified
    assert (alice.flag_weight_wei, alice.agree_weight_wei) == (str(ETHER), str(5 * ETHER))
    assert (alice.verified_milli, alice.outcome, alice.verified) == (5000, "rejected", True)
    assert (batches["bob"].outcome, batches["bob"].verified) == (None, True)
    # the settlements as the chain decided them, with the seal's view of the weights
    assert settlements["carol"].slashed and int(settlements["carol"].amount_wei) == ETHER
    assert settlements["carol"].settler == swarm.address("erin")
    assert int(settlements["carol"].tip_wei) == ETHER * 500 // 10_000
    assert not settlements["alice"].slashed and settlements["alice"].amount_wei == "0"
    assert (int(seal.total_weight_wei), seal.committee_size) == (9 * ETHER, 64)
    assert counts["seal_weights"] == 12 and counts["commits"] == 9 and counts["votes"] == 25
    assert counts["flag_resolutions"] == 3 and counts["agreement_penalties"] == 1
    assert counts["claims"] == 1 and counts["settlements"] == 2
    # committee duty: seats held and revealed per peer, both rounds
    totals: dict[str, list[int]] = {}
    for row in duties:
        seats, done = totals.setdefault(names[row.peer], [0, 0])
        totals[names[row.peer]] = [seats + row.seats, done + row.done]
    assert {n: tuple(v) for n, v in totals.items()} == EXPECTED_DUTY
    assert sorted(rounds) == [r, r + 1]
    assert (rounds[r].publications, rounds[r].attestations, rounds[r].flags) == (4, 13, 3)
    assert (rounds[r].disputes, rounds[r].slashes, rounds[r].sealed) == (2, 1, True)
    assert (rounds[r].seats, rounds[r].seats_done) == (20, 13)
    assert rounds[r].verified_milli == 5000 + 4000 + 0 + 3000
    assert rounds[r + 1].claimed_milli == 6000 + 4500 + 8000 + 3500


def test_stake_changes_of_v2(chain, client_for, dev_accounts, make_indexer) -> None:
    """Slash, forfeited bond, agreement penalty, pending stake and exit, as stake history."""
    swarm = play(chain, client_for, dev_accounts[1:])
    indexer = make_indexer()
    indexer.sync()
    s = schema.stake_changes
    with indexer.store.engine.connect() as conn:
        rows = conn.execute(select(s).where(s.c.kind.not_in(["register"]))).all()
    kinds = {(swarm.names_by_address()[row.peer], row.kind): row for row in rows}
    assert set(kinds) == {
        ("carol", "slash"),
        ("frank", "forfeit"),
        ("dave", "penalty"),
        ("bob", "add"),
        ("erin", "exit"),
    }
    assert int(kinds[("frank", "forfeit")].amount_wei) == ETHER // 10
    assert int(kinds[("dave", "penalty")].amount_wei) == ETHER // 10
    assert kinds[("bob", "add")].counts_from_round == chain.current_round() + 1
    assert kinds[("erin", "exit")].exit_round == chain.current_round()


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


def test_the_batch_maximum_is_n_times_g_of_the_rules_of_its_round(
    chain, client_for, dev_accounts, make_indexer
) -> None:
    """The rules history rebuilt from ParametersScheduled, as the contract keeps it: the owner
    schedules n = 2, G = 2 (from c + J + 1) and, two rounds later and before they start, n = 3,
    G = 2 (from c + 2 + J + 1), which replaces them. Each batch's maximum is rulesAt(round)'s
    n x G x 1000: the deployment's 16,000 up to the second schedule's round, then 6,000."""
    owner = client_for(dev_accounts[0])
    publisher = client_for(dev_accounts[1])
    publisher.register("pat", ETHER)
    c = chain.current_round()
    base = owner.rules_at(c)
    for when, n in ((c, 2), (c + 2, 3)):
        chain.warp_to_round(when)
        shape = {"tasks_per_round": n, "group_size": 2}
        owner.schedule_parameters(ETHER, base.model_copy(update=shape))
    rounds = (c + 2, c + 6, c + 7, c + 8, c + 9)  # c + 6: the replaced entry's round
    for round_ in rounds:
        chain.warp_to_round(round_)
        publisher.publish_rollouts(round_, b"\x01" * 32, 4, 16, 6000)
    indexer = make_indexer()
    indexer.sync()
    with indexer.store.engine.connect() as conn:
        p = schema.publications
        maxima = {row.round: row.reward_max_milli for row in conn.execute(select(p))}
    assert maxima == {r: owner.rules_at(r).max_reward_milli for r in rounds}
    assert maxima == {c + 2: 16_000, c + 6: 16_000, c + 7: 16_000, c + 8: 6000, c + 9: 6000}

"""The HTTP API over a real server (uvicorn on a free port) fed by the real ingestion thread."""

from __future__ import annotations

from collections.abc import Iterator

import pytest
import requests

from coordinator_indexer.ingest import IngestSettings
from coordinator_indexer.service import IndexerService, ServiceSettings
from tests.indexer.scenario import (
    EXPECTED_CLAIMED,
    EXPECTED_RANKING,
    EXPECTED_STAKE,
    EXPECTED_VERIFIED,
    Swarm,
    play,
)
from tests.waiting import wait_for

pytestmark = pytest.mark.integration


def start_service(chain, deployment, tmp_path, **ingest: object) -> IndexerService:
    settings = ServiceSettings(
        rpc_url=chain.w3.provider.endpoint_uri,
        deployment=deployment.save(tmp_path / "deployment.json"),
        db_url=f"sqlite:///{tmp_path / 'api.db'}",
        port=0,
        ingest=IngestSettings(**{"confirmations": 6, "poll_interval": 0.05, **ingest}),
    )
    service = IndexerService(settings)
    service.start()
    return service


def caught_up(service: IndexerService, block: int) -> bool:
    health = requests.get(service.url + "health", timeout=5).json()
    return health["indexed_block"] == block and health["status"] == "ok"


@pytest.fixture
def served(chain, client_for, dev_accounts, deployment, tmp_path) -> Iterator[tuple]:
    """The scenario played, and a running service that indexed all of it."""
    swarm = play(chain, client_for, dev_accounts[1:])
    service = start_service(chain, deployment, tmp_path)
    head = chain.w3.eth.block_number
    wait_for(lambda: caught_up(service, head), what="the indexer to reach the head")
    yield service, swarm
    service.stop()


def get(service: IndexerService, path: str, **params: object) -> requests.Response:
    return requests.get(service.url + path.lstrip("/"), params=params, timeout=10)


def test_leaderboard_ranks_by_verified_reward(served) -> None:
    service, swarm = served
    body = get(service, "/api/leaderboard").json()
    names = swarm.names_by_address()
    assert body["total"] == 5 and body["sort"] == "rank" and body["order"] == "asc"
    assert [names[e["address"]] for e in body["entries"]] == EXPECTED_RANKING
    assert [e["rank"] for e in body["entries"]] == [1, 2, 3, 4, 5]
    for entry in body["entries"]:
        name = names[entry["address"]]
        assert entry["name"] == name
        assert entry["verified_reward"] == EXPECTED_VERIFIED[name] / 1000
        assert entry["claimed_reward"] == EXPECTED_CLAIMED[name] / 1000
        assert entry["stake_eth"] == EXPECTED_STAKE[name]
    carol = next(e for e in body["entries"] if e["name"] == "carol")
    assert (carol["slashes"], carol["flags_received"], carol["rounds"]) == (1, 2, 2)


def test_leaderboard_paging_and_sorting(served) -> None:
    service, _ = served
    page = get(service, "/api/leaderboard", limit=2, offset=2).json()
    assert [e["name"] for e in page["entries"]] == ["bob", "dave"]
    assert [e["rank"] for e in page["entries"]] == [3, 4]
    by_claim = get(service, "/api/leaderboard", sort="claimed").json()
    assert [e["name"] for e in by_claim["entries"]][:2] == ["carol", "alice"]
    assert by_claim["entries"][0]["rank"] == 2  # rank stays the verified rank
    by_name = get(service, "/api/leaderboard", sort="name").json()
    assert [e["name"] for e in by_name["entries"]] == sorted(EXPECTED_RANKING)
    worst_first = get(service, "/api/leaderboard", sort="rank", order="desc").json()
    assert [e["name"] for e in worst_first["entries"]] == EXPECTED_RANKING[::-1]
    by_stake = get(service, "/api/leaderboard", sort="stake").json()
    assert by_stake["entries"][0]["name"] == "bob" and by_stake["entries"][-1]["name"] == "carol"
    beyond = get(service, "/api/leaderboard", offset=50).json()
    assert beyond["entries"] == [] and beyond["total"] == 5


@pytest.mark.parametrize(
    ("params", "mentions"),
    [
        ({"limit": 0}, "limit"),
        ({"limit": 501}, "limit"),
        ({"offset": -1}, "offset"),
        ({"limit": "ten"}, "limit"),
        ({"sort": "wealth"}, "sort"),
        ({"order": "sideways"}, "order"),
    ],
)
def test_bad_paging_is_a_clear_422(served, params, mentions) -> None:
    service, _ = served
    response = get(service, "/api/leaderboard", **params)
    assert response.status_code == 422
    detail = response.json()["detail"]
    assert isinstance(detail, str) and mentions in detail


def test_peer_history(served) -> None:
    service, swarm = served
    carol = swarm.address("carol")
    body = get(service, f"/api/peers/{carol.lower()}").json()  # any case is accepted
    assert body["address"] == carol and body["rank"] == 2
    assert [b["round"] for b in body["batches"]] == [swarm.round, swarm.round + 1]
    first = body["batches"][0]
    assert (first["claimed_reward"], first["verified_reward"]) == (9.0, 1.2)
    assert (first["flags"], first["agreements"], first["slashed"]) == (2, 1, True)
    assert [c["kind"] for c in body["stake_history"]] == ["register", "slash"]
    assert body["stake_history"][-1]["stake_after_wei"] == str(10**18)
    dave = get(service, f"/api/peers/{swarm.address('dave')}").json()
    assert dave["status"] == "exiting" and dave["withdrawable_at"] is not None


def test_unknown_and_malformed_peers(served) -> None:
    service, _ = served
    unknown = get(service, "/api/peers/0x" + "ab" * 20)
    assert unknown.status_code == 404 and "no peer" in unknown.json()["detail"]
    malformed = get(service, "/api/peers/0x1234")
    assert malformed.status_code == 400 and "not an Ethereum address" in malformed.json()["detail"]


def test_rounds_and_one_round(served) -> None:
    service, swarm = served
    page = get(service, "/api/rounds").json()
    assert [r["round"] for r in page["entries"]] == [swarm.round, swarm.round + 1]
    assert page["entries"][0]["verified_reward"] == 13.1  # 4.9 + 4.0 + 1.2 + 3.0
    one = get(service, f"/api/rounds/{swarm.round}").json()
    assert one["publications"] == 4 and one["slashes"] == 1 and one["flags"] == 2
    assert [b["name"] for b in one["batches"]] == ["alice", "bob", "dave", "carol"]
    missing = get(service, f"/api/rounds/{swarm.round + 50}")
    assert missing.status_code == 404 and "no batches" in missing.json()["detail"]
    assert get(service, "/api/rounds/-1").status_code == 422


def test_stats(served, deployment) -> None:
    service, swarm = served
    stats = get(service, "/api/stats").json()
    assert (stats["peers"], stats["active_peers"]) == (5, 4)  # dave is exiting
    assert (stats["rounds"], stats["batches"], stats["attestations"]) == (2, 8, 21)
    assert stats["verified_batches"] == 7  # carol's flagged round-r batch is not verified
    assert stats["verified_share"] == pytest.approx(7 / 8)
    assert stats["total_stake_wei"] == str(10 * 10**18)
    assert stats["current_round"] == swarm.round + 3
    assert stats["coordinator"] == deployment.coordinator


def test_health_reports_lag_and_openapi_is_served(served, chain) -> None:
    service, _ = served
    health = get(service, "/health").json()
    head = chain.w3.eth.block_number
    assert health["status"] == "ok" and health["lag_blocks"] == 0
    assert health["final_block"] == head - 6 and health["confirmations"] == 6
    schema = get(service, "/openapi.json").json()
    assert {"/api/leaderboard", "/api/peers/{address}", "/api/rounds/{round}", "/health"} <= set(
        schema["paths"]
    )
    page = get(service, "/")
    assert page.status_code == 200 and "Swarm leaderboard" in page.text
    assert "drawChart" in get(service, "/static/app.js").text


def test_the_leaderboard_fills_as_peers_publish(
    chain, client_for, dev_accounts, deployment, tmp_path
):
    """The live path: the service is up first, then the swarm acts."""
    service = start_service(chain, deployment, tmp_path)
    try:
        assert get(service, "/api/leaderboard").json()["total"] == 0
        swarm: Swarm = play(chain, client_for, dev_accounts[1:], phases=1)
        head = chain.w3.eth.block_number
        wait_for(lambda: caught_up(service, head), what="the new blocks")
        entries = get(service, "/api/leaderboard", sort="claimed").json()["entries"]
        assert [e["name"] for e in entries][:2] == ["carol", "alice"]
        assert all(e["verified_reward"] == 0 for e in entries)  # nobody attested yet
        assert swarm.round == get(service, "/api/stats").json()["latest_round"]
    finally:
        service.stop()


def test_a_deep_reorg_stops_serving_data(chain, client_for, dev_accounts, deployment, tmp_path):
    play(chain, client_for, dev_accounts[1:], phases=2)
    service = start_service(chain, deployment, tmp_path, confirmations=1)
    try:
        head = chain.w3.eth.block_number
        wait_for(lambda: caught_up(service, head), what="the indexer to reach the head")
        chain.rpc("anvil_reorg", 5, [])
        wait_for(lambda: get(service, "/health").status_code == 503, what="health to turn 503")
        health = get(service, "/health").json()
        assert health["status"] == "error" and "reorganised below block" in health["error"]
        refused = get(service, "/api/leaderboard")
        assert refused.status_code == 503 and "indexing stopped" in refused.json()["detail"]
        assert service.wait(5)
    finally:
        service.stop()


def test_the_listening_socket_says_tcp_so_keep_alive_answers_are_not_delayed() -> None:
    """asyncio sets TCP_NODELAY only on sockets created with proto IPPROTO_TCP; without it each
    keep-alive response waited ~40 ms for a delayed ACK (found by scripts/bench_indexer.py)."""
    import socket

    from coordinator_indexer.service import _bind

    sock = _bind("127.0.0.1", 0)
    try:
        assert sock.proto == socket.IPPROTO_TCP
    finally:
        sock.close()

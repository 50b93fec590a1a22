"""The HTTP API over a real server (uvicorn on a free port) fed by the real ingestion thread."""

from __future__ import annotations

import hashlib
import threading
import time
from functools import cmp_to_key, partial

import pytest
import requests
from eth_account import Account
from eth_account.signers.local import LocalAccount

from coordinator_indexer import queries
from coordinator_indexer.ingest import IngestSettings
from coordinator_indexer.models import Leaderboard
from coordinator_indexer.service import IndexerService, ServiceSettings
from tests.indexer.postgres import postgres_server, postgres_url  # noqa: F401 - fixtures
from tests.indexer.scenario import (
    ETHER,
    EXPECTED_CLAIMED,
    EXPECTED_DUTY,
    EXPECTED_STAKE_WEI,
    EXPECTED_VERIFIED,
    NAMES,
    TIE_CLAIMS,
    TIE_MAX,
    TIE_MEDIAN,
    Swarm,
    play,
    play_tie,
    settle_tie,
)
from tests.waiting import wait_for

pytestmark = pytest.mark.integration


def start_service(
    chain, deployment, tmp_path, db_url: str | None = None, **ingest: object
) -> IndexerService:
    settings = ServiceSettings(
        rpc_url=chain.w3.provider.endpoint_uri,
        deployment=deployment.save(tmp_path / "deployment.json"),
        db_url=db_url or f"sqlite:///{tmp_path / 'api.db'}",
        port=0,
        ingest=IngestSettings(**{"confirmations": 6, "poll_interval": 0.05, **ingest}),
    )
    service = IndexerService(settings)
    service.start()
    return service


def caught_up(service: IndexerService, block: int) -> bool:
    health = requests.get(service.url + "health", timeout=5).json()
    return health["indexed_block"] == block and health["status"] == "ok"


def get(service: IndexerService, path: str, **params: object) -> requests.Response:
    return requests.get(service.url + path.lstrip("/"), params=params, timeout=10)


def test_leaderboard_ranks_by_verified_reward(served) -> None:
    service, swarm = served
    body = get(service, "/api/leaderboard").json()
    names = swarm.names_by_address()
    assert body["total"] == 6 and body["sort"] == "rank" and body["order"] == "asc"
    assert [names[e["address"]] for e in body["entries"]] == swarm.ranking()
    assert [e["rank"] for e in body["entries"]] == [1, 2, 3, 4, 5, 6]
    for entry in body["entries"]:
        name = names[entry["address"]]
        assert entry["name"] == name
        assert entry["verified_reward"] == EXPECTED_VERIFIED[name] / 1000
        assert entry["claimed_reward"] == EXPECTED_CLAIMED[name] / 1000
        assert entry["stake_wei"] == str(EXPECTED_STAKE_WEI[name])
    carol = next(e for e in body["entries"] if e["name"] == "carol")
    assert (carol["slashes"], carol["flags_received"], carol["rounds"]) == (1, 2, 2)


def test_leaderboard_shows_committee_duty(served) -> None:
    """Seats held, revealed on and missed per peer (both rounds are past their reveal phase)."""
    service, swarm = served
    entries = get(service, "/api/leaderboard").json()["entries"]
    duty = {e["name"]: (e["duty_seats"], e["duty_done"], e["duty_missed"]) for e in entries}
    assert duty == {
        name: (seats, done, seats - done) for name, (seats, done) in EXPECTED_DUTY.items()
    }
    worst = get(service, "/api/leaderboard", sort="duty_missed").json()["entries"]
    assert [e["name"] for e in worst[:2]] == ["erin", "frank"]
    erin = get(service, f"/api/peers/{swarm.address('erin')}").json()
    assert [
        (d["round"], d["seats"], d["done"], d["missed"], d["closed"]) for d in erin["duties"]
    ] == [
        (swarm.round, 4, 0, 4, True),
        (swarm.round + 1, 4, 0, 4, True),
    ]
    spec = get(service, "/openapi.json").json()["components"]["schemas"]
    assert {"duty_seats", "duty_done", "duty_missed"} <= set(spec["LeaderboardEntry"]["properties"])
    assert "committee" in spec["LeaderboardEntry"]["properties"]["duty_seats"]["description"]


def test_duty_of_a_round_still_being_revealed_is_not_missed(
    chain, client_for, dev_accounts, make_indexer
) -> None:
    """Before the reveal phase ends, a seat without a verdict is pending, not missed."""
    swarm = play(chain, client_for, dev_accounts[1:], phases=3)  # sealed and committed
    indexer = make_indexer()
    indexer.sync()
    state = indexer.store.state()
    closed = state.closed_before(indexer.deployment.genesis, indexer.deployment.round_duration)
    with indexer.store.engine.connect() as conn:
        page = queries.leaderboard(conn, sort="rank", order="asc", limit=10, offset=0)
    by_name = {e["name"]: e for e in page["entries"]}
    assert closed <= swarm.round
    assert (by_name["erin"]["duty_seats"], by_name["erin"]["duty_missed"]) == (8, 0)
    assert by_name["alice"]["duty_done"] == 0  # committed, nothing revealed yet


def test_leaderboard_paging_and_sorting(served) -> None:
    service, swarm = served
    ranking = swarm.ranking()
    page = get(service, "/api/leaderboard", limit=2, offset=2).json()
    assert [e["name"] for e in page["entries"]] == ranking[2:4] == ["carol", "dave"]
    assert [e["rank"] for e in page["entries"]] == [3, 4]
    by_claim = get(service, "/api/leaderboard", sort="claimed").json()
    assert [e["name"] for e in by_claim["entries"]][:2] == ["carol", "alice"]
    assert by_claim["entries"][0]["rank"] == 3  # rank stays the verified rank
    by_name = get(service, "/api/leaderboard", sort="name").json()
    assert [e["name"] for e in by_name["entries"]] == sorted(NAMES)
    worst_first = get(service, "/api/leaderboard", sort="rank", order="desc").json()
    worst = [e["name"] for e in worst_first["entries"]]  # erin and frank tie at 0: by address
    assert worst == ranking[::-1]
    by_stake = get(service, "/api/leaderboard", sort="stake").json()
    assert by_stake["entries"][0]["name"] == "bob"
    assert {e["name"] for e in by_stake["entries"][-2:]} == {"dave", "frank"}  # 0.9 ETH each
    beyond = get(service, "/api/leaderboard", offset=50).json()
    assert beyond["entries"] == [] and beyond["total"] == 6


def test_pages_of_every_sort_make_up_its_whole_ordering(served) -> None:
    """Pages of 2 (rank pages are ranges of ranks, the others look up the page's ranks first)
    concatenate to exactly the one-page ordering, itself the column's order with ties by rank."""
    service, _ = served
    for sort in ("rank", "verified", "claimed", "rounds", "stake", "slashes", "name", "duty_done",
                 "duty_missed"):  # fmt: skip
        for order in ("asc", "desc"):
            whole = get(service, "/api/leaderboard", sort=sort, order=order).json()["entries"]
            paged = [
                entry
                for offset in range(0, 8, 2)
                for entry in get(
                    service, "/api/leaderboard", sort=sort, order=order, limit=2, offset=offset
                ).json()["entries"]
            ]
            assert paged == whole and len(whole) == 6, (sort, order)
            field = SORTED_FIELD.get(sort, sort)
            expected = sorted(whole, key=cmp_to_key(lambda a, b: _compare(a, b, field, order)))
            assert whole == expected, (sort, order)


#: The entry field each sort orders by.
SORTED_FIELD = {"verified": "verified_reward", "claimed": "claimed_reward", "stake": "stake_eth"}


def _compare(a: dict, b: dict, field: str, order: str) -> int:
    """The leaderboard's order of two entries: ``field`` in ``order``, ties by rank."""
    if a[field] != b[field]:
        before = a[field] < b[field] if order == "asc" else a[field] > b[field]
        return -1 if before else 1
    return a["rank"] - b["rank"]


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
    assert body["address"] == carol and body["rank"] == 3
    assert [b["round"] for b in body["batches"]] == [swarm.round, swarm.round + 1]
    first = body["batches"][0]
    assert (first["claimed_reward"], first["verified_reward"]) == (9.0, 0.0)
    assert (first["flags"], first["agreements"], first["slashed"]) == (2, 1, True)
    assert (first["flag_weight_wei"], first["agree_weight_wei"]) == (str(4 * ETHER), str(ETHER))
    assert (first["outcome"], first["verified"]) == ("upheld", False)
    assert [c["kind"] for c in body["stake_history"]] == ["register", "slash"]
    assert body["stake_history"][-1]["stake_after_wei"] == str(ETHER)
    assert [(d["seats"], d["done"], d["missed"]) for d in body["duties"]] == [(3, 3, 0)] * 2
    erin = get(service, f"/api/peers/{swarm.address('erin')}").json()
    assert erin["status"] == "exiting" and erin["withdrawable_at"] == swarm.round + 7 + 11  # 2J + 1
    frank = get(service, f"/api/peers/{swarm.address('frank')}").json()
    assert [c["kind"] for c in frank["stake_history"]] == ["register", "forfeit"]
    assert frank["stake_history"][-1]["stake_after_wei"] == str(ETHER - ETHER // 10)


def test_unknown_and_malformed_peers(served) -> None:
    service, swarm = served
    unknown = get(service, "/api/peers/0x" + "ab" * 20)
    assert unknown.status_code == 404 and "no peer" in unknown.json()["detail"]
    malformed = get(service, "/api/peers/0x1234")
    assert malformed.status_code == 422 and "pattern" in malformed.json()["detail"]
    carol = swarm.address("carol")
    wrong_checksum = "0x" + carol[2:].swapcase()  # any case is accepted, as the spec says
    assert get(service, f"/api/peers/{wrong_checksum}").json()["address"] == carol


#: (path, query, word the one-line reason must contain): each must be a 422, on every database.
OUT_OF_RANGE = [
    ("/api/rounds/9223372036854775808", {}, "round"),  # 2^63: SQLite's driver overflowed (500)
    ("/api/rounds/18446744073709551616", {}, "round"),  # 2^64
    ("/api/rounds", {"offset": 2**63}, "offset"),
    ("/api/leaderboard", {"offset": 2**63}, "offset"),
    ("/api/leaderboard", {"offset": 10**30}, "offset"),
    # one form per number: each of these was read as round 1 (1_0 as 10), limit 2.0 as 2
    ("/api/rounds/1.0", {}, "round"),
    ("/api/rounds/01", {}, "round"),
    ("/api/rounds/+1", {}, "round"),
    ("/api/rounds/1%20", {}, "round"),
    ("/api/rounds/1_0", {}, "round"),
    ("/api/rounds", {"limit": "2.0"}, "limit"),
    ("/api/leaderboard", {"offset": "1e3"}, "offset"),
    ("/api/leaderboard", {"limit": " 5"}, "limit"),
    ("/api/peers/0", {}, "address"),
    ("/api/peers/0x" + "g" * 40, {}, "address"),
    ("/api/peers/0x" + "ab" * 21, {}, "address"),
]


def assert_out_of_range_input_is_a_422(service: IndexerService) -> None:
    """Out-of-range numbers and malformed addresses get a one-line 422; the largest accepted
    values (2^63 - 1) reach the database and answer normally."""
    for path, params, mentions in OUT_OF_RANGE:
        response = get(service, path, **params)
        assert response.status_code == 422, (path, params, response.text)
        detail = response.json()["detail"]
        assert isinstance(detail, str) and "\n" not in detail and mentions in detail
    largest = 2**63 - 1
    assert get(service, f"/api/rounds/{largest}").status_code == 404
    for path in ("/api/rounds", "/api/leaderboard"):
        response = get(service, path, offset=largest)
        assert response.status_code == 200 and response.json()["entries"] == []


def test_out_of_range_input_is_a_422_on_sqlite(served) -> None:
    assert_out_of_range_input_is_a_422(served[0])


def test_openapi_states_the_accepted_ranges_and_pattern(served) -> None:
    spec = get(served[0], "/openapi.json").json()

    def parameter(path: str, name: str) -> dict:
        (found,) = [p for p in spec["paths"][path]["get"]["parameters"] if p["name"] == name]
        return found["schema"]

    def bounds(path: str, name: str) -> tuple[int, int]:
        schema = parameter(path, name)
        return schema["minimum"], schema["maximum"]

    assert bounds("/api/rounds/{round}", "round") == (0, 2**63 - 1)
    for path in ("/api/rounds", "/api/leaderboard"):
        assert bounds(path, "offset") == (0, 2**63 - 1)
        assert bounds(path, "limit") == (1, 500)
    assert parameter("/api/peers/{address}", "address")["pattern"] == "^0x[0-9a-fA-F]{40}$"
    answers = spec["paths"]["/api/peers/{address}"]["get"]["responses"]
    assert set(answers) == {"200", "404", "422", "503"}  # no undocumented 400 any more


def test_rounds_and_one_round(served) -> None:
    service, swarm = served
    page = get(service, "/api/rounds").json()
    assert [r["round"] for r in page["entries"]] == [swarm.round, swarm.round + 1]
    assert page["entries"][0]["verified_reward"] == 12.0  # 5.0 + 4.0 + 0 (upheld) + 3.0
    assert [(r["sealed"], r["seats"], r["seats_done"]) for r in page["entries"]] == [
        (True, 20, 13),
        (True, 20, 12),
    ]
    one = get(service, f"/api/rounds/{swarm.round}").json()
    assert one["publications"] == 4 and one["slashes"] == 1 and one["flags"] == 3
    assert one["closed"] and one["disputes"] == 2
    assert [b["name"] for b in one["batches"]] == ["alice", "bob", "dave", "carol"]
    alice = one["batches"][0]
    assert (alice["outcome"], alice["verified_reward"], alice["flags"]) == ("rejected", 5.0, 1)
    assert len(alice["votes"]) == 4
    frank_vote = next(v for v in alice["votes"] if v["voter"] == swarm.address("frank"))
    assert (
        frank_vote["is_flag"] and frank_vote["counted"] and frank_vote["weight_wei"] == str(ETHER)
    )
    duties = {swarm.names_by_address()[d["peer"]]: d for d in one["duties"]}
    assert (duties["frank"]["seats"], duties["frank"]["done"], duties["frank"]["missed"]) == (
        4,
        1,
        3,
    )
    missing = get(service, f"/api/rounds/{swarm.round + 50}")
    assert missing.status_code == 404 and "no batches" in missing.json()["detail"]
    assert get(service, "/api/rounds/-1").status_code == 422


def test_stats(served, deployment) -> None:
    service, swarm = served
    stats = get(service, "/api/stats").json()
    assert (stats["peers"], stats["active_peers"]) == (6, 5)  # erin is exiting
    assert (stats["rounds"], stats["batches"], stats["verdicts_counted"]) == (2, 8, 25)
    assert stats["pending_batches"] == 0  # both rounds judged, both disputes settled
    assert stats["verified_batches"] == 7  # carol's upheld round-r batch is not verified
    assert stats["verified_share"] == pytest.approx(7 / 8)
    assert stats["total_stake_wei"] == str(sum(EXPECTED_STAKE_WEI.values()))
    assert stats["current_round"] == swarm.round + 7
    assert stats["coordinator"] == deployment.coordinator


def test_one_definition_of_a_verified_batch(served) -> None:
    """carol's round-r batch was upheld (slashed), her round-r+1 batch agreed; alice's round-r
    batch was flagged by the sybil and the flag rejected: verified. The same count on the
    leaderboard, on the peer pages and in the stats."""
    service, swarm = served
    entries = get(service, "/api/leaderboard").json()["entries"]
    verified = {e["name"]: e["verified_batches"] for e in entries}
    assert verified == {"alice": 2, "bob": 2, "carol": 1, "dave": 2, "erin": 0, "frank": 0}
    carol = get(service, f"/api/peers/{swarm.address('carol')}").json()
    assert (carol["rounds"], carol["verified_batches"]) == (2, 1)
    assert carol["batches"][0]["slashed"] and carol["batches"][0]["verdicts_counted"] == 3
    stats = get(service, "/api/stats").json()
    assert stats["verified_batches"] == sum(verified.values()) == 7
    assert stats["batches_with_verdicts"] == 8  # not verified: the slashed one counts here


def text_and_number_disagree() -> tuple[LocalAccount, LocalAccount]:
    """Two accounts whose EIP-55 addresses sort one way as text and the other way as numbers
    (like 0xF9b3... and 0xf6e1...: "F" < "f" as text, 0xf9 > 0xf6 as numbers)."""
    accounts = [Account.from_key(hashlib.sha256(f"tie-{i}".encode()).digest()) for i in range(64)]
    for above in accounts:
        for below in accounts:
            if above.address < below.address and int(above.address, 16) > int(below.address, 16):
                return above, below
    raise AssertionError("no such pair among 64 accounts")


@pytest.mark.parametrize("database", ["sqlite", "postgres"])
def test_ties_are_broken_by_the_address_as_a_number(
    chain, client_for, make_indexer, request, database
) -> None:
    first_as_text, first_as_number = text_and_number_disagree()
    for account in (first_as_text, first_as_number):
        chain.fund(account.address, 10 * ETHER)
        client_for(account).register("twin", 2 * ETHER)  # equal stake, no rewards: a tie
    url = request.getfixturevalue("postgres_url") if database == "postgres" else None
    indexer = make_indexer(url)
    indexer.sync()
    twins = {first_as_text.address, first_as_number.address}
    with indexer.store.engine.connect() as conn:
        page = queries.leaderboard(conn, sort="rank", order="asc", limit=500, offset=0)
        by_name = queries.leaderboard(conn, sort="name", order="asc", limit=500, offset=0)
        ranks = [queries.peer_rank(conn, a.address) for a in (first_as_number, first_as_text)]
    order = [e["address"] for e in page["entries"] if e["address"] in twins]
    assert order == [first_as_number.address, first_as_text.address]
    assert [e["address"] for e in by_name["entries"] if e["address"] in twins] == order
    assert ranks[0] is not None and ranks[1] is not None and ranks[0] < ranks[1]


@pytest.mark.parametrize("database", ["sqlite", "postgres"])
def test_names_sort_by_code_point_on_every_database(
    chain, client_for, make_indexer, request, database
) -> None:
    """A database's collation may put "b" before "B" (a locale's) or not (SQLite's bytes): the
    leaderboard sorts names by code point on both, ties by rank."""
    names = ["\u00e9mile", "b", "B", "b"]  # code point order: B, b, b, \u00e9mile
    accounts = [Account.from_key(hashlib.sha256(f"name-{i}".encode()).digest()) for i in range(4)]
    for i, (account, name) in enumerate(zip(accounts, names, strict=True)):
        chain.fund(account.address, 10 * ETHER)
        client_for(account).register(name, (2 + i) * ETHER // 2)
    url = request.getfixturevalue("postgres_url") if database == "postgres" else None
    indexer = make_indexer(url)
    indexer.sync()
    with indexer.store.engine.connect() as conn:
        ascending = queries.leaderboard(conn, sort="name", order="asc", limit=500, offset=0)
        descending = queries.leaderboard(conn, sort="name", order="desc", limit=500, offset=0)
    mine = {a.address for a in accounts}
    up = [(e["name"], e["rank"]) for e in ascending["entries"] if e["address"] in mine]
    down = [(e["name"], e["rank"]) for e in descending["entries"] if e["address"] in mine]
    assert [name for name, _ in up] == ["B", "b", "b", "\u00e9mile"]
    assert [name for name, _ in down] == ["\u00e9mile", "b", "b", "B"]
    twins = [rank for name, rank in up if name == "b"]
    assert twins == sorted(twins) == [rank for name, rank in down if name == "b"]  # by rank


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
        assert all(e["verified_reward"] == 0 for e in entries)  # no committee vote yet...
        pending = {e["name"]: e["pending_batches"] for e in entries}
        assert pending == {"alice": 1, "bob": 1, "carol": 1, "dave": 1, "erin": 0, "frank": 0}
        (batch,) = get(service, f"/api/peers/{swarm.address('alice')}").json()["batches"]
        assert (batch["pending"], batch["verified_reward"], batch["outcome"]) == (True, None, None)
        (round_,) = get(service, "/api/rounds").json()["entries"]
        assert (round_["pending"], round_["pending_batches"], round_["closed"]) == (True, 4, False)
        stats = get(service, "/api/stats").json()
        assert swarm.round == stats["latest_round"] and stats["pending_batches"] == 4
    finally:
        service.stop()


def test_kept_answers_follow_every_write_of_indexed_data(
    chain, client_for, dev_accounts, deployment, tmp_path
):
    """The server keeps each sort's order of the peers, each page, each entry and the swarm
    totals until the next write of indexed data: after every phase of the scenario, with all of
    them read (and kept) before it, each sort's page (byte for byte what the response model
    encodes from a fresh read of the database) and /api/stats are what a fresh read gives; and
    the orders and totals did change between phases."""
    service = start_service(chain, deployment, tmp_path)
    store = service.store
    assert store is not None
    fresh_orders: list[dict[tuple[str, str], list[str]]] = []
    fresh_stats: list[dict] = []

    def compare(phase: int) -> None:
        head = chain.w3.eth.block_number
        wait_for(lambda: caught_up(service, head), what=f"phase {phase}'s blocks")
        orders = {}
        for sort in queries.SORTS:
            for order in ("asc", "desc"):
                response = get(service, "/api/leaderboard", sort=sort, order=order)
                served = response.json()
                with store.engine.connect() as conn:
                    fresh = queries.leaderboard(conn, sort=sort, order=order, limit=50, offset=0)
                header = {"limit": 50, "offset": 0, "sort": sort, "order": order}
                whole = Leaderboard.model_validate({**fresh, **header, "indexed_block": head})
                assert response.content == whole.model_dump_json(by_alias=True).encode()
                orders[sort, order] = [e["address"] for e in fresh["entries"]]
                assert [e["address"] for e in served["entries"]] == orders[sort, order], (
                    phase, sort, order,
                )  # fmt: skip
                kept_fields = [{k: e[k] for k in fresh["entries"][0]} for e in served["entries"]]
                assert kept_fields == fresh["entries"], (phase, sort, order)
                assert (served["total"], served["indexed_block"]) == (fresh["total"], head)
        fresh_orders.append(orders)
        with store.engine.connect() as conn:
            state = store.state()
            totals = queries.stats(conn, state, deployment.round_duration, deployment.genesis)
        served_stats = get(service, "/api/stats").json()
        assert {k: served_stats[k] for k in totals} == totals, phase
        fresh_stats.append(totals)

    try:
        play(chain, client_for, dev_accounts[1:], between=compare)
    finally:
        service.stop()
    changed = {
        key for before, after in zip(fresh_orders, fresh_orders[1:]) for key in before
        if before[key] != after[key]
    }  # fmt: skip
    kept_orders_that_changed = {("verified", "asc"), ("stake", "asc"), ("duty_done", "desc")}
    assert kept_orders_that_changed <= changed
    assert len({str(totals) for totals in fresh_stats}) == len(fresh_stats)  # each phase moved


def test_a_kept_page_moves_with_blocks_that_hold_no_events(served, chain) -> None:
    """A page is kept per indexed state, and a range of empty blocks is a new state too: the
    page read again after them says the new indexed block, with the same entries."""
    service, _ = served
    before = get(service, "/api/leaderboard", sort="stake", limit=3).json()
    chain.rpc("anvil_mine", 4)
    head = chain.w3.eth.block_number
    wait_for(lambda: caught_up(service, head), what="the empty blocks")
    after = get(service, "/api/leaderboard", sort="stake", limit=3).json()
    assert (before["indexed_block"], after["indexed_block"]) == (head - 4, head)
    assert after["entries"] == before["entries"] and len(after["entries"]) == 3


def test_answers_kept_per_state_are_bounded_and_the_oldest_goes_first() -> None:
    kept = queries.PerState(most=2)
    reads: list[str] = []

    def read(question: str) -> str:
        reads.append(question)
        return question.upper()

    for question in ("a", "b", "a", "c", "b", "a"):
        assert kept.get("state 1", question, partial(read, question)) == question.upper()
    assert reads == ["a", "b", "c", "a"]  # "c" pushed out "a", the oldest; "b" stayed
    assert kept.get("state 2", "b", partial(read, "b")) == "B" and reads[-1] == "b"  # a new state


def test_many_answers_kept_per_state_are_read_once_and_only_the_missing_ones() -> None:
    kept = queries.PerState(most=3)
    reads: list[list[int]] = []

    def read(missing: list[int]) -> dict[int, str]:
        reads.append(missing)
        return {n: f"#{n}" for n in missing if n != 99}  # 99: no answer

    assert kept.get_many("s1", [1, 2], read) == ["#1", "#2"]
    assert kept.get_many("s1", [2, 3, 99], read) == ["#2", "#3"]  # 99 left out, not kept
    assert kept.get_many("s1", [3, 2], read) == ["#3", "#2"]  # kept, in the asked order
    assert kept.get_many("s1", [4], read) == ["#4"]  # a fourth: 1, the oldest, goes
    assert kept.get_many("s1", [2, 1], read) == ["#2", "#1"]
    assert reads == [[1, 2], [3, 99], [4], [1]]
    assert kept.get_many("s2", [2], read) == ["#2"] and reads[-1] == [2]  # a new state
    assert kept.get_many(None, [2], read) == ["#2"] and reads[-1] == [2]  # nothing indexed: read


def test_an_answer_asked_for_at_once_by_many_threads_is_read_once() -> None:
    """The first requests of a new state all want the same rows and orders: one thread reads
    them while the others wait; when that read fails, a waiting thread reads it itself."""
    kept = queries.PerState()
    reads: list[str] = []
    release = threading.Event()

    def slow_read() -> str:
        reads.append("read")
        release.wait(5)
        return "rows"

    answers: list[str] = []
    threads = [
        threading.Thread(target=lambda: answers.append(kept.get("s1", "q", slow_read)))
        for _ in range(6)
    ]
    for thread in threads:
        thread.start()
    wait_for(lambda: len(reads) == 1, what="the first read")
    time.sleep(0.2)  # the other five are waiting, not reading
    release.set()
    for thread in threads:
        thread.join(5)
    assert answers == ["rows"] * 6 and reads == ["read"]

    failing = threading.Event()

    def failing_read() -> str:
        failing.wait(5)
        raise RuntimeError("database gone")

    errors: list[Exception] = []

    def first() -> None:
        try:
            kept.get("s1", "r", failing_read)
        except RuntimeError as exc:
            errors.append(exc)

    owner = threading.Thread(target=first)
    owner.start()
    wait_for(lambda: "r" in kept._reading, what="the failing read to start")
    waiter_answer: list[str] = []
    waiter = threading.Thread(target=lambda: waiter_answer.append(kept.get("s1", "r", lambda: "R")))
    waiter.start()
    time.sleep(0.1)
    assert waiter_answer == []  # it waits for the read under way
    failing.set()
    owner.join(5)
    waiter.join(5)
    assert len(errors) == 1 and waiter_answer == ["R"]


def test_a_deep_reorg_stops_serving_data_but_not_the_server(
    chain, client_for, dev_accounts, deployment, tmp_path
):
    play(chain, client_for, dev_accounts[1:], phases=2)
    service = start_service(chain, deployment, tmp_path, confirmations=1)
    try:
        head = chain.w3.eth.block_number
        wait_for(lambda: caught_up(service, head), what="the indexer to reach the head")
        chain.rpc("anvil_reorg", 5, [])
        assert service.failed.wait(30)
        time.sleep(0.5)  # still up a while later: the reason stays readable
        assert not service.stopped.is_set()
        health = get(service, "/health")
        assert health.status_code == 503
        assert health.json()["status"] == "error"
        assert "reorganised below block" in health.json()["error"]
        for path in ("/api/leaderboard", "/api/stats", "/api/rounds"):
            refused = get(service, path)
            detail = refused.json()["detail"]
            assert refused.status_code == 503 and detail.startswith("indexing stopped: ")
            assert "reorganised below block" in detail and "\n" not in detail
        assert get(service, "/").status_code == 200  # the page loads and shows why
        _assert_the_failed_state_answers_as_the_schema_says(service, chain)
    finally:
        service.stop()
    assert service.stopped.is_set()


def _assert_the_failed_state_answers_as_the_schema_says(service: IndexerService, chain) -> None:
    """/health's 503 is the Health document its schema names; a path no route has is a 404
    and a method none takes a 405, as before the failure; the chain head stays live."""
    spec = get(service, "/openapi.json").json()
    answer = spec["paths"]["/health"]["get"]["responses"]["503"]["content"]["application/json"]
    assert answer["schema"]["$ref"].endswith("/Health")
    health = get(service, "/health").json()
    assert set(health) == set(spec["components"]["schemas"]["Health"]["properties"])
    assert get(service, "/api/no-such-route").status_code == 404
    for method in ("TRACE", "POST", "DELETE"):
        assert requests.request(method, service.url + "api/stats", timeout=10).status_code == 405
    head = chain.w3.eth.block_number + 3
    chain.rpc("anvil_mine", 3)
    wait_for(lambda: get(service, "/health").json()["chain_head"] >= head, what="the live head")
    after = get(service, "/health").json()
    assert after["lag_blocks"] == after["chain_head"] - after["indexed_block"]


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


def _sams_batch(service: IndexerService, swarm: Swarm, chain) -> dict:
    head = chain.w3.eth.block_number
    wait_for(lambda: caught_up(service, head), what="the indexer to reach the head")
    (batch,) = get(service, f"/api/peers/{swarm.address('sam')}").json()["batches"]
    return batch


@pytest.mark.parametrize("database", ["sqlite", "postgres"])
def test_a_tie_is_inconclusive_and_earns_no_verified_reward(
    chain, client_for, dev_accounts, deployment, tmp_path, request, database
) -> None:
    """One flag against one agreement of the same weight (scenario.play_tie). Unsettled, the
    batch is verified with its median: the agreements are not outweighed. Settled, the contract
    calls it Inconclusive: nobody is slashed, the flag's bond comes back, and the batch is neither
    verified nor rejected and earns 0. The batch maximum is the test deployment's n x G x 1000
    (16,000): sam's claim of 16,000 counts, oli's 16,001 does not."""
    swarm = play_tie(chain, client_for, dev_accounts[1:])
    url = request.getfixturevalue("postgres_url") if database == "postgres" else None
    service = start_service(chain, deployment, tmp_path, db_url=url)
    try:
        sam = _sams_batch(service, swarm, chain)
        assert (sam["outcome"], sam["settled"], sam["verified"]) == (None, False, True)
        assert sam["verified_reward"] == TIE_MEDIAN / 1000 == 9.0
        # the reveal phase is over, but the flag waits for settlement: still pending
        assert sam["pending"] is True
        (tied,) = get(service, "/api/rounds").json()["entries"]
        assert (tied["closed"], tied["pending"], tied["pending_batches"]) == (True, True, 1)
        settle_tie(swarm)
        sam = _sams_batch(service, swarm, chain)
        board = {e["name"]: e for e in get(service, "/api/leaderboard").json()["entries"]}
        one = get(service, f"/api/rounds/{swarm.round}").json()
        stats = get(service, "/api/stats").json()
        flo = get(service, f"/api/peers/{swarm.address('flo')}").json()
        (oli,) = get(service, f"/api/peers/{swarm.address('oli')}").json()["batches"]
    finally:
        service.stop()
    assert (sam["outcome"], sam["settled"], sam["slashed"], sam["verified"]) == (
        "inconclusive",
        True,
        False,
        False,
    )
    assert (sam["verified_reward"], sam["verified_in_range"], sam["pending"]) == (0.0, True, False)
    assert (one["pending"], one["pending_batches"]) == (False, 0)
    assert (sam["agreements"], sam["flags"]) == (1, 1)
    assert sam["agree_weight_wei"] == sam["flag_weight_wei"] == str(ETHER)
    assert (board["sam"]["verified_reward"], board["sam"]["verified_batches"]) == (0.0, 0)
    assert board["sam"]["slashes"] == 0 and board["sam"]["stake_wei"] == str(ETHER)
    assert [c["kind"] for c in flo["stake_history"]] == ["register"]  # no forfeit: bond back
    assert flo["stake_wei"] == str(ETHER)
    assert (one["disputes"], one["slashes"], one["verified_reward"]) == (1, 0, 0.0)
    assert (stats["verified_batches"], stats["batches"], stats["slashes"]) == (0, 2, 0)
    # the batch maximum of the test deployment's rules, as rulesAt says
    assert swarm.clients["sam"].rules_at(swarm.round).max_reward_milli == TIE_MAX
    assert sam["reward_max"] == oli["reward_max"] == TIE_MAX / 1000 == 16.0
    assert (sam["claimed_reward"], sam["claimed_in_range"]) == (16.0, True)
    assert (oli["claimed_reward"], oli["claimed_in_range"]) == (TIE_CLAIMS["oli"] / 1000, False)
    assert (board["sam"]["claimed_reward"], board["oli"]["claimed_reward"]) == (16.0, 0.0)
    assert board["oli"]["out_of_range_batches"] == 1
    assert (stats["claimed_reward"], stats["out_of_range_batches"]) == (16.0, 1)

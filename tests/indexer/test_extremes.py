"""No event value can stop the indexer or skew the leaderboard (issue 23, finding 1).

The coordinator's events, with every numeric field at its extremes, are emitted by a stand-in
contract (tests/indexer/emitter.py) on the session Anvil, read through eth_getLogs by the real
service (ingestion thread and HTTP server) into SQLite and Postgres, and read back through the
API. The measured attack: a puppet's withheld batch, whose only committee vote is a 0.01-ETH sybil
revealing 10^12, ranked #1 with a reward of 10^9; with 2^63 - 1 every sync failed with SQLite's
``integer overflow`` and the leaderboard froze for good.
"""

from __future__ import annotations

import hashlib
import json
from collections.abc import Iterator

import pytest
import requests
from eth_abi import encode
from eth_account import Account
from sqlalchemy import select
from web3 import Web3

from coordinator_indexer import schema
from coordinator_indexer.ingest import Indexer, IngestSettings
from coordinator_indexer.round_rules import PROTOCOL_MAX_BATCH_MILLI
from coordinator_indexer.service import IndexerService, ServiceSettings
from coordinator_indexer.store import Store
from node.chain.models import weighted_median_milli
from tests.chain_fixtures import TEST_RETRY
from tests.indexer.emitter import (  # noqa: F401 - fixtures
    I64_MAX,
    I64_MIN,
    U16,
    U32,
    U64,
    U96,
    U256,
    Emitter,
    emitter,
    emitter_artifact,
    encode_event,
    rules_answer,
)
from tests.indexer.postgres import postgres_server, postgres_url  # noqa: F401 - fixtures
from tests.indexer.test_reorg import tables
from tests.waiting import wait_for

pytestmark = pytest.mark.integration

ETHER = 10**18
R = 5  # the judged round


def address(name: str) -> str:
    return Account.from_key(hashlib.sha256(f"extreme-{name}".encode()).digest()).address


def database_url(request: pytest.FixtureRequest, database: str, tmp_path) -> str:
    if database == "postgres":
        return request.getfixturevalue("postgres_url")
    return f"sqlite:///{tmp_path / 'extremes.db'}"


@pytest.fixture
def serve(emitter: Emitter, tmp_path) -> Iterator:  # noqa: F811 - fixture
    """``serve(db_url)`` -> the running service on the emitter's deployment (stopped after)."""
    started: list[IndexerService] = []

    def start(db_url: str) -> IndexerService:
        settings = ServiceSettings(
            rpc_url=emitter.w3.provider.endpoint_uri,  # type: ignore[attr-defined]
            deployment=emitter.save_deployment(tmp_path / "emitter-deployment.json"),
            db_url=db_url,
            port=0,
            ingest=IngestSettings(confirmations=2, poll_interval=0.05),
        )
        service = IndexerService(settings)
        service.start()
        started.append(service)
        return service

    yield start
    for service in started:
        service.stop()


def get(service: IndexerService, path: str, **params: object) -> dict:
    response = requests.get(service.url + path.lstrip("/"), params=params, timeout=30)
    assert response.status_code == 200, (path, response.text)
    return response.json()


def caught_up(service: IndexerService, w3: Web3) -> None:
    """Waits until the service indexed the head; fails at once if ingestion stopped."""
    head = w3.eth.block_number

    def done() -> bool:
        assert not service.failed.is_set(), get_health(service)
        health = get_health(service)
        return health["indexed_block"] == head and health["status"] == "ok"

    wait_for(done, timeout=60, what=f"the indexer to reach block {head}")


def get_health(service: IndexerService) -> dict:
    return requests.get(service.url + "health", timeout=30).json()


def registered(name: str, stake: int) -> tuple[str, dict]:
    return ("PeerRegistered", {"peer": address(name), "name": name, "stake": stake})


def published(round_: int, name: str, reward_sum: int, groups: int = 4, completions: int = 32):
    values = {
        "round": round_,
        "peer": address(name),
        "digest": hashlib.sha256(f"{name}-{round_}".encode()).digest(),
        "groups": groups,
        "completions": completions,
        "rewardSum": reward_sum,
        "relayer": "0x" + "00" * 20,
    }
    return ("RolloutsPublished", values)


def revealed(round_: int, subject: str, attester: str, value: int, weight: int, **counts: int):
    values = {
        "round": round_,
        "subject": address(subject),
        "attester": address(attester),
        "checked": counts.get("checked", 8),
        "agreed": counts.get("agreed", 8),
        "verifiedRewardSum": value,
        "weight": weight,
    }
    return ("VerdictRevealed", values)


def sealed(source: Emitter, round_: int, weights: dict[str, int], total: int) -> None:
    """Answers weightAt(peer, round) at the seal's block, then seals the round."""
    for name, weight in weights.items():
        source.answer("weightAt", weight, [address(name), round_])
    source.emit("RoundSealed", round=round_, beacon=b"\x5a" * 20, totalWeight=total)


def by_name(board: dict) -> dict[str, dict]:
    return {entry["name"]: entry for entry in board["entries"]}


# ------------------------------------------------------------------------- the measured attack

HONEST = {"alice": 2 * ETHER, "bob": 2 * ETHER}
PUPPETS = {"puppet": 10**12, "puppet2": I64_MAX, "puppet3": I64_MIN}  # claim = sybil's reveal
SYBIL = ETHER // 100


def play_attack(source: Emitter) -> None:
    """Round R: alice and bob publish honestly and verify each other; three puppets publish
    (withholding their bytes) and a 0.01-ETH sybil, their committee's only voter, reveals for
    each what it claimed: 10^12, 2^63 - 1, -2^63."""
    stakes = {**HONEST, **dict.fromkeys(PUPPETS, SYBIL), "sybil": SYBIL}
    source.emit_many([registered(name, stake) for name, stake in stakes.items()])
    source.emit_many(
        [published(R, "alice", 5000), published(R, "bob", 4000)]
        + [published(R, name, claim) for name, claim in PUPPETS.items()]
    )
    sealed(source, R, stakes, sum(stakes.values()))
    source.emit_many(
        [revealed(R, "alice", "bob", 5000, 2 * ETHER), revealed(R, "bob", "alice", 4000, 2 * ETHER)]
        + [revealed(R, name, "sybil", claim, SYBIL) for name, claim in PUPPETS.items()]
    )


def play_honest_round(source: Emitter, round_: int) -> None:
    """alice claims 6.0 and bob 4.5, and each verifies the other's claim."""
    source.emit_many([published(round_, "alice", 6000), published(round_, "bob", 4500)])
    source.emit_many(
        [
            revealed(round_, "alice", "bob", 6000, 2 * ETHER),
            revealed(round_, "bob", "alice", 4500, 2 * ETHER),
        ]
    )


@pytest.mark.parametrize("database", ["sqlite", "postgres"])
def test_a_sybil_voter_can_neither_rank_its_puppet_nor_freeze_the_leaderboard(
    emitter,
    serve,
    request,
    tmp_path,
    database,  # noqa: F811 - fixture
) -> None:
    play_attack(emitter)
    service = serve(database_url(request, database, tmp_path))
    caught_up(service, emitter.w3)
    board = get(service, "/api/leaderboard")
    assert [e["name"] for e in board["entries"][:2]] == ["alice", "bob"]
    entries = by_name(board)
    assert (entries["alice"]["verified_reward"], entries["bob"]["verified_reward"]) == (5.0, 4.0)
    for name in PUPPETS:
        puppet = entries[name]
        assert (puppet["verified_reward"], puppet["claimed_reward"]) == (0.0, 0.0), puppet
        assert puppet["out_of_range_batches"] == 1 and puppet["rank"] > 2
        assert puppet["verified_batches"] == 0  # its only voter's value is out of range
    # the puppets' batches show what was claimed and revealed, flagged as out of range
    for name, value in PUPPETS.items():
        (batch,) = get(service, f"/api/peers/{address(name)}")["batches"]
        assert batch["claimed_reward"] == batch["verified_reward"] == value / 1000
        assert not batch["claimed_in_range"] and batch["verified_in_range"] is False
        assert batch["reward_max"] == PROTOCOL_MAX_BATCH_MILLI / 1000 == 2048.0
    one = get(service, f"/api/rounds/{R}")
    assert [b["name"] for b in one["batches"][:2]] == ["alice", "bob"]
    assert (one["verified_reward"], one["claimed_reward"], one["out_of_range_batches"]) == (
        9.0,
        9.0,
        3,
    )
    votes = {b["name"]: b["votes"] for b in one["batches"]}
    assert [v["in_range"] for v in votes["alice"]] == [True]
    assert [v["in_range"] for v in votes["puppet2"]] == [False]
    stats = get(service, "/api/stats")
    assert (stats["verified_reward"], stats["claimed_reward"]) == (9.0, 9.0)
    assert stats["out_of_range_batches"] == 3 and stats["unapplied_events"] == 0
    assert (stats["verified_batches"], stats["batches"]) == (2, 5)

    play_honest_round(emitter, R + 1)  # the sync goes on, and ranks honestly
    caught_up(service, emitter.w3)
    entries = by_name(get(service, "/api/leaderboard"))
    assert (entries["alice"]["verified_reward"], entries["bob"]["verified_reward"]) == (11.0, 8.5)
    assert (entries["alice"]["rank"], entries["bob"]["rank"]) == (1, 2)
    assert get_health(service)["status"] == "ok"


# -------------------------------------------------------------- every numeric field at its extremes

#: Peers of the extreme chain: whale (stake 2^256 - 1), exiter (exits at round 2^64 - 1 and
#: withdraws 2^256 - 1), alice and bob (honest), puppet (claims 2^63 - 1, upheld), sybil (claims
#: -2^63, flags and loses 2^256 - 1), nul (a name with a NUL byte).
EXTREME_PEERS = {
    "whale": U256,
    "exiter": U256,
    "alice": 2 * ETHER,
    "bob": 2 * ETHER,
    "puppet": SYBIL,
    "sybil": SYBIL,
    "nul\x00name": SYBIL,
}
#: 864 votes of weight 2^256 - 1 add up to more than 80 digits (the text column's length).
CROWD = 864


def play_extremes(source: Emitter) -> None:
    """Every event of the ABI with its numeric fields at their extremes (see EXTREME_PEERS)."""
    source.answer(
        "rulesAt",
        rules_answer(
            fromRound=U64, flagBond=U96, committeeSize=U16, quorumBps=U16, floorBps=U16,
            slashBps=U16, rewardBps=U16, tipBps=U16, tasksPerRound=U16, groupSize=U16,
        ),
    )  # fmt: skip
    source.answer("weightAt", U256)  # every peer: seated on every committee
    source.emit_many([registered(name, stake) for name, stake in EXTREME_PEERS.items()])
    not_utf8 = encode_event("PeerRegistered", {"peer": address("bad"), "name": "x", "stake": 1})
    source.emit_raw(not_utf8[0], encode(["bytes", "uint256"], [b"\xff\xfe", ETHER]))
    whale, exiter = address("whale"), address("exiter")
    source.emit_many(
        [
            ("StakeAdded", {"peer": whale, "amount": U256, "totalStake": U256,
                            "countsFromRound": U64}),
            ("ExitRequested", {"peer": exiter, "exitRound": U64, "withdrawableFromRound": U64}),
            ("Withdrawn", {"peer": exiter, "amount": U256}),
            published(R, "alice", 5000, groups=U32, completions=U32),
            published(R, "puppet", I64_MAX),
            published(R, "sybil", I64_MIN),
            published(I64_MAX, "bob", 4000),  # the largest round the tables hold
            published(U64, "alice", 7000),  # a round they cannot hold: kept, not applied
            ("EndpointAnnounced", {"peer": address("alice"), "endpoint": b"\xff" * 4096}),
            ("RoundArmed", {"round": R, "beaconBlock": U256}),
            ("RoundArmed", {"round": U64, "beaconBlock": U256}),
            ("RoundSealed", {"round": U64, "beacon": b"\xff" * 20, "totalWeight": U256}),
            ("VerdictsCommitted", {"round": R, "attester": address("sybil")}),
            ("VerdictsCommitted", {"round": U64, "attester": address("sybil")}),
        ]
    )  # fmt: skip
    source.emit("RoundSealed", round=R, beacon=b"\xff" * 20, totalWeight=U256)
    source.emit_many(
        [
            revealed(R, "alice", "bob", 5000, U256, checked=U32, agreed=U32),
            revealed(R, "alice", "sybil", I64_MIN, U256 - 1, checked=U32, agreed=0),
            revealed(R, "puppet", "sybil", I64_MAX, U256, checked=U32, agreed=U32),
            revealed(R, "sybil", "puppet", I64_MIN, U256, checked=0, agreed=0),
            revealed(U64, "alice", "bob", I64_MAX, U256),
            ("VerdictIgnored", {"round": R, "subject": address("alice"), "attester": whale,
                                "checked": U32, "agreed": U32, "verifiedRewardSum": I64_MIN}),
        ]
    )  # fmt: skip
    crowd = [revealed(I64_MAX, "bob", f"crowd-{i}", 4000, U256) for i in range(CROWD)]
    for start in range(0, CROWD, 200):
        source.emit_many(crowd[start : start + 200])
    settled = {"amount": U256, "flagWeight": U256, "agreeWeight": U256, "tip": U256}
    settler = address("bob")
    source.emit_many(
        [
            ("DisputeSettled", {"round": R, "subject": address("puppet"), "outcome": 2,
                                "settler": settler, **settled}),  # upheld: slashes 2^256 - 1
            ("DisputeSettled", {"round": R, "subject": address("alice"), "outcome": 255,
                                "settler": settler, **settled}),  # no VerdictState: settles nothing
            ("DisputeSettled", {"round": U64, "subject": address("alice"), "outcome": 2,
                                "settler": settler, **settled}),
            ("FlagResolved", {"round": R, "subject": address("alice"),
                              "flagger": address("sybil"), "upheld": False, "amount": U256}),
            ("FlagResolved", {"round": R, "subject": address("puppet"),
                              "flagger": address("bob"), "upheld": True, "amount": U256}),
            ("AgreementPenalized", {"round": R, "subject": address("puppet"),
                                    "attester": address("sybil"), "reporter": address("alice"),
                                    "amount": U256, "reporterShare": U256}),
            ("ParametersScheduled", {"fromRound": U64, "minStake": U256, "rules": rules_answer(
                fromRound=U64, flagBond=U96, committeeSize=U16, quorumBps=9999, floorBps=10_000,
                slashBps=10_000, rewardBps=5000, tipBps=5000, tasksPerRound=64, groupSize=32)}),
            ("ParametersScheduled", {"fromRound": U64, "minStake": U256, "rules": rules_answer(
                fromRound=U64, flagBond=0, committeeSize=U16, quorumBps=U16, floorBps=U16,
                slashBps=U16, rewardBps=U16, tipBps=U16, tasksPerRound=U16, groupSize=U16)}),
            ("Claimed", {"account": address("alice"), "amount": U256}),
        ]
    )  # fmt: skip


#: The logs kept as they are: six with round 2^64 - 1 (publication, arming, seal, commit, reveal,
#: settlement) and rules the decoder refuses (a name that is not UTF-8 is applied).
UNAPPLIED = {
    "RolloutsPublished",
    "RoundArmed",
    "RoundSealed",
    "VerdictsCommitted",
    "VerdictRevealed",
    "DisputeSettled",
    "ParametersScheduled",
}


@pytest.mark.parametrize("database", ["sqlite", "postgres"])
def test_every_numeric_field_at_its_extremes_is_ingested_and_ranks_nothing(
    emitter,
    serve,
    request,
    tmp_path,
    database,  # noqa: F811 - fixture
) -> None:
    play_extremes(emitter)
    url = database_url(request, database, tmp_path)
    service = serve(url)
    caught_up(service, emitter.w3)
    board = get(service, "/api/leaderboard", limit=500)
    entries = by_name(board)
    # a name that is not UTF-8 is applied all the same, shown with U+FFFD for its bad bytes
    assert board["total"] == len(EXTREME_PEERS) + 1
    assert entries["\ufffd\ufffd"]["address"] == address("bad")
    assert [e["name"] for e in board["entries"][:2]] == ["alice", "bob"]
    assert (entries["alice"]["verified_reward"], entries["alice"]["claimed_reward"]) == (5.0, 5.0)
    assert (entries["bob"]["verified_reward"], entries["bob"]["last_round"]) == (4.0, I64_MAX)
    assert all(e["verified_reward"] == 0 for n, e in entries.items() if n not in HONEST)
    assert entries["whale"]["stake_wei"] == str(U256) and entries["whale"]["stake_eth"] > 1e58
    assert get(service, "/api/leaderboard", sort="stake")["entries"][0]["name"] == "whale"
    assert (entries["exiter"]["status"], entries["exiter"]["stake_wei"]) == ("withdrawn", "0")
    assert "nul\ufffdname" in entries
    assert [entries[n]["out_of_range_batches"] for n in ("puppet", "sybil", "alice")] == [1, 1, 0]
    assert entries["sybil"]["stake_wei"] == "0"  # a forfeit and a penalty of 2^256 - 1
    assert (entries["puppet"]["slashes"], entries["puppet"]["slashed_wei"]) == (1, str(U256))

    puppet = get(service, f"/api/peers/{address('puppet')}")
    (batch,) = puppet["batches"]
    assert (batch["claimed_reward"], batch["claimed_in_range"]) == (I64_MAX / 1000, False)
    assert (batch["outcome"], batch["verified_reward"], batch["verified_in_range"]) == (
        "upheld",
        0.0,
        True,
    )
    (sybil_batch,) = get(service, f"/api/peers/{address('sybil')}")["batches"]
    assert sybil_batch["verified_reward"] == sybil_batch["claimed_reward"] == I64_MIN / 1000
    assert sybil_batch["verified_in_range"] is False
    whale = get(service, f"/api/peers/{address('whale')}")
    assert whale["stake_history"][-1]["counts_from_round"] == I64_MAX  # capped: "never"
    assert get(service, f"/api/peers/{address('exiter')}")["withdrawable_at"] == I64_MAX
    alice = get(service, f"/api/peers/{address('alice')}")
    assert [b["round"] for b in alice["batches"]] == [R]
    assert (alice["batches"][0]["groups"], alice["batches"][0]["completions"]) == (U32, U32)
    assert (alice["batches"][0]["outcome"], alice["batches"][0]["settled"]) == (None, False)
    assert alice["endpoint"]["data"] == "0x" + "ff" * 4096

    judged = get(service, f"/api/rounds/{R}")
    votes = {b["name"]: b["votes"] for b in judged["batches"]}
    assert [(v["verified_reward"], v["in_range"]) for v in votes["alice"]] == [
        (5.0, True),
        (I64_MIN / 1000, False),
        (I64_MIN / 1000, False),  # the ignored item
    ]
    assert judged["sealed"] and judged["out_of_range_batches"] == 2
    last = get(service, f"/api/rounds/{I64_MAX}")
    (crowded,) = last["batches"]
    assert (crowded["verdicts_counted"], crowded["verified_reward"]) == (CROWD, 4.0)
    assert crowded["agree_weight_wei"] == str(U256)  # a sum past uint256, capped
    stats = get(service, "/api/stats")
    assert stats["unapplied_events"] == len(UNAPPLIED)
    assert (stats["verified_reward"], stats["claimed_reward"]) == (9.0, 9.0)
    # exiter: withdrawn; the peer of the non-UTF-8 name: 1 ETH
    assert stats["total_stake_wei"] == str(U256 + 5 * ETHER + SYBIL)
    assert get(service, "/api/rounds", offset=0)["total"] == 2

    store = Store.open(url)
    try:
        with store.engine.connect() as conn:
            unapplied = conn.execute(select(schema.unapplied_events)).all()
            (kept,) = conn.execute(select(schema.rules)).all()
            (seal,) = conn.execute(select(schema.seals)).all()
    finally:
        store.close()
    assert {row.event for row in unapplied} == UNAPPLIED
    too_far = next(row for row in unapplied if row.event == "RolloutsPublished")
    assert json.loads(too_far.data)["round"] == U64 and "2^63 - 1" in too_far.reason
    refused = next(row for row in unapplied if row.event == "ParametersScheduled")
    assert json.loads(refused.data)["data"].startswith("0x") and "\n" not in refused.reason
    assert (kept.from_round, kept.flag_bond_wei, kept.committee_size) == (I64_MAX, str(U96), U16)
    assert (seal.total_weight_wei, seal.committee_size) == (str(U256), U16)

    play_honest_round(emitter, R + 1)  # the sync goes on, and ranks honestly
    caught_up(service, emitter.w3)
    entries = by_name(get(service, "/api/leaderboard"))
    assert (entries["alice"]["verified_reward"], entries["bob"]["verified_reward"]) == (11.0, 8.5)
    assert (entries["alice"]["rank"], entries["bob"]["rank"]) == (1, 2)


def test_the_weighted_median_takes_weights_up_to_2_to_the_256() -> None:
    assert weighted_median_milli([(I64_MIN, U256 - 1), (5000, U256)]) == 5000
    assert weighted_median_milli([(I64_MIN, U256), (I64_MAX, U256)]) == -1  # floor of the mean
    assert weighted_median_milli([(I64_MAX, U256)] * 1000) == I64_MAX
    assert weighted_median_milli([(I64_MIN, U256)] * 3 + [(0, 1)]) == I64_MIN


# ------------------------------------------------------------- the real contract at its largest

#: The coordinator holds stakes, and their total, in uint96: the whale stakes what is left.
U96_STAKE = U96 - 4 * ETHER
NAMES = ("alice", "bob", "whale")


@pytest.mark.parametrize("database", ["sqlite", "postgres"])
def test_the_real_coordinator_at_its_largest_values(
    chain, client_for, deployment, request, tmp_path, database
) -> None:
    """What the coordinator itself accepts: a stake of almost 2^96 wei (its gwei, 7.9 * 10^19,
    is past int64) and claims of 2^63 - 1 and -2^63 (rewardSum is the publisher's word)."""
    accounts = {n: Account.from_key(hashlib.sha256(f"real-{n}".encode()).digest()) for n in NAMES}
    claims = {"whale": I64_MAX, "alice": I64_MIN, "bob": 5000}
    stakes = {"whale": U96_STAKE, "alice": 2 * ETHER, "bob": 2 * ETHER}
    for name, account in accounts.items():
        chain.fund(account.address, stakes[name] + 10 * ETHER)
        client = client_for(account)
        client.register(name, stakes[name])
        digest = hashlib.sha256(f"real-{name}".encode()).digest()
        client.publish_rollouts(chain.current_round(), digest, 8, 64, claims[name])
    db_url = database_url(request, database, tmp_path)
    settings = ServiceSettings(
        rpc_url=chain.w3.provider.endpoint_uri,
        deployment=deployment.save(tmp_path / "deployment.json"),
        db_url=db_url,
        port=0,
        ingest=IngestSettings(confirmations=2, poll_interval=0.05),
    )
    with IndexerService(settings) as service:
        caught_up(service, chain.w3)
        board = get(service, "/api/leaderboard")
        by_stake = get(service, "/api/leaderboard", sort="stake")
    entries = by_name(board)
    assert board["entries"][0]["name"] == "bob" and entries["bob"]["claimed_reward"] == 5.0
    for name in ("whale", "alice"):
        assert entries[name]["claimed_reward"] == 0 and entries[name]["out_of_range_batches"] == 1
    assert entries["whale"]["stake_wei"] == str(U96_STAKE)
    assert by_stake["entries"][0]["name"] == "whale"


def test_a_reorg_takes_unapplied_and_out_of_range_rows_back(
    emitter,
    open_store,
    sqlite_url,  # noqa: F811 - fixture
) -> None:
    """The rows extreme values made (kept logs, out-of-range batches) roll back like any other."""

    def indexer(name: str) -> Indexer:
        return reorg_indexer(emitter, open_store(sqlite_url(name)))

    play_attack(emitter)
    following = indexer("following")
    following.sync()
    emitter.emit_many([published(U64, "alice", 1)])  # kept unapplied
    not_utf8 = encode_event("PeerRegistered", {"peer": address("bad"), "name": "x", "stake": 1})
    emitter.emit_raw(not_utf8[0], encode(["bytes", "uint256"], [b"\xff", ETHER]))
    emitter.emit_many([revealed(R, "alice", "sybil", I64_MAX, 10**30)])  # alice out of range
    following.sync()
    assert following.store.counts()["unapplied_events"] == 1  # the batch; the name is applied
    emitter.w3.provider.make_request("anvil_reorg", [3, []])  # type: ignore[attr-defined]
    kinds: list[str] = []
    following.sync(on_step=lambda result: kinds.append(result.kind))
    assert kinds[0] == "reorg"
    fresh = indexer("fresh")
    fresh.sync()
    assert tables(following.store) == tables(fresh.store)
    assert following.store.counts()["unapplied_events"] == 0


# ------------------------------------------------------- outcomes and rules no coordinator emits


def settled_with(round_: int, subject: str, outcome: int) -> tuple[str, dict]:
    """A settlement of (R, ``subject``) with ``outcome``, its flags outweighed 1 ETH to 2."""
    values = {
        "round": round_,
        "subject": address(subject),
        "outcome": outcome,
        "amount": 0,
        "flagWeight": ETHER,
        "agreeWeight": 2 * ETHER,
        "settler": address("bob"),
        "tip": 0,
    }
    return ("DisputeSettled", values)


def scheduled(from_round: int, tasks: int, group: int) -> tuple[str, dict]:
    """ParametersScheduled of the test deployment's rules with n = ``tasks``, G = ``group``."""
    rules = rules_answer(fromRound=from_round, tasksPerRound=tasks, groupSize=group)
    return ("ParametersScheduled", {"fromRound": from_round, "minStake": ETHER, "rules": rules})


#: DisputeSettled.outcome -> (outcome shown, settled, verified, verified reward) of a batch that
#: ann (2 ETH, 5.0) agreed with and flo (1 ETH, 1.0) flagged: only 2, 3 and 4 settle it.
OUTCOME_CASES = {
    0: (None, False, True, 5.0),  # VerdictState None
    1: (None, False, True, 5.0),  # Published
    2: ("upheld", True, False, 0.0),
    3: ("rejected", True, True, 5.0),
    4: ("inconclusive", True, False, 0.0),
    255: (None, False, True, 5.0),  # no VerdictState at all
}
#: round -> (n, G) scheduled from it, and the batch maximum of that round (n or G out of
#: bounds: the decoder refuses the rules, which leaves them unknown: the protocol's bound)
SHAPES = {0: ((4, 4), 16_000), 100: ((U16, U16), 2_048_000), 200: ((0, 1), 2_048_000),
          300: ((8, 2), 16_000), 400: ((64, 33), 2_048_000)}  # fmt: skip


def play_outcomes_and_shapes(source: Emitter) -> None:
    """Round R: one batch per outcome value of OUTCOME_CASES; pat claims 16,001 in every round
    of SHAPES."""
    judged = [f"outcome-{value}" for value in OUTCOME_CASES]
    source.emit_many(
        [registered(name, ETHER) for name in ("ann", "flo", "pat", *judged)]
        + [scheduled(round_, *shape) for round_, (shape, _) in SHAPES.items()]
    )
    source.emit_many(
        [published(R, name, 5000) for name in judged]
        + [published(round_, "pat", 16_001) for round_ in SHAPES]
    )
    source.emit_many(
        [revealed(R, name, "ann", 5000, 2 * ETHER) for name in judged]
        + [revealed(R, name, "flo", 1000, ETHER, agreed=7) for name in judged]
    )
    source.emit_many(
        [settled_with(R, f"outcome-{value}", value) for value in OUTCOME_CASES]
        + [("FlagResolved", {"round": R, "subject": address("outcome-4"),
                             "flagger": address("flo"), "upheld": False, "amount": 0})]
    )  # fmt: skip


@pytest.mark.parametrize("database", ["sqlite", "postgres"])
def test_any_outcome_and_any_rules_shape_are_taken_for_what_they_are(
    emitter,
    serve,
    request,
    tmp_path,
    database,  # noqa: F811 - fixture
) -> None:
    """DisputeSettled.outcome 2, 3 and 4 settle a batch (upheld, rejected, inconclusive); 0, 1
    and 255 settle nothing. Rules whose n or G the contract would refuse (the decoder does too)
    give their rounds the protocol's bound; valid ones their n x G x 1000."""
    play_outcomes_and_shapes(emitter)
    service = serve(database_url(request, database, tmp_path))
    caught_up(service, emitter.w3)
    for value, (outcome, settled, verified, reward) in OUTCOME_CASES.items():
        (batch,) = get(service, f"/api/peers/{address(f'outcome-{value}')}")["batches"]
        shown = (batch["outcome"], batch["settled"], batch["verified"], batch["verified_reward"])
        assert shown == (outcome, settled, verified, reward), value
        assert batch["slashed"] == (value == 2)
    judged = get(service, f"/api/rounds/{R}")
    assert (judged["disputes"], judged["slashes"]) == (3, 1)
    assert judged["verified_reward"] == 5.0 * 4  # 0, 1, 3 and 255
    flo = get(service, f"/api/peers/{address('flo')}")
    assert [c["kind"] for c in flo["stake_history"]] == ["register"]  # inconclusive: bond back
    pat = {b["round"]: b for b in get(service, f"/api/peers/{address('pat')}")["batches"]}
    for round_, (_, maximum) in SHAPES.items():
        assert pat[round_]["reward_max"] == maximum / 1000, round_
        assert pat[round_]["claimed_in_range"] == (16_001 <= maximum), round_
    stats = get(service, "/api/stats")
    assert stats["unapplied_events"] == 3  # the rules of rounds 100, 200 and 400
    assert stats["verified_batches"] == 4 and get_health(service)["status"] == "ok"


def test_a_reorg_takes_rules_back_and_the_batch_maxima_with_them(
    emitter,
    open_store,
    sqlite_url,  # noqa: F811 - fixture
) -> None:
    """Rules scheduled from a round whose batches exist already (a stand-in can) change their
    maxima, kept or refused; a reorg that removes the rules restores them."""

    def indexer(name: str) -> Indexer:
        made = Indexer(
            emitter.w3,
            emitter.deployment,
            open_store(sqlite_url(name)),
            IngestSettings(confirmations=10, poll_interval=0.05),
            retry=TEST_RETRY,
        )
        made.prepare()
        return made

    def maximum(made: Indexer) -> int:
        with made.store.engine.connect() as conn:
            return conn.execute(select(schema.publications.c.reward_max_milli)).scalar_one()

    emitter.emit_many([scheduled(0, 4, 4), registered("pat", ETHER), published(R, "pat", 16_001)])
    following = indexer("following")
    following.sync()
    assert maximum(following) == 16_000
    for shape, changed in (((U16, 2), 2_048_000), ((8, 8), 64_000)):
        emitter.emit_many([scheduled(R, *shape)])
        following.sync()
        assert maximum(following) == changed
        emitter.w3.provider.make_request("anvil_reorg", [1, []])  # type: ignore[attr-defined]
        following.sync()
        assert maximum(following) == 16_000
    fresh = indexer("fresh")
    fresh.sync()
    assert tables(following.store) == tables(fresh.store)


# ------------------------------------------------------------------- provenance evidence


def reorg_indexer(source: Emitter, store: Store) -> Indexer:
    """An indexer on ``source`` that keeps 10 blocks' hashes (so a shallow reorg is repaired)."""
    made = Indexer(
        source.w3,
        source.deployment,
        store,
        IngestSettings(confirmations=10, poll_interval=0.05),
        retry=TEST_RETRY,
    )
    made.prepare()
    return made


def evidence(round_: int, subject: str, poster: str, group: int = 1, **fields: int):
    values = {"round": round_, "subject": address(subject), "poster": address(poster)}
    values |= {"group": group, "completion": 0, "token": 0, **fields}
    return ("ProvenanceEvidence", values)


def play_evidence(source: Emitter) -> None:
    """alice and bob judge each other in R; two seats post evidence against bob's batch (one with
    every field at its largest), one against a batch never published, one in a round past the
    tables' range."""
    play_honest_round(source, R)
    source.emit_many(
        [
            evidence(R, "bob", "alice", group=2, completion=3, token=7),
            evidence(R, "bob", "carol", group=U32, completion=U32, token=U32),
            evidence(R, "nobody", "alice"),
            evidence(U64, "bob", "alice"),
        ]
    )


def test_provenance_evidence_is_shown_on_its_batch_and_rolls_back_with_a_reorg(
    emitter, serve, tmp_path, open_store, sqlite_url  # noqa: F811 - fixtures
) -> None:
    emitter.emit_many([registered(name, ETHER) for name in ("alice", "bob", "carol")])
    play_evidence(emitter)
    service = serve(f"sqlite:///{tmp_path / 'evidence.db'}")
    caught_up(service, emitter.w3)
    batches = {b["name"]: b for b in get(service, f"/api/rounds/{R}")["batches"]}
    assert (batches["alice"]["evidence"], batches["alice"]["evidence_posted"]) == (0, [])
    bob = batches["bob"]
    assert bob["evidence"] == 2
    assert [(e["poster"], e["group"], e["completion"], e["token"]) for e in bob["evidence_posted"]] == [
        (address("alice"), 2, 3, 7),
        (address("carol"), U32, U32, U32),
    ]
    (listed,) = get(service, f"/api/peers/{address('bob')}")["batches"]
    assert listed["evidence"] == 2 and listed["verified_reward"] == 4.5  # evidence is no vote
    assert get(service, "/api/stats")["unapplied_events"] == 1  # the round past 2^63 - 1

    following = reorg_indexer(emitter, open_store(sqlite_url("following")))
    following.sync()
    assert following.store.counts()["evidence"] == 3  # on bob's batch twice, on no batch once
    emitter.w3.provider.make_request("anvil_reorg", [1, []])  # type: ignore[attr-defined]
    following.sync()
    fresh = reorg_indexer(emitter, open_store(sqlite_url("fresh")))
    fresh.sync()
    assert tables(following.store) == tables(fresh.store)
    assert following.store.counts()["evidence"] == 0

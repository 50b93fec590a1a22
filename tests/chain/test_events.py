"""The event reader: typed records, chunked and adaptive ranges, round/peer filters."""

from __future__ import annotations

from itertools import pairwise

import pytest
from eth_abi import encode
from eth_utils import keccak
from web3 import HTTPProvider, Web3

from node.chain.abi import abi_type_string, load_abi, snake_case
from node.chain.errors import RpcError, RpcUnavailable
from node.chain.events import (
    EVENT_TYPES,
    PROTOCOL_EVENTS,
    Claimed,
    DisputeSettled,
    EventReader,
    ExitRequested,
    FlagResolved,
    ParametersScheduled,
    Paused,
    PeerRegistered,
    RolloutsPublished,
    RoundArmed,
    RoundSealed,
    StakeAdded,
    Unpaused,
    VerdictRevealed,
    VerdictsCommitted,
    Withdrawn,
    decode_log,
    raw_log,
)
from node.chain.models import Address, FrozenModel, Rules, checksummed
from node.chain.rpc import RetryPolicy
from tests.chain.helpers import (
    ETHER,
    Ballot,
    item_on,
    judge,
    publish,
    register_all,
    to_settle_phase,
)

pytestmark = pytest.mark.integration


class RangeLimitedProvider(HTTPProvider):
    """A real RPC that, like hosted ones, refuses getLogs over more than ``max_range`` blocks."""

    def __init__(self, url: str, max_range: int) -> None:
        super().__init__(url, exception_retry_configuration=None)
        self.max_range = max_range
        self.ranges: list[tuple[int, int]] = []

    def make_request(self, method, params):
        if method == "eth_getLogs":
            low, high = int(params[0]["fromBlock"], 16), int(params[0]["toBlock"], 16)
            self.ranges.append((low, high))
            if high - low + 1 > self.max_range:
                return {
                    "jsonrpc": "2.0",
                    "id": 1,
                    "error": {"code": -32005, "message": "query returned more than 10000 results"},
                }
        return super().make_request(method, params)


@pytest.fixture
def history(chain, client_for, dev_accounts):
    """A round judged from publication to withdrawal, one transaction per block: returns
    (first block, round, clients). b and c flag a (upheld), b agrees with c."""
    first = chain.w3.eth.block_number + 1
    a, b, c = register_all(client_for, dev_accounts[1:4])
    a.add_stake(ETHER)
    round_ = chain.current_round() + 1
    chain.warp_to_round(round_)
    for client in (a, b, c):
        publish(client, round_)
    chain.warp_to_round(round_ + 1)
    publish(b, round_ + 1)
    ballots = [
        Ballot(b, round_, [item_on(a, flag=True), item_on(c, flag=False)]),
        Ballot(c, round_, [item_on(a, flag=True)]),
    ]
    judge(chain, round_, ballots)
    to_settle_phase(chain, a, round_)
    c.settle(round_, a.account_address)
    c.resolve_flag(round_, a.account_address, b.account_address)
    c.claim()
    owner = client_for(dev_accounts[0])
    owner.schedule_parameters(
        ETHER, Rules(**(owner.rules_at(0).model_dump() | {"slash_bps": 2500}))
    )
    owner.pause()
    owner.unpause()
    a.request_exit()
    chain.warp_to_round(a.cached_phases.withdrawable_from(chain.current_round()))
    a.withdraw()
    return first, round_, (a, b, c)


_SAMPLES = {
    "address": "0x70997970C51812dc3A010C7d01b50e0d17dc79C8",
    "uint256": 7,
    "uint96": 96,
    "uint64": 3,
    "uint32": 5,
    "uint24": 4,
    "uint16": 5_000,
    "uint8": 4,
    "int64": -9,
    "bool": True,
    "bytes32": b"\x11" * 32,
    "bytes20": b"\x22" * 20,
    "bytes": b"\x01\x02",
    "string": "name",
}


def _sample(item: dict):
    if item["type"] == "tuple":
        return tuple(_sample(component) for component in item["components"])
    if item["name"] in ("tasksPerRound", "groupSize"):
        return 8  # the batch shape has its own ranges (1..64, 2..32)
    return _SAMPLES[item["type"]]


@pytest.mark.parametrize(
    "abi", [i for i in load_abi() if i["type"] == "event"], ids=lambda i: i["name"]
)
def test_every_event_of_the_interface_decodes(abi) -> None:
    """A synthetic log of each event (sample values) decodes to its class with those values."""
    types = [abi_type_string(i) for i in abi["inputs"]]
    signature = f"{abi['name']}({','.join(types)})"
    indexed = [(t, _sample(i)) for t, i in zip(types, abi["inputs"], strict=True) if i["indexed"]]
    data = [(t, _sample(i)) for t, i in zip(types, abi["inputs"], strict=True) if not i["indexed"]]
    log = {
        "topics": [keccak(text=signature)] + [encode([t], [v]) for t, v in indexed],
        "data": encode([t for t, _ in data], [v for _, v in data]),
        "blockNumber": 1,
        "blockHash": b"\x33" * 32,
        "transactionHash": b"\x44" * 32,
        "logIndex": 0,
    }
    event = decode_log(log)
    assert type(event) is EVENT_TYPES[abi["name"]]
    for item in abi["inputs"]:
        value = getattr(event, snake_case(item["name"]))
        if isinstance(value, Rules):
            value = value.to_abi()
        expected = _sample(item)
        assert value == expected, (abi["name"], item["name"])


@pytest.mark.parametrize(
    ("raw", "name"),
    [(b"\xff\xfe", "\ufffd\ufffd"), ("zoë".encode(), "zoë"), (b"a\xc3", "a\ufffd")],
)
def test_a_registered_name_of_any_bytes_decodes(raw: bytes, name: str) -> None:
    """The contract takes any 1-32 bytes as a name: bytes that are not UTF-8 read as U+FFFD,
    and the registration still decodes (its peer stays known to every reader)."""
    peer = "0x70997970C51812dc3A010C7d01b50e0d17dc79C8"
    log = {
        "topics": [
            keccak(text="PeerRegistered(address,string,uint256)"),
            encode(["address"], [peer]),
        ],
        "data": encode(["bytes", "uint256"], [raw, 10**18]),
        "blockNumber": 1,
        "blockHash": b"\x33" * 32,
        "transactionHash": b"\x44" * 32,
        "logIndex": 0,
    }
    event = decode_log(log)
    assert (event.peer, event.name, event.stake) == (peer, name, 10**18)


def test_kept_checksums_still_refuse_what_is_not_an_address() -> None:
    """Addresses are checksummed once and kept; a kept answer never lets a wrong checksum or
    a non-address through."""
    peer = "0x70997970C51812dc3A010C7d01b50e0d17dc79C8"
    for _ in range(2):  # the second time from what was kept
        assert checksummed(peer.lower()) == checksummed(peer) == peer
        assert PeerInfoAddress(peer=peer.lower()).peer == peer
    wrong = peer.replace("C5", "c5")  # mixed case, so a checksum: a wrong one (a typo)
    for bad in (wrong, peer[:-1], peer + "0", "70997970C51812dc3A010C7d01b50e0d17dc79C8", b"\x01"):
        for _ in range(2):
            with pytest.raises(ValueError, match="not an Ethereum address"):
                PeerInfoAddress(peer=bad)
    with pytest.raises(ValueError, match="wrong EIP-55 checksum"):
        checksummed(wrong)


class PeerInfoAddress(FrozenModel):
    peer: Address


def test_reads_every_event_typed_and_located(chain, history) -> None:
    first, round_, (a, b, c) = history
    latest = chain.w3.eth.block_number
    events = EventReader(chain.w3, chain.deployment.coordinator).read(first, latest)
    kinds = [type(e) for e in events]
    assert kinds == [PeerRegistered] * 3 + [StakeAdded] + [RolloutsPublished] * 4 + [
        RoundArmed,
        RoundSealed,
        VerdictsCommitted,
        VerdictsCommitted,
        VerdictRevealed,
        VerdictRevealed,
        VerdictRevealed,
        DisputeSettled,
        FlagResolved,
        Claimed,
        ParametersScheduled,
        Paused,
        Unpaused,
        ExitRequested,
        Withdrawn,
    ]
    for event in events:
        block = chain.w3.eth.get_block(event.block_number)
        assert event.block_hash == block["hash"].to_0x_hex()
        assert event.tx_hash in {tx.to_0x_hex() for tx in block["transactions"]}
    registered = events[0]
    assert (registered.peer, registered.name, registered.stake) == (
        a.account_address,
        "peer-0",
        ETHER,
    )
    stake = events[3]
    assert (stake.amount, stake.total_stake, stake.counts_from_round) == (
        ETHER,
        2 * ETHER,
        round_,
    )
    sealed = next(e for e in events if isinstance(e, RoundSealed))
    assert (sealed.round, sealed.total_weight) == (round_, 4 * ETHER)
    assert sealed.beacon == a.seal(round_).beacon
    settled = next(e for e in events if isinstance(e, DisputeSettled))
    assert (settled.round, settled.subject, settled.slashed, settled.amount) == (
        round_,
        a.account_address,
        True,
        ETHER,
    )
    assert (settled.flag_weight, settled.agree_weight, settled.settler) == (
        2 * ETHER,
        0,
        c.account_address,
    )
    scheduled = next(e for e in events if isinstance(e, ParametersScheduled))
    assert scheduled.rules.slash_bps == 2500 and scheduled.rules.from_round == scheduled.from_round
    exited = next(e for e in events if isinstance(e, ExitRequested))
    assert exited.withdrawable_from_round == a.cached_phases.withdrawable_from(exited.exit_round)
    withdrawn = events[-1]
    assert (withdrawn.peer, withdrawn.amount) == (a.account_address, ETHER)
    flags = [e for e in events if isinstance(e, VerdictRevealed) and e.is_flag]
    assert [(e.attester, e.subject, e.weight) for e in flags] == [
        (b.account_address, a.account_address, ETHER),
        (c.account_address, a.account_address, ETHER),
    ]


def test_chunked_reads_equal_one_big_read(chain, history) -> None:
    first, _, _ = history
    latest = chain.w3.eth.block_number
    whole = EventReader(chain.w3, chain.deployment.coordinator).read(first, latest)
    chunked = EventReader(chain.w3, chain.deployment.coordinator, max_chunk=2)
    assert chunked.read(first, latest) == whole
    chunks = list(chunked.iter_chunks(first, latest))
    assert len(chunks) == -(-(latest - first + 1) // 2)
    assert EventReader(chain.w3, chain.deployment.coordinator).read(latest + 1, latest) == []


def test_filters_by_round_peer_and_type(chain, history) -> None:
    first, round_, (a, b, _) = history
    latest = chain.w3.eth.block_number
    reader = EventReader(chain.w3, chain.deployment.coordinator, max_chunk=3)
    in_round = reader.read(first, latest, round=round_)
    assert {type(e) for e in in_round} == {
        RolloutsPublished,
        RoundArmed,
        RoundSealed,
        VerdictsCommitted,
        VerdictRevealed,
        DisputeSettled,
        FlagResolved,
    }
    assert all(e.round == round_ for e in in_round) and len(in_round) == 3 + 2 + 2 + 3 + 1 + 1
    about_a = reader.read(first, latest, peer=a.account_address)
    assert all(
        a.account_address in (getattr(e, "peer", None), getattr(e, "subject", None))
        for e in about_a
    )
    assert [type(e) for e in about_a] == [
        PeerRegistered,
        StakeAdded,
        RolloutsPublished,
        VerdictRevealed,
        VerdictRevealed,
        DisputeSettled,
        FlagResolved,
        ExitRequested,
        Withdrawn,
    ]
    published_by_b = reader.read(first, latest, events=[RolloutsPublished], peer=b.account_address)
    assert [e.round for e in published_by_b] == [round_, round_ + 1]
    both = reader.read(
        first, latest, events=[RolloutsPublished], round=round_ + 1, peer=b.account_address
    )
    assert len(both) == 1
    protocol_only = reader.read(first, latest, events=PROTOCOL_EVENTS)
    assert not any(isinstance(e, (Paused, Unpaused)) for e in protocol_only)


def test_halves_the_range_when_the_rpc_refuses_it(chain, anvil, history) -> None:
    first, _, _ = history
    latest = chain.w3.eth.block_number
    expected = EventReader(chain.w3, chain.deployment.coordinator).read(first, latest)
    provider = RangeLimitedProvider(anvil.url, max_range=3)
    reader = EventReader(Web3(provider), chain.deployment.coordinator, max_chunk=16)
    assert reader.read(first, latest) == expected
    refused = [(low, high) for low, high in provider.ranges if high - low + 1 > 3]
    served = [(low, high) for low, high in provider.ranges if high - low + 1 <= 3]
    assert refused[:3] == [(first, first + 15), (first, first + 7), (first, first + 3)]
    assert served[0][0] == first and served[-1][1] == latest
    assert all(b[0] == a[1] + 1 for a, b in pairwise(served))


def test_a_single_block_that_is_refused_is_an_rpc_error(chain, anvil, history) -> None:
    first, _, _ = history
    reader = EventReader(
        Web3(RangeLimitedProvider(anvil.url, max_range=0)), chain.deployment.coordinator
    )
    with pytest.raises(RpcError, match=f"logs of block {first} alone"):
        reader.read(first, first + 4)


class AnsweringProvider(HTTPProvider):
    """An RPC that answers every request with ``answer`` (a misbehaving endpoint)."""

    def __init__(self, answer: object) -> None:
        super().__init__("http://127.0.0.1:9", exception_retry_configuration=None)
        self.answer = answer
        self.requests = 0

    def make_request(self, method, params):
        self.requests += 1
        return self.answer


_WELL_FORMED_LOG = {
    "topics": [],
    "data": "0x",
    "blockNumber": "0x1",
    "blockHash": "0x",
    "transactionHash": "0x",
    "logIndex": "0x0",
}


def _getlogs_answer(result: object) -> dict:
    return {"jsonrpc": "2.0", "id": 1, "result": result}


def test_the_malformed_cases_below_differ_from_a_well_formed_log_by_one_field() -> None:
    assert raw_log(_WELL_FORMED_LOG | {"topics": ["0x" + "ab" * 32], "logIndex": "0x1f"}) == {
        "topics": [b"\xab" * 32],
        "data": b"",
        "blockNumber": 1,
        "blockHash": b"",
        "transactionHash": b"",
        "logIndex": 31,
        "removed": False,
    }


@pytest.mark.parametrize(
    "answer",
    [
        "not an object",
        _getlogs_answer(None),
        _getlogs_answer("0x"),
        _getlogs_answer([["0x12"]]),
        _getlogs_answer([{"topics": ["0x" + "00" * 32]}]),  # no data, no location
        _getlogs_answer([_WELL_FORMED_LOG | {"data": 5}]),
        _getlogs_answer([_WELL_FORMED_LOG | {"topics": "0x12"}]),
        _getlogs_answer([_WELL_FORMED_LOG | {"data": "12"}]),
        _getlogs_answer([_WELL_FORMED_LOG | {"blockNumber": 1}]),
    ],
)
def test_a_malformed_getlogs_answer_is_retried_then_one_rpc_error(answer: object) -> None:
    provider = AnsweringProvider(answer)
    quick = RetryPolicy(attempts=3, initial_delay=0.01, max_delay=0.02)
    reader = EventReader(Web3(provider), "0x" + "11" * 20, retry=quick)
    with pytest.raises(RpcUnavailable, match=r"logs of blocks 1-2 with .*gave up after 3 attempts"):
        reader.read(1, 2)
    assert provider.requests == 3  # retried, as an unreachable RPC is

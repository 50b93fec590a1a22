"""The event reader: typed records, chunked and adaptive ranges, round/peer filters."""

from __future__ import annotations

from itertools import pairwise

import pytest
from web3 import HTTPProvider, Web3

from node.chain.errors import RpcError
from node.chain.events import (
    PROTOCOL_EVENTS,
    Attested,
    DisputeSettled,
    EventReader,
    ExitRequested,
    ParametersChanged,
    Paused,
    PeerRegistered,
    RolloutsPublished,
    StakeAdded,
    Unpaused,
    Withdrawn,
)
from tests.chain.helpers import ETHER, publish, register_all, verdict_on

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
    """A little of everything, one transaction per block: returns (first block, round, clients)."""
    first = chain.w3.eth.block_number + 1
    a, b, c = register_all(client_for, dev_accounts[1:4])
    a.add_stake(ETHER)
    round_ = chain.current_round()
    digests = [publish(client, round_) for client in (a, b, c)]
    chain.warp_to_round(round_ + 1)
    b.attest(
        [
            verdict_on(a, round_, digests[0], flag=True),
            verdict_on(c, round_, digests[2], flag=False),
        ]
    )
    c.attest([verdict_on(a, round_, digests[0], flag=True)])
    publish(b, round_ + 1)
    chain.warp_to_round(round_ + 3)
    c.settle(round_, a.account_address)
    owner = client_for(dev_accounts[0])
    owner.set_slash_bps(2500)
    owner.pause()
    owner.unpause()
    a.request_exit()
    chain.warp_to(a.peer_info(a.account_address).withdrawable_at)
    a.withdraw()
    return first, round_, (a, b, c)


def test_reads_every_event_typed_and_located(chain, history) -> None:
    first, round_, (a, b, c) = history
    latest = chain.w3.eth.block_number
    events = EventReader(chain.w3, chain.deployment.coordinator).read(first, latest)
    kinds = [type(e) for e in events]
    assert kinds == [PeerRegistered] * 3 + [StakeAdded] + [RolloutsPublished] * 3 + [
        Attested
    ] * 3 + [
        RolloutsPublished,
        DisputeSettled,
        ParametersChanged,
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
    assert (stake.amount, stake.total_stake) == (ETHER, 2 * ETHER)
    settled = next(e for e in events if isinstance(e, DisputeSettled))
    assert (settled.round, settled.subject, settled.slashed, settled.amount) == (
        round_,
        a.account_address,
        True,
        ETHER,
    )
    changed = next(e for e in events if isinstance(e, ParametersChanged))
    assert (changed.name, changed.value) == ("slashBps", 2500)
    withdrawn = events[-1]
    assert (withdrawn.peer, withdrawn.amount) == (a.account_address, ETHER)
    flags = [e for e in events if isinstance(e, Attested) and e.is_flag]
    assert [(e.attester, e.subject) for e in flags] == [
        (b.account_address, a.account_address),
        (c.account_address, a.account_address),
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
    assert {type(e) for e in in_round} == {RolloutsPublished, Attested, DisputeSettled}
    assert all(e.round == round_ for e in in_round) and len(in_round) == 3 + 3 + 1
    about_a = reader.read(first, latest, peer=a.account_address)
    assert all(
        getattr(e, "peer", None) == a.account_address
        or getattr(e, "subject", None) == a.account_address
        for e in about_a
    )
    assert [type(e) for e in about_a] == [
        PeerRegistered,
        StakeAdded,
        RolloutsPublished,
        Attested,
        Attested,
        DisputeSettled,
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

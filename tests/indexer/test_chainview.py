"""Block headers read by a raw JSON-RPC request (coordinator_indexer.chainview): the same header
web3's get_block gives, None past the head, and a malformed answer retried like an unreachable
RPC, then one RpcUnavailable. A seal read at a block whose state the RPC pruned ends in one error
that says to use an archive node."""

from __future__ import annotations

import pytest
from web3 import Web3

from coordinator_indexer.chainview import ChainView
from coordinator_indexer.store import BlockRef
from node.chain.errors import RpcUnavailable, StateUnavailable
from node.chain.rpc import RetryPolicy
from tests.chain.test_events import AnsweringProvider
from tests.chain_fixtures import start_anvil

pytestmark = pytest.mark.integration

_HEADER = {
    "number": "0x5",
    "hash": "0x" + "ab" * 32,
    "parentHash": "0x" + "cd" * 32,
    "timestamp": "0x10",
}


def test_headers_are_what_web3_reads(chain) -> None:
    chain.mine(3)
    view = ChainView(chain.w3)
    head = chain.w3.eth.block_number
    for number in (0, head - 1, head):
        header = chain.w3.eth.get_block(number)
        assert view.block(number) == BlockRef(
            number,
            "0x" + bytes(header["hash"]).hex(),
            "0x" + bytes(header["parentHash"]).hex(),
            header["timestamp"],
        )
    assert view.block(head + 1) is None
    assert view.block(-1) is None


def test_a_header_in_upper_case_hex_is_kept_in_lower_case() -> None:
    upper = _HEADER | {"hash": "0x" + "AB" * 32}
    view = ChainView(Web3(AnsweringProvider({"jsonrpc": "2.0", "id": 1, "result": upper})))
    assert view.block(5).hash == "0x" + "ab" * 32


@pytest.mark.parametrize(
    "answer",
    [
        "not an object",
        {"jsonrpc": "2.0", "id": 1, "result": "0x5"},
        {"jsonrpc": "2.0", "id": 1, "result": _HEADER | {"number": 5}},
        {"jsonrpc": "2.0", "id": 1, "result": _HEADER | {"hash": "ab" * 32}},
        {"jsonrpc": "2.0", "id": 1, "result": {k: v for k, v in _HEADER.items() if k != "hash"}},
        {"jsonrpc": "2.0", "id": 1, "result": _HEADER | {"parentHash": "0xzz"}},
    ],
)
def test_a_malformed_header_is_retried_then_one_rpc_error(answer: object) -> None:
    provider = AnsweringProvider(answer)
    quick = RetryPolicy(attempts=3, initial_delay=0.01, max_delay=0.02)
    view = ChainView(Web3(provider), retry=quick)
    with pytest.raises(RpcUnavailable, match=r"header of block 0x5 with .*gave up after 3"):
        view.block(5)
    assert provider.requests == 3


def test_a_seal_read_at_a_pruned_block_says_to_use_an_archive_node(tmp_path, dev_accounts) -> None:
    anvil = start_anvil(tmp_path / "anvil.log", extra_args=("--prune-history", "2"))
    try:
        w3 = Web3(Web3.HTTPProvider(anvil.url))
        for _ in range(6):
            w3.provider.make_request("evm_mine", [])
        old = "0x" + bytes(w3.eth.get_block(1)["hash"]).hex()
        view = ChainView(w3, dev_accounts[1].address, retry=RetryPolicy(attempts=2))
        with pytest.raises(StateUnavailable, match="archive node") as raised:
            view.seal_reads(1, [dev_accounts[2].address], old)
        assert "rulesAt(1)" in str(raised.value)
    finally:
        anvil.stop()

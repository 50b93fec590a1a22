"""The seal's weight reads in one call (coordinator_indexer.weights_reader): the committed creation
code is the forge build's, its call data eth_abi's encoding, and on the deployed coordinator its
answers are ``weightAt``'s, peer for peer; a chain that refuses the call is read peer by peer with
the same result."""

from __future__ import annotations

import random
from pathlib import Path

import pytest
from eth_abi import encode
from eth_account import Account
from eth_utils import to_checksum_address

from coordinator_indexer import weights_reader
from coordinator_indexer.chainview import ChainView
from tests.chain.helpers import ETHER, random_peers, to_commit_phase

pytestmark = pytest.mark.integration


def test_the_committed_creation_code_is_the_forge_builds(contract_artifact: Path) -> None:
    assert contract_artifact.is_file()  # the fixture rebuilt every contract that was stale
    assert weights_reader.COMMITTED_PATH.read_text() == weights_reader.rendered(), (
        "coordinator_indexer/weights_reader.json is stale: run "
        "`python -m coordinator_indexer.weights_reader --write` and commit it"
    )


def _sealed_swarm(chain, client_for, dev_accounts, count: int):  # type: ignore[no-untyped-def]
    """``count`` peers with random stakes (one with a pending deposit, one exiting) and a sealed
    round: (owner, round, the peers' addresses and an address that never registered)."""
    owner = client_for(dev_accounts[0])
    peers = random_peers(chain, client_for, random.Random(7), count)
    round_ = chain.current_round() + 1
    peers[0].add_stake(2 * ETHER)  # pending in this round: weightAt leaves it out
    peers[1].request_exit()
    to_commit_phase(chain, owner, round_)
    owner.seal_round(round_)
    stranger = Account.from_key(bytes(range(32))).address
    return owner, round_, [p.account_address for p in peers] + [stranger]


def test_one_call_answers_what_weight_at_answers_for_every_peer(
    w3, chain, client_for, dev_accounts
) -> None:  # type: ignore[no-untyped-def]
    owner, round_, addresses = _sealed_swarm(chain, client_for, dev_accounts, 12)
    expected = [owner.weight_at(a, round_) for a in addresses]
    assert len(set(expected)) > 3 and 0 in expected  # stakes differ; the stranger weighs 0
    view = ChainView(w3, owner.contract.address)
    number = w3.eth.block_number
    to = owner.contract.address
    assert view._weights_in_one_call(to, round_, addresses, number) == expected
    assert view._weights_peer_by_peer(to, round_, addresses, number) == expected
    seal_block = w3.eth.get_block(number)["hash"]
    reads = view.seal_reads(round_, addresses, "0x" + bytes(seal_block).hex())
    assert reads.weights == dict(zip(addresses, expected, strict=True))


def test_a_chain_that_refuses_the_call_is_read_peer_by_peer(
    w3, chain, client_for, dev_accounts, monkeypatch
) -> None:  # type: ignore[no-untyped-def]
    """A call the chain refuses (here: creation code past EIP-3860's 49,152 bytes, as 1,600
    peers in one call would be) is read peer by peer, with the same weights."""
    owner, round_, registered = _sealed_swarm(chain, client_for, dev_accounts, 12)
    rng = random.Random(8)
    addresses = registered + [Account.from_key(rng.randbytes(32)).address for _ in range(1_587)]
    expected = {a: owner.weight_at(a, round_) for a in registered} | dict.fromkeys(
        addresses[13:], 0
    )
    view = ChainView(w3, owner.contract.address)
    number, to = w3.eth.block_number, owner.contract.address
    assert view._weights_in_one_call(to, round_, addresses, number) is None
    monkeypatch.setattr(weights_reader, "PEERS_PER_CALL", len(addresses))  # one refused call
    seal_block = w3.eth.get_block(number)["hash"]
    reads = view.seal_reads(round_, addresses, "0x" + bytes(seal_block).hex())
    assert reads.weights == expected


def test_the_call_data_is_what_eth_abi_encodes() -> None:
    rng = random.Random(7)
    peers = [to_checksum_address(rng.randbytes(20)) for _ in range(500)]
    coordinator = to_checksum_address(rng.randbytes(20))
    for round_, chosen in ((0, []), (3, peers[:1]), (2**64 - 1, peers)):
        arguments = encode(["address", "uint64", "address[]"], [coordinator, round_, chosen])
        expected = "0x" + (weights_reader.creation_code() + arguments).hex()
        assert weights_reader.call_data(coordinator, round_, chosen) == expected
    refused = ((2**64, peers[:1]), (-1, peers[:1]), (3, ["0x1234"]), (3, ["0x" + "zz" * 20]))
    for round_, chosen in refused:
        with pytest.raises(ValueError):
            weights_reader.call_data(coordinator, round_, chosen)

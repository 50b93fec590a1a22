"""Revert decoding, volunteer-facing messages, units and RPC error classification (no chain)."""

from __future__ import annotations

import pickle

import pytest
import requests
from eth_abi import encode
from eth_utils import keccak
from hypothesis import given
from hypothesis import strategies as st
from web3.exceptions import ContractCustomError, ContractLogicError, Web3RPCError

from node.chain.abi import load_abi
from node.chain.errors import (
    ContractRevert,
    InsufficientFunds,
    NonceConflict,
    PermanentChainError,
    RetryableChainError,
    RpcError,
    RpcUnavailable,
    StateUnavailable,
)
from node.chain.revert_decoding import decode_revert, error_selectors
from node.chain.reverts import (
    SwarmCoordinatorAttestationOutOfOrder,
    SwarmCoordinatorInsufficientStake,
    SwarmCoordinatorInvalidParameter,
    SwarmCoordinatorSignatureExpired,
    SwarmCoordinatorStillBonded,
    SwarmCoordinatorWrongPhase,
    SwarmCoordinatorWrongRound,
    SwarmCoordinatorZeroDigest,
)
from node.chain.rpc import RetryPolicy, call_with_retry, classify
from node.chain.units import format_duration, format_eth, parse_eth

ADDRESS = "0x70997970C51812dc3A010C7d01b50e0d17dc79C8"
SAMPLES = {
    "address": ADDRESS,
    "uint256": 7,
    "int256": -7,
    "uint64": 3,
    "uint32": 5,
    "int64": -9,
    "bytes32": b"\x11" * 32,
}


def revert_data(name: str, types: list[str], values: list[object]) -> bytes:
    return keccak(text=f"{name}({','.join(types)})")[:4] + encode(types, values)


def test_every_abi_error_decodes_to_its_class_with_its_values() -> None:
    for item in (i for i in load_abi() if i["type"] == "error"):
        types = [i["type"] for i in item["inputs"]]
        values = [SAMPLES[t] for t in types]
        error = decode_revert(revert_data(item["name"], types, values))
        assert type(error).__name__ == item["name"]
        assert list(error.values.values()) == values
        assert isinstance(error, ContractRevert) and isinstance(error, PermanentChainError)
        assert str(error) == error.describe() and "without a known reason" not in str(error)


def test_insufficient_stake_message_in_eth() -> None:
    error = decode_revert(
        revert_data(
            "SwarmCoordinatorInsufficientStake", ["uint256", "uint256"], [5 * 10**17, 10**18]
        )
    )
    assert isinstance(error, SwarmCoordinatorInsufficientStake)
    assert (error.stake, error.min_stake) == (5 * 10**17, 10**18)
    assert "stake 0.5 ETH is below the minimum 1 ETH" in str(error)
    assert "--stake of at least 1 ETH" in str(error)


def test_still_bonded_names_the_round_withdraw_works_from() -> None:
    error = decode_revert(revert_data("SwarmCoordinatorStillBonded", ["uint64"], [42]))
    assert isinstance(error, SwarmCoordinatorStillBonded) and error.withdrawable_from_round == 42
    assert "withdraw works from round 42" in str(error)


def test_wrong_phase_names_the_allowed_rounds() -> None:
    types = ["uint64", "uint64", "uint64"]
    bounded = decode_revert(revert_data("SwarmCoordinatorWrongPhase", types, [7, 9, 10]))
    assert isinstance(bounded, SwarmCoordinatorWrongPhase)
    assert (bounded.round, bounded.from_round, bounded.to_round) == (7, 9, 10)
    assert "phase of round 7" in str(bounded) and "from round 9 through round 10" in str(bounded)
    open_ended = decode_revert(revert_data("SwarmCoordinatorWrongPhase", types, [7, 14, 2**64 - 1]))
    assert "from round 14 on" in str(open_ended)


def test_expired_signature_shows_the_deadline() -> None:
    error = decode_revert(
        revert_data("SwarmCoordinatorSignatureExpired", ["uint64"], [1_767_225_600])
    )
    assert isinstance(error, SwarmCoordinatorSignatureExpired)
    assert "expired at 2026-01-01 00:00:00 UTC" in str(error) and "sign again" in str(error)


def test_wrong_round_says_future_or_late() -> None:
    future = decode_revert(revert_data("SwarmCoordinatorWrongRound", ["uint64", "uint64"], [9, 4]))
    late = decode_revert(revert_data("SwarmCoordinatorWrongRound", ["uint64", "uint64"], [1, 4]))
    assert isinstance(future, SwarmCoordinatorWrongRound)
    assert "round 9 has not started" in str(future) and "too old" in str(late)


def test_invalid_parameter_names_the_parameter_and_its_rule() -> None:
    data = revert_data(
        "SwarmCoordinatorInvalidParameter",
        ["bytes32", "uint256"],
        [b"quorumBps".ljust(32, b"\0"), 4_999],
    )
    error = decode_revert(data)
    assert isinstance(error, SwarmCoordinatorInvalidParameter)
    assert error.parameter_name == "quorumBps"
    assert "quorumBps = 4999" in str(error) and "5000 to 9999" in str(error)


def test_addresses_are_checksummed() -> None:
    data = revert_data("SwarmCoordinatorAttestationOutOfOrder", ["address"], [ADDRESS.lower()])
    error = decode_revert(data)
    assert isinstance(error, SwarmCoordinatorAttestationOutOfOrder) and error.subject == ADDRESS


def test_plain_reverts_and_unknown_selectors_keep_the_raw_data() -> None:
    reason = decode_revert(bytes.fromhex("08c379a0") + encode(["string"], ["boom"]))
    assert type(reason) is ContractRevert and "boom" in str(reason)
    panic = decode_revert(bytes.fromhex("4e487b71") + encode(["uint256"], [0x11]))
    assert "overflow" in str(panic)
    unknown = decode_revert("0xdeadbeef01")
    assert type(unknown) is ContractRevert and unknown.data == bytes.fromhex("deadbeef01")
    assert "0xdeadbeef01" in str(unknown)
    assert type(decode_revert(None)) is ContractRevert
    truncated = decode_revert(
        revert_data("SwarmCoordinatorWrongRound", ["uint64", "uint64"], [1, 2])[:10]
    )
    assert type(truncated) is ContractRevert


def test_selectors_are_unique_and_complete() -> None:
    assert len(error_selectors()) == len([i for i in load_abi() if i["type"] == "error"])


def test_reverts_survive_pickling_with_their_context() -> None:
    error = decode_revert(revert_data("SwarmCoordinatorZeroDigest", [], [])).with_context(
        tx_hash="0xabc"
    )
    copy = pickle.loads(pickle.dumps(error))
    assert (
        isinstance(copy, SwarmCoordinatorZeroDigest)
        and copy.tx_hash == "0xabc"
        and str(copy) == str(error)
    )


def test_web3_contract_errors_are_decoded() -> None:
    data = "0x" + revert_data("SwarmCoordinatorZeroDigest", [], []).hex()
    assert isinstance(
        classify(ContractCustomError(data, data=data), what="x", endpoint="e"),
        SwarmCoordinatorZeroDigest,
    )
    plain = classify(
        ContractLogicError("execution reverted: nope", data=None), what="x", endpoint="e"
    )
    assert type(plain) is ContractRevert and "nope" in str(plain)


def _http_error(status: int) -> requests.HTTPError:
    response = requests.Response()
    response.status_code = status
    return requests.HTTPError(response=response)


def _rpc_error(message: str) -> Web3RPCError:
    return Web3RPCError(message, rpc_response={"error": {"code": -32000, "message": message}})


@pytest.mark.parametrize(
    ("exc", "expected"),
    [
        (requests.ConnectionError("refused"), RpcUnavailable),
        (requests.Timeout("slow"), RpcUnavailable),
        (_http_error(429), RpcUnavailable),
        (_http_error(503), RpcUnavailable),
        (_http_error(404), RpcError),
        (_rpc_error("nonce too low"), NonceConflict),
        (_rpc_error("replacement transaction underpriced"), NonceConflict),
        (_rpc_error("insufficient funds for gas * price + value"), InsufficientFunds),
        (_rpc_error("daily request rate limit exceeded"), RpcUnavailable),
        (_rpc_error("method not found"), RpcError),
        (_rpc_error("missing trie node 8fa1 (path ) <nil>"), StateUnavailable),
        (_rpc_error("historical state 0x5e2c is not available"), StateUnavailable),
        (_rpc_error("old data not available due to pruning"), StateUnavailable),
        (
            _rpc_error("BlockOutOfRangeError: block height is 51 but requested was 20"),
            StateUnavailable,
        ),
        # a block above the node's height is not pruned state: the node is behind
        (_rpc_error("BlockOutOfRangeError: block height is 51 but requested was 60"), RpcError),
    ],
)
def test_rpc_errors_are_sorted_into_the_family(exc: Exception, expected: type) -> None:
    error = classify(exc, what="reading", endpoint="http://rpc.example")
    assert type(error) is expected
    assert error.retryable == issubclass(expected, RetryableChainError)


def test_unknown_exceptions_are_not_swallowed() -> None:
    assert classify(KeyError("bug"), what="x", endpoint="e") is None
    with pytest.raises(KeyError):
        call_with_retry(lambda: {}["bug"], what="x", endpoint="e")


def test_retry_backs_off_exponentially_then_gives_up() -> None:
    delays: list[float] = []
    calls = []

    def failing() -> None:
        calls.append(1)
        raise requests.ConnectionError("refused")

    policy = RetryPolicy(attempts=4, initial_delay=0.5, multiplier=2, max_delay=1.5, jitter=0)
    with pytest.raises(RpcUnavailable, match="gave up after 4 attempts"):
        call_with_retry(
            failing, what="reading", endpoint="http://x", policy=policy, sleep=delays.append
        )
    assert len(calls) == 4 and delays == [0.5, 1.0, 1.5]


def test_permanent_errors_are_not_retried() -> None:
    calls = []

    def refused() -> None:
        calls.append(1)
        raise _rpc_error("insufficient funds")

    with pytest.raises(InsufficientFunds):
        call_with_retry(refused, what="sending", endpoint="e", sleep=lambda _: None)
    assert len(calls) == 1


def test_eth_units() -> None:
    assert (
        format_eth(10**18) == "1 ETH"
        and format_eth(5 * 10**17) == "0.5 ETH"
        and format_eth(0) == "0 ETH"
    )
    assert format_eth(1) == "0.000000000000000001 ETH"
    assert (
        parse_eth("1.5") == 15 * 10**17
        and parse_eth("2 ETH") == 2 * 10**18
        and parse_eth("7 wei") == 7
    )
    for bad in ("abc", "-1", "1e-30"):
        with pytest.raises(ValueError):
            parse_eth(bad)
    assert format_duration(3725) == "1 h 2 min 5 s" and format_duration(0) == "0 s"


@given(st.integers(min_value=0, max_value=2**96))
def test_eth_format_round_trips(wei: int) -> None:
    assert parse_eth(format_eth(wei)) == wei

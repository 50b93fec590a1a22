"""A stand-in coordinator that emits the coordinator's events with any values, for the indexer.

``contracts/test/utils/EventEmitter.sol`` emits whatever log it is given and answers any call with
bytes set beforehand. This module encodes the coordinator's events (topics and data) and the answers
to the views the indexer calls (graceRounds, commitRounds, revealRounds, rulesAt, weightAt) from
the committed ABI, so the indexer reads real logs through eth_getLogs on a real Anvil, carrying
values the coordinator itself never emits (2^63 - 1 as a revealed reward sum, 2^64 - 1 as a round).

Fixtures: ``emitter_artifact`` (session; forge-builds the contract when its artifact is missing or
older than the source) and ``emitter`` (per test: deployed on the session Anvil inside an EVM
snapshot, reverted afterwards, with the views answered like the test deployment's).
"""

from __future__ import annotations

import json
import subprocess
from collections.abc import Iterator, Mapping, Sequence
from functools import cache
from pathlib import Path
from typing import Any

import pytest
from eth_abi import encode
from eth_account.signers.local import LocalAccount
from eth_utils import event_abi_to_log_topic, function_abi_to_4byte_selector
from web3 import Web3

from node.chain.abi import REPO_ROOT, abi_sha256, abi_type_string, load_abi, snake_case
from node.chain.deployment import Deployment
from node.local.foundry import FoundryMissing, foundry_binary
from tests.chain_fixtures import TEST_CONFIG

SOURCE = REPO_ROOT / "contracts" / "test" / "utils" / "EventEmitter.sol"
ARTIFACT = REPO_ROOT / "contracts" / "out" / "EventEmitter.sol" / "EventEmitter.json"

U16, U32, U64, U96, U256 = (2**bits - 1 for bits in (16, 32, 64, 96, 256))
I64_MAX, I64_MIN = 2**63 - 1, -(2**63)


@cache
def _abi_items() -> dict[tuple[str, str], dict[str, Any]]:
    return {(item["type"], item.get("name", "")): item for item in load_abi()}


def _value(item: Mapping[str, Any], values: Mapping[str, Any]) -> Any:
    """The ABI value of one input from ``values`` by its Solidity name (a tuple from a dict of
    its components' names)."""
    value = values[item["name"]]
    if item["type"] == "tuple":
        return tuple(_value(component, value) for component in item["components"])
    return value


def encode_event(name: str, values: Mapping[str, Any]) -> tuple[list[bytes], bytes]:
    """Topics and data of the coordinator's event ``name`` with ``values`` by Solidity name."""
    item = _abi_items()[("event", name)]
    unknown = set(values) - {i["name"] for i in item["inputs"]}
    if unknown:
        raise KeyError(f"{name} has no inputs {sorted(unknown)}")
    topics = [bytes(event_abi_to_log_topic(item))]
    types, data = [], []
    for entry in item["inputs"]:
        if entry["indexed"]:
            topics.append(encode([abi_type_string(entry)], [_value(entry, values)]))
        else:
            types.append(abi_type_string(entry))
            data.append(_value(entry, values))
    return topics, encode(types, data)


def encode_answer(
    function: str, result: Any, args: Sequence[Any] | None = None
) -> tuple[bytes, bytes]:
    """(query, answer) for the view ``function``: the query is its selector (every call) or, with
    ``args``, the exact calldata; the answer its ABI-encoded output (a dict for a tuple)."""
    item = _abi_items()[("function", function)]
    query = bytes(function_abi_to_4byte_selector(item))
    if args is not None:
        query += encode([abi_type_string(i) for i in item["inputs"]], list(args))
    (output,) = item["outputs"]
    return query, encode([abi_type_string(output)], [_value(output, {output["name"]: result})])


class Emitter:
    """One deployed EventEmitter and the deployment record that points the indexer at it."""

    def __init__(self, w3: Web3, sender: str, address: str, receipt: Any) -> None:
        self.w3 = w3
        self.sender = sender
        self.address = address
        artifact = json.loads(ARTIFACT.read_text(encoding="utf-8"))
        self.contract = w3.eth.contract(address=address, abi=artifact["abi"])
        block = w3.eth.get_block(receipt["blockNumber"])
        self.deployment = Deployment(
            chain_id=w3.eth.chain_id,
            coordinator=address,
            deployment_block=receipt["blockNumber"],
            block_hash="0x" + bytes(receipt["blockHash"]).hex(),
            tx_hash="0x" + bytes(receipt["transactionHash"]).hex(),
            deployer=sender,
            abi_sha256=abi_sha256(),
            genesis=int(block["timestamp"]),
            round_duration=TEST_CONFIG.round_duration,
            genesis_seed="0x" + "00" * 32,
            seed_input="0x" + TEST_CONFIG.seed_input.hex(),
            phases=TEST_CONFIG.phases(),
            min_stake=TEST_CONFIG.min_stake,
            rules=TEST_CONFIG.rules(),
        )

    def _send(self, call: Any) -> None:
        tx = call.transact({"from": self.sender, "gas": 25_000_000})
        receipt = self.w3.eth.wait_for_transaction_receipt(tx, timeout=30)
        assert receipt["status"] == 1, receipt

    def emit(self, name: str, **values: Any) -> None:
        """Emits the coordinator's event ``name`` (one transaction, one block)."""
        self.emit_raw(*encode_event(name, values))

    def emit_raw(self, topics: Sequence[bytes], data: bytes) -> None:
        self._send(self.contract.functions.emitLog(list(topics), data))

    def emit_many(self, events: Sequence[tuple[str, Mapping[str, Any]]]) -> None:
        """Emits several events in one transaction (one block), in this order."""
        encoded = [encode_event(name, values) for name, values in events]
        topics, data = [t for t, _ in encoded], [d for _, d in encoded]
        self._send(self.contract.functions.emitLogs(topics, data))

    def answer(self, function: str, result: Any, args: Sequence[Any] | None = None) -> None:
        """Answers the view ``function`` with ``result`` (for ``args`` only, when given)."""
        self._send(self.contract.functions.setAnswer(*encode_answer(function, result, args)))

    def save_deployment(self, path: Path) -> Path:
        return self.deployment.save(path)


def rules_answer(**changes: int) -> dict[str, int]:
    """The test deployment's rules by their ABI names (as rulesAt answers), with ``changes``."""
    rules = TEST_CONFIG.rules()
    item = _abi_items()[("function", "rulesAt")]["outputs"][0]
    names = {c["name"]: getattr(rules, snake_case(c["name"])) for c in item["components"]}
    return {**names, **changes}


@pytest.fixture(scope="session")
def emitter_artifact() -> Path:
    """The EventEmitter artifact, forge-built (that file only) when missing or stale."""
    if ARTIFACT.is_file() and ARTIFACT.stat().st_mtime >= SOURCE.stat().st_mtime:
        return ARTIFACT
    try:
        forge = foundry_binary("forge")
    except FoundryMissing as exc:
        pytest.fail(f"cannot build {SOURCE.name}: {exc}", pytrace=False)
    result = subprocess.run(
        [str(forge), "build", str(SOURCE.relative_to(REPO_ROOT))],
        cwd=REPO_ROOT,
        capture_output=True,
        text=True,
        timeout=600,
    )
    if result.returncode != 0 or not ARTIFACT.is_file():
        pytest.fail(f"forge build failed:\n{result.stdout}\n{result.stderr}", pytrace=False)
    return ARTIFACT


@pytest.fixture
def emitter(
    w3: Web3, dev_accounts: list[LocalAccount], emitter_artifact: Path
) -> Iterator[Emitter]:
    """A fresh EventEmitter answering the views like the test deployment (J = 1 + 2 + 2, its
    rules, weightAt 1 ETH); the chain is reverted after the test."""
    snapshot = w3.provider.make_request("evm_snapshot", [])["result"]  # type: ignore[attr-defined]
    try:
        artifact = json.loads(emitter_artifact.read_text(encoding="utf-8"))
        sender = dev_accounts[0].address
        factory = w3.eth.contract(abi=artifact["abi"], bytecode=artifact["bytecode"]["object"])
        tx = factory.constructor().transact({"from": sender})
        receipt = w3.eth.wait_for_transaction_receipt(tx, timeout=30)
        made = Emitter(w3, sender, receipt["contractAddress"], receipt)
        phases = TEST_CONFIG.phases()
        made.answer("graceRounds", phases.grace_rounds)
        made.answer("commitRounds", phases.commit_rounds)
        made.answer("revealRounds", phases.reveal_rounds)
        made.answer("rulesAt", rules_answer())
        made.answer("weightAt", 10**18)
        yield made
    finally:
        w3.provider.make_request("evm_revert", [snapshot])  # type: ignore[attr-defined]

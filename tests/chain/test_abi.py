"""The committed ABI matches the contract; the Python layer covers every function, error, event."""

from __future__ import annotations

import inspect
import json
import subprocess
import sys
from pathlib import Path

from node.chain import abi as abi_module
from node.chain import revert_decoding  # noqa: F401 - registers the revert classes
from node.chain.abi import COMMITTED_ABI_PATH, combined_abi, load_abi, render_abi, snake_case
from node.chain.client import CoordinatorClient
from node.chain.errors import ContractRevert
from node.chain.events import EVENT_TYPES, ChainEvent

ABI = load_abi()


def _of(kind: str) -> list[dict]:
    return [item for item in ABI if item["type"] == kind]


def test_committed_abi_equals_fresh_forge_build(contract_artifact: Path) -> None:
    fresh = render_abi(combined_abi(contract_artifact))
    assert COMMITTED_ABI_PATH.read_text() == fresh, (
        "node/chain/abi/SwarmCoordinator.json is stale: run `python -m node.chain.abi --write` and "
        "commit it"
    )


def test_check_command_exit_codes(contract_artifact: Path, tmp_path: Path) -> None:
    run = [sys.executable, "-m", "node.chain.abi", "--check", "--artifact"]
    assert subprocess.run([*run, str(contract_artifact)], capture_output=True).returncode == 0
    artifact = json.loads(contract_artifact.read_text())
    artifact["abi"] = artifact["abi"][:-1]
    changed = tmp_path / "changed.json"
    changed.write_text(json.dumps(artifact))
    stale = subprocess.run([*run, str(changed)], capture_output=True, text=True)
    assert stale.returncode == 1 and "--write" in stale.stderr
    missing = subprocess.run([*run, str(tmp_path / "none.json")], capture_output=True, text=True)
    assert missing.returncode == 2 and "scripts/bootstrap" in missing.stderr


def test_abi_hash_ignores_formatting() -> None:
    assert abi_module.abi_sha256(json.loads(json.dumps(ABI, indent=7))) == abi_module.abi_sha256()


def test_every_custom_error_has_a_python_class_with_its_arguments() -> None:
    for error in _of("error"):
        cls = ContractRevert.registry.get(error["name"])
        assert cls is not None, f"no Python class for {error['name']}"
        assert cls.__name__ == error["name"]
        assert cls.fields == tuple(snake_case(i["name"]) for i in error["inputs"]), error["name"]
    assert len(_of("error")) == len(ContractRevert.registry)


def test_every_function_has_a_client_method_with_matching_parameters() -> None:
    for function in _of("function"):
        name = snake_case(function["name"])
        method = getattr(CoordinatorClient, name, None)
        assert callable(method), f"CoordinatorClient lacks {name} (for {function['name']})"
        positional = [
            p
            for p in inspect.signature(method).parameters.values()
            if p.kind is p.POSITIONAL_OR_KEYWORD and p.name != "self"
        ]
        expected = len(function["inputs"]) + (function["stateMutability"] == "payable")
        assert len(positional) == expected, (
            f"{name} takes {len(positional)} arguments, ABI needs {expected}"
        )


def test_every_event_has_a_record_with_its_fields() -> None:
    base = set(ChainEvent.model_fields)
    for event in _of("event"):
        cls = EVENT_TYPES[event["name"]]
        assert set(cls.model_fields) - base == {snake_case(i["name"]) for i in event["inputs"]}


def test_snake_case() -> None:
    assert snake_case("publishRolloutsFor") == "publish_rollouts_for"
    assert snake_case("PUBLISH_TYPEHASH") == "publish_typehash"
    assert snake_case("settleableFromRound") == "settleable_from_round"


def test_the_chain_layer_never_imports_the_learning_stack() -> None:
    code = (
        "import sys, pkgutil, importlib, node.chain as c\n"
        "for m in pkgutil.iter_modules(c.__path__):\n"
        "    importlib.import_module(f'node.chain.{m.name}')\n"
        "heavy = {'torch', 'transformers', 'peft'}\n"
        "bad = sorted(n for n in sys.modules if n.split('.')[0] in heavy)\n"
        "assert not bad, bad\n"
    )
    result = subprocess.run([sys.executable, "-c", code], capture_output=True, text=True)
    assert result.returncode == 0, result.stderr

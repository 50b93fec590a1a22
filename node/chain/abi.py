"""The coordinator's ABI as committed in the package, and how to refresh it from the forge build.

The node, the indexer and the tests all decode calls, events and errors with
``node/chain/abi/SwarmCoordinator.json``: a plain JSON list (the ``abi`` field of forge's artifact),
committed so that a node needs no Solidity toolchain. It holds the functions of the coordinator's
EvidenceExtension too (``postEvidence``, ``recomputes``): the coordinator's fallback runs them at its
own address, so to a caller they are the coordinator's. Regenerate it after changing the contracts:

    forge build && python -m node.chain.abi --write     # rewrite the committed ABI
    python -m node.chain.abi --check                     # exit 1 when it is stale

``abi_sha256`` hashes the ABI's canonical JSON (sorted keys, no whitespace), so a deployment
record can name the ABI it was made with whatever the file's formatting.
"""

from __future__ import annotations

import hashlib
import json
import re
import sys
from functools import lru_cache
from pathlib import Path
from typing import Any

from node.chain.errors import ArtifactMissing

REPO_ROOT = Path(__file__).resolve().parents[2]
COMMITTED_ABI_PATH = Path(__file__).resolve().parent / "abi" / "SwarmCoordinator.json"
FORGE_ARTIFACT_PATH = (
    REPO_ROOT / "contracts" / "out" / "SwarmCoordinator.sol" / "SwarmCoordinator.json"
)
EXTENSION_ARTIFACT_PATH = (
    REPO_ROOT / "contracts" / "out" / "EvidenceExtension.sol" / "EvidenceExtension.json"
)
CONTRACT_SOURCES = REPO_ROOT / "contracts" / "src"

Abi = list[dict[str, Any]]


@lru_cache(maxsize=1)
def _load_committed() -> str:
    return COMMITTED_ABI_PATH.read_text(encoding="utf-8")


def load_abi() -> Abi:
    """Returns the committed coordinator ABI (a fresh copy: callers may not mutate the cache)."""
    return json.loads(_load_committed())


def abi_sha256(abi: Abi | None = None) -> str:
    """Hex SHA-256 (``0x``-prefixed) of the ABI's canonical JSON; the committed ABI by default."""
    canonical = json.dumps(
        load_abi() if abi is None else abi, sort_keys=True, separators=(",", ":")
    )
    return "0x" + hashlib.sha256(canonical.encode("utf-8")).hexdigest()


def snake_case(name: str) -> str:
    """Solidity name -> Python name: ``publishRolloutsFor`` -> ``publish_rollouts_for``,
    ``PUBLISH_TYPEHASH`` -> ``publish_typehash``, ``minStake`` -> ``min_stake``."""
    if name.isupper():
        return name.lower()
    return re.sub(r"(?<=[a-z0-9])([A-Z])", r"_\1", name).lower()


def abi_type_string(item: dict[str, Any]) -> str:
    """ABI type string of one input or output, tuples expanded (``(uint64,address)[]``)."""
    kind = str(item["type"])
    if kind.startswith("tuple"):
        inner = ",".join(abi_type_string(c) for c in item["components"])
        return f"({inner}){kind[len('tuple') :]}"
    return kind


def render_abi(abi: Abi) -> str:
    """The committed file's formatting: forge's order, two-space indent, trailing newline."""
    return json.dumps(abi, indent=2) + "\n"


def load_artifact(path: Path | None = None) -> dict[str, Any]:
    """Reads forge's build artifact of SwarmCoordinator (``abi`` and ``bytecode.object``)."""
    path = path or FORGE_ARTIFACT_PATH
    if not path.is_file():
        raise ArtifactMissing(
            f"contract build artifact not found at {path}: run scripts/bootstrap "
            "(or `forge build`) to compile the contracts"
        )
    try:
        artifact = json.loads(path.read_text(encoding="utf-8"))
        artifact["abi"], artifact["bytecode"]["object"]  # shape check
    except (ValueError, KeyError, TypeError) as exc:
        raise ArtifactMissing(
            f"{path} is not a forge artifact ({exc}): rebuild with `forge build`"
        ) from exc
    return artifact


def combined_abi(artifact_path: Path | None = None, extension_path: Path | None = None) -> Abi:
    """The coordinator's ABI followed by its extension's functions (its events and errors are
    declared in ISwarmCoordinator, so the coordinator's ABI has them already). The extension's
    artifact defaults to the one built beside the coordinator's."""
    abi = load_artifact(artifact_path)["abi"]
    if extension_path is None and artifact_path is not None:
        beside = artifact_path.parent.parent / EXTENSION_ARTIFACT_PATH.parent.name
        extension_path = beside / EXTENSION_ARTIFACT_PATH.name
        if not extension_path.is_file():
            extension_path = None
    extension = load_artifact(extension_path or EXTENSION_ARTIFACT_PATH)["abi"]
    return abi + [item for item in extension if item["type"] == "function"]


def artifact_bytecode(artifact: dict[str, Any]) -> bytes:
    """The creation bytecode of an artifact, as bytes."""
    code = artifact["bytecode"]["object"]
    return bytes.fromhex(code.removeprefix("0x"))


def artifact_is_stale(path: Path | None = None) -> bool:
    """True when the artifact is missing or older than any contract source."""
    path = path or FORGE_ARTIFACT_PATH
    if not path.is_file():
        return True
    built = path.stat().st_mtime
    return any(src.stat().st_mtime > built for src in CONTRACT_SOURCES.rglob("*.sol"))


def committed_abi_is_current(
    artifact_path: Path | None = None, extension_path: Path | None = None
) -> bool:
    """True when the committed ABI equals the artifacts' combined ABI, byte for byte as rendered."""
    fresh = render_abi(combined_abi(artifact_path, extension_path))
    return COMMITTED_ABI_PATH.is_file() and COMMITTED_ABI_PATH.read_text(encoding="utf-8") == fresh


def write_committed_abi(
    artifact_path: Path | None = None, extension_path: Path | None = None
) -> Path:
    """Rewrites the committed ABI from the forge artifacts; returns its path."""
    fresh = render_abi(combined_abi(artifact_path, extension_path))
    COMMITTED_ABI_PATH.parent.mkdir(parents=True, exist_ok=True)
    COMMITTED_ABI_PATH.write_text(fresh, encoding="utf-8")
    _load_committed.cache_clear()
    return COMMITTED_ABI_PATH


def main(argv: list[str] | None = None) -> int:
    """``python -m node.chain.abi --write | --check [--artifact PATH]``."""
    import argparse

    parser = argparse.ArgumentParser(
        prog="python -m node.chain.abi", description=__doc__.split("\n")[0]
    )
    mode = parser.add_mutually_exclusive_group(required=True)
    mode.add_argument(
        "--write", action="store_true", help="rewrite the committed ABI from contracts/out"
    )
    mode.add_argument("--check", action="store_true", help="exit 1 when the committed ABI is stale")
    parser.add_argument(
        "--artifact", type=Path, default=None, help="forge artifact (default: contracts/out)"
    )
    parser.add_argument(
        "--extension",
        type=Path,
        default=None,
        help="the EvidenceExtension's forge artifact (default: contracts/out)",
    )
    args = parser.parse_args(argv)
    try:
        if args.write:
            print(f"wrote {write_committed_abi(args.artifact, args.extension)}")
            return 0
        if committed_abi_is_current(args.artifact, args.extension):
            print(f"{COMMITTED_ABI_PATH} is up to date")
            return 0
    except ArtifactMissing as exc:
        print(f"error: {exc}", file=sys.stderr)
        return 2
    print(f"{COMMITTED_ABI_PATH} is stale: run `python -m node.chain.abi --write`", file=sys.stderr)
    return 1


if __name__ == "__main__":
    sys.exit(main())

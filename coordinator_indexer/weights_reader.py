"""Many peers' ``weightAt`` in one ``eth_call``: the creation code of ``WeightsReader``.

``contracts/src/WeightsReader.sol`` is never deployed. Its constructor reads ``weightAt(peer,
round)`` of every peer it is given and returns the list as its return data, so an ``eth_call``
with no ``to`` and its creation code (plus the constructor's arguments) answers for hundreds of
peers at once, at the block the call names. The creation code is committed beside this module
(``weights_reader.json``) so that the indexer needs no Solidity toolchain; a test checks it
against a fresh forge build:

    forge build && python -m coordinator_indexer.weights_reader --write    # after a change
"""

from __future__ import annotations

import json
import sys
from functools import cache
from pathlib import Path

from eth_abi import decode

from node.chain.abi import REPO_ROOT, artifact_bytecode, load_artifact
from node.chain.committee import address_word

COMMITTED_PATH = Path(__file__).resolve().with_name("weights_reader.json")
ARTIFACT_PATH = REPO_ROOT / "contracts" / "out" / "WeightsReader.sol" / "WeightsReader.json"

#: Peers per call: ~10k gas each (a call and the peer's record, cold), so 500 stay far below the
#: gas an RPC grants an eth_call (geth's default cap is 50M, Anvil's its block gas limit).
PEERS_PER_CALL = 500


@cache
def creation_code() -> bytes:
    """The committed creation code of ``WeightsReader``."""
    return bytes.fromhex(json.loads(COMMITTED_PATH.read_text())["bytecode"].removeprefix("0x"))


def call_data(coordinator: str, round_: int, peers: list[str]) -> str:
    """The ``data`` of the ``eth_call`` that reads ``weightAt(peer, round_)`` of ``peers``: the
    constructor's ``(address, uint64, address[])`` encoded word by word (eth_abi's encoder cost
    a third of a seal's reads); ValueError for an address that is not 20 bytes of hex, or a
    round outside uint64."""
    if not 0 <= round_ < 2**64:
        raise ValueError(f"round {round_} is not a uint64")
    head = address_word(coordinator) + round_.to_bytes(32, "big") + (3 * 32).to_bytes(32, "big")
    tail = len(peers).to_bytes(32, "big") + b"".join(map(address_word, peers))
    return "0x" + (creation_code() + head + tail).hex()


def decode_weights(result: str, count: int) -> list[int]:
    """The weights in the call's return data; ``ValueError`` unless it holds ``count`` of them."""
    (weights,) = decode(["uint256[]"], bytes.fromhex(result.removeprefix("0x")))
    if len(weights) != count:
        raise ValueError(f"{len(weights)} weights for {count} peers")
    return [int(w) for w in weights]


def rendered(artifact: Path = ARTIFACT_PATH) -> str:
    """The committed file's text for the forge artifact at ``artifact``."""
    code = artifact_bytecode(load_artifact(artifact))
    source = "contracts/src/WeightsReader.sol"
    return json.dumps({"source": source, "bytecode": "0x" + code.hex()}, indent=2) + "\n"


def main(argv: list[str] | None = None) -> int:
    """``python -m coordinator_indexer.weights_reader --write | --check``."""
    args = sys.argv[1:] if argv is None else argv
    command = "python -m coordinator_indexer.weights_reader"
    if args not in (["--write"], ["--check"]):
        print(f"usage: {command} --write | --check", file=sys.stderr)
        return 2
    fresh = rendered()
    if args == ["--write"]:
        COMMITTED_PATH.write_text(fresh)
        print(f"wrote {COMMITTED_PATH}")
        return 0
    if COMMITTED_PATH.read_text() == fresh:
        print(f"{COMMITTED_PATH} is up to date")
        return 0
    print(f"{COMMITTED_PATH} is stale: run `{command} --write`", file=sys.stderr)
    return 1


if __name__ == "__main__":
    sys.exit(main())

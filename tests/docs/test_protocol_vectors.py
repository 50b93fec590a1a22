"""docs/PROTOCOL.md's test vectors agree with the code, and the repository's citations of the two
specification documents name sections that exist.

The vectors are read out of the document (fenced blocks marked ``vector:<name>``) and recomputed
from the project's code (tests/docs/protocol_vectors.py); a test fails when either side changes
alone. No torch: the protocol layer is torch-free, and one test checks that recomputing every
vector loads neither torch nor transformers.
"""

from __future__ import annotations

import re
import subprocess
import sys
from pathlib import Path
from typing import Any

import pytest
from eth_account import Account

from node.chain.eip712 import Domain, recover_struct_signer, typed_data_hash
from node.chain.events import RolloutsPublished
from node.policy.model import load_tokenizer
from node.policy.peer_ids import PeerIds
from node.rollouts import decode_batch, encode_batch
from node.rollouts.signing import SECP256K1_N
from node.sampling.verify import RoundContext, verify_batch
from node.storage.announced import AnnouncedEndpoints
from node.storage.endpoint import EndpointRejected, StoreEndpoint
from node.storage.endpoint_proof import EndpointDomain
from tests.docs.protocol_vectors import (
    COMPUTED,
    PAIRS,
    PROTOCOL_PATH,
    REPO_ROOT,
    compute_vectors,
    read_blocks,
    read_vectors,
)

DESIGN_PATH = REPO_ROOT / "docs" / "DESIGN.md"


@pytest.fixture(scope="module")
def documented() -> dict[str, Any]:
    return read_vectors(PROTOCOL_PATH.read_text(encoding="utf-8"))


@pytest.fixture(scope="module")
def computed(documented: dict[str, Any]) -> dict[str, Any]:
    return compute_vectors(documented)


def test_the_document_holds_every_vector_once() -> None:
    blocks = read_blocks(PROTOCOL_PATH.read_text(encoding="utf-8"))
    assert set(blocks) == {"inputs"} | set(COMPUTED) | set(PAIRS)
    assert blocks["batch-bytes"][0] == "text"
    assert all(
        language == "json" for name, (language, _) in blocks.items() if name != "batch-bytes"
    )


def test_a_repeated_vector_is_an_error() -> None:
    block = "```json vector:x\n{}\n```\n"
    with pytest.raises(ValueError, match="appears twice"):
        read_blocks(block + block)


@pytest.mark.parametrize("name", sorted(set(COMPUTED) | set(PAIRS)))
def test_vector_matches_the_code(name: str, documented: dict[str, Any], computed: Any) -> None:
    assert documented[name] == computed[name], (
        f"docs/PROTOCOL.md's vector:{name} differs from the code; if the protocol changed on "
        "purpose, print the new vectors with `python -m tests.docs.protocol_vectors`"
    )


def test_the_inputs_peer_is_the_private_key_s_address(documented: dict[str, Any]) -> None:
    inputs = documented["inputs"]
    assert Account.from_key(inputs["private_key"]).address == inputs["peer"]


def test_the_documented_batch_decodes_and_passes_every_check(documented: dict[str, Any]) -> None:
    inputs, summary = documented["inputs"], documented["batch"]
    data = documented["batch-bytes"].encode("utf-8")
    digest = bytes.fromhex(summary["digest"][2:])
    batch = decode_batch(data)
    assert encode_batch(batch) == data and len(data) == summary["bytes"]
    commitment = RolloutsPublished(
        block_number=1,
        block_hash="0x" + "11" * 32,
        tx_hash="0x" + "22" * 32,
        log_index=0,
        round=inputs["round"],
        peer=inputs["peer"],
        digest=digest,
        groups=summary["groups"],
        completions=summary["completions"],
        reward_sum=summary["reward_sum"],
        relayer=None,
    )
    context = RoundContext(
        Domain(
            inputs["chain_id"], inputs["coordinator"], bytes.fromhex(inputs["genesis_seed"][2:])
        ),
        inputs["round"],
        bytes.fromhex(documented["round-seed"]["round_seed"][2:]),
        tasks_per_round=summary["groups"],  # the vector's round has one task, G = 4
        group_size=summary["completions"] // summary["groups"],
        tokens=PeerIds(load_tokenizer()),  # the shipped tokenizer, whose digest the batch names
        bases=frozenset({inputs["batch"]["base"]}),
    )
    verdict = verify_batch(data, commitment, context)
    assert verdict.accepted, verdict.detail
    assert (verdict.checked, verdict.agreed) == (summary["completions"], summary["completions"])
    assert verdict.verified_reward_milli == summary["reward_sum"]


@pytest.mark.parametrize("kind", ["publish", "rollout_batch"])
def test_documented_signatures_are_the_peer_s_in_the_contract_s_form(
    kind: str, documented: dict[str, Any]
) -> None:
    inputs, typed = documented["inputs"], documented["eip712"]
    domain = Domain(
        inputs["chain_id"], inputs["coordinator"], bytes.fromhex(inputs["genesis_seed"][2:])
    )
    struct_hash = bytes.fromhex(typed[kind]["struct_hash"][2:])
    signature = bytes.fromhex(typed[kind]["signature"][2:])
    assert typed_data_hash(domain, struct_hash).hex() == typed[kind]["digest"][2:]
    assert recover_struct_signer(domain, struct_hash, signature) == inputs["peer"]
    # what publishRolloutsFor accepts: 65 bytes r || s || v, v in {27, 28}, low s
    assert len(signature) == 65 and signature[64] in (27, 28)
    assert int.from_bytes(signature[32:64], "big") <= SECP256K1_N // 2


def test_the_documented_announcement_counts_for_the_inputs_peer_only(
    documented: dict[str, Any],
) -> None:
    inputs, vector = documented["inputs"], documented["endpoint"]
    record = AnnouncedEndpoints(
        EndpointDomain(inputs["chain_id"], inputs["coordinator"]), allow_private=False
    )
    data = vector["announcement"].encode("utf-8")
    with pytest.raises(EndpointRejected, match="signature is not the peer id's key"):
        record.apply(inputs["relayer"], data)  # another address copying it
    expected = StoreEndpoint(vector["peer_id"], tuple(inputs["endpoint"]["addrs"]))
    assert record.apply(inputs["peer"], data) == expected
    assert vector["signed"] == "libp2p-key signed message:" + vector["message"]


def test_recomputing_the_vectors_loads_no_torch() -> None:
    code = (
        "import sys\n"
        "from tests.docs import protocol_vectors as v\n"
        "v.compute_vectors(v.read_vectors(v.PROTOCOL_PATH.read_text(encoding='utf-8')))\n"
        "bad = sorted(m for m in sys.modules if m.split('.')[0] in ('torch', 'transformers', "
        "'peft') or m.startswith('node.policy'))\n"
        "assert not bad, bad\n"
    )
    result = subprocess.run(
        [sys.executable, "-c", code], capture_output=True, text=True, cwd=REPO_ROOT
    )
    assert result.returncode == 0, result.stderr


# ------------------------------------------------------------------------------ citations

# A citation is the document's path followed by a quoted section name, as in: docs/X.md, "Name".
_CITATION = re.compile(r"docs/(PROTOCOL|DESIGN)\.md`?,? \"([^\"\n]+)\"")
_SCANNED = ["README.md", "contracts", "node", "coordinator_indexer", "scripts", "tests", "docs"]
_SKIPPED_PARTS = {"__pycache__", "out", "cache", "node_modules", "artifacts"}


def _headings(path: Path) -> set[str]:
    found = set()
    for line in path.read_text(encoding="utf-8").splitlines():
        match = re.match(r"#{1,6} (.+)", line)
        if match:
            found.add(match.group(1).strip())
    return found


def _repository_texts() -> list[tuple[Path, str]]:
    files = []
    for top in _SCANNED:
        root = REPO_ROOT / top
        for path in [root] if root.is_file() else sorted(root.rglob("*")):
            if not path.is_file() or _SKIPPED_PARTS & set(path.relative_to(REPO_ROOT).parts):
                continue
            try:
                files.append((path, path.read_text(encoding="utf-8")))
            except UnicodeDecodeError:  # images and other binaries
                continue
    return files


def test_citations_name_sections_that_exist() -> None:
    headings = {"PROTOCOL": _headings(PROTOCOL_PATH), "DESIGN": _headings(DESIGN_PATH)}
    cited = broken = 0
    problems = []
    for path, text in _repository_texts():
        for match in _CITATION.finditer(text):
            cited += 1
            document, section = match.groups()
            if section not in headings[document]:
                broken += 1
                problems.append(f"{path.relative_to(REPO_ROOT)}: docs/{document}.md {section!r}")
    assert cited > 10, "the citation pattern no longer finds the repository's citations"
    assert not problems, f"{broken} citations name no section:\n" + "\n".join(problems)


def test_nothing_refers_to_documents_outside_the_repository() -> None:
    outside = "../" + "shared"  # spelled in two parts so this file does not match itself
    found = [
        str(path.relative_to(REPO_ROOT)) for path, text in _repository_texts() if outside in text
    ]
    assert not found

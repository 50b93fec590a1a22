"""The test vectors of docs/PROTOCOL.md: reading them out of the document, recomputing them.

The document marks each vector with a fence info string ``<language> vector:<name>``; the block's
content is the vector (JSON, or for ``batch-bytes`` the exact batch bytes as UTF-8 text).
``compute_vectors(inputs)`` recomputes every vector from the project's code and the document's
``inputs`` vector; the tests compare the two. Nothing here imports torch.

After an intentional protocol change, print the recomputed vectors and paste them into the
document::

    .venv/bin/python -m tests.docs.protocol_vectors
"""

from __future__ import annotations

import hashlib
import json
import math
import struct
import re
from collections.abc import Callable
from pathlib import Path
from typing import Any

from eth_account import Account
from eth_utils import abi_to_signature, keccak

from node.chain import committee, eip712
from node.chain.abi import abi_sha256, load_abi
from node.chain.models import VerdictItem, weighted_median_milli
from node.chain.rounds import round_seed
from node.learning_data import GeneratedCompletion
from node.provenance.seeds import SAMPLER_ID, completion_seed, uniforms
from node.rollouts import canonical_json, limits
from node.rollouts.assemble import EncodedBatch, assemble_batch
from node.rollouts.codec import ZSTD_LEVEL, ZSTD_MAGIC
from node.rollouts.reasons import RejectReason
from node.rollouts.schema import LoraShape, ModelInfo
from node.rollouts.signing import body_hash
from node.sampling.verdicts import to_milli
from node.storage.cid import cid_from_digest
from node.storage.endpoint_proof import (
    ED25519,
    SIGNED_PREFIX,
    EndpointDomain,
    encode_signature,
)
from node.tasks import (
    DEFAULT_PRESET_NAME,
    PRESETS,
    derive_tasks,
    draw_entry,
    generator_id,
    score_completion,
)
from node.tasks.derivation import DRAW_DOMAIN
from tests.storage.libp2p_keys import Libp2pKey

REPO_ROOT = Path(__file__).resolve().parents[2]
PROTOCOL_PATH = REPO_ROOT / "docs" / "PROTOCOL.md"

_FENCE = re.compile(r"^```(\w+) vector:([a-z0-9-]+)\n(.*?)\n```$", re.MULTILINE | re.DOTALL)

Vector = Any
Inputs = dict[str, Any]


# ------------------------------------------------------------------------------ reading the doc


def read_blocks(text: str) -> dict[str, tuple[str, str]]:
    """``{name: (language, content)}`` of every ``vector:`` fenced block; ValueError on a repeat."""
    blocks: dict[str, tuple[str, str]] = {}
    for match in _FENCE.finditer(text):
        language, name, content = match.groups()
        if name in blocks:
            raise ValueError(f"vector {name!r} appears twice in docs/PROTOCOL.md")
        blocks[name] = (language, content)
    return blocks


def read_vectors(text: str) -> dict[str, Vector]:
    """The document's vectors: JSON blocks parsed, other blocks as their text."""
    return {
        name: json.loads(content) if language == "json" else content
        for name, (language, content) in read_blocks(text).items()
    }


# ------------------------------------------------------------------------------ recomputing


def _hex(value: bytes) -> str:
    return "0x" + value.hex()


def abi_vector(inputs: Inputs) -> Vector:
    """Selectors of every function and error, topic0 of every event, of the committed ABI, and
    the ABI's hash (deployment files name it)."""
    found: dict[str, dict[str, str]] = {"functions": {}, "events": {}, "errors": {}}
    for item in load_abi():
        kind = {"function": "functions", "event": "events", "error": "errors"}.get(item["type"])
        if kind is None:
            continue
        signature = abi_to_signature(item)
        digest = keccak(text=signature)
        found[kind][signature] = _hex(digest if kind == "events" else digest[:4])
    vector: dict[str, Any] = {"abi_sha256": abi_sha256()}
    vector.update({kind: dict(sorted(entries.items())) for kind, entries in found.items()})
    return vector


def limits_vector(inputs: Inputs) -> Vector:
    return {
        "schema": limits.SCHEMA,
        "max_groups": limits.MAX_GROUPS,
        "max_completions_per_group": limits.MAX_COMPLETIONS_PER_GROUP,
        "max_completion_chars": limits.MAX_COMPLETION_CHARS,
        "max_batch_bytes": limits.MAX_BATCH_BYTES,
        "max_dataset_chars": limits.MAX_DATASET_CHARS,
        "max_question_chars": limits.MAX_QUESTION_CHARS,
        "max_answer_chars": limits.MAX_ANSWER_CHARS,
        "max_model_name_chars": limits.MAX_MODEL_NAME_CHARS,
        "max_preset_chars": limits.MAX_PRESET_CHARS,
        "max_generator_chars": limits.MAX_GENERATOR_CHARS,
        "max_task_index": limits.MAX_TASK_INDEX,
        "max_completion_tokens": limits.MAX_COMPLETION_TOKENS,
        "max_token_id": limits.MAX_TOKEN_ID,
        "max_uint64": limits.MAX_UINT64,
        "max_json_depth": limits.MAX_JSON_DEPTH,
        "max_int_digits": limits.MAX_INT_DIGITS,
        "zstd_magic": _hex(ZSTD_MAGIC),
        "zstd_level": ZSTD_LEVEL,
    }


def presets_vector(inputs: Inputs) -> Vector:
    return {
        "generator": generator_id(),
        "default": DEFAULT_PRESET_NAME,
        "presets": {
            name: {
                "scoring": preset.scoring,
                "tasks_per_round": preset.tasks_per_round,
                "max_completion_tokens": preset.max_completion_tokens,
                "entries": [
                    {"dataset": e.dataset, "weight": e.weight, "config": e.config}
                    for e in preset.entries
                ],
                "specialties": [list(weights) for weights in preset.specialties],
            }
            for name, preset in PRESETS.items()
        },
    }


def _round_seed(inputs: Inputs) -> bytes:
    return round_seed(bytes.fromhex(inputs["genesis_seed"][2:]), inputs["round"])


def round_seed_vector(inputs: Inputs) -> Vector:
    return {
        "genesis_seed": inputs["genesis_seed"],
        "round": inputs["round"],
        "round_seed": _hex(_round_seed(inputs)),
    }


def _draw(seed: int) -> int:
    return int.from_bytes(keccak(DRAW_DOMAIN + seed.to_bytes(8, "big"))[:8], "big")


def _tasks_vector(inputs: Inputs, preset_name: str, *, full_text: bool) -> Vector:
    preset = PRESETS[preset_name]
    tasks = []
    for task in derive_tasks(_round_seed(inputs), inputs["peer"], preset):
        entry: dict[str, Any] = {
            "index": task.index,
            "seed": task.seed,
            "draw": _draw(task.seed),
            "entry": draw_entry(preset, task.seed),
            "dataset": task.dataset,
        }
        if full_text:
            entry.update(question=task.question, answer=task.answer)
        else:
            entry.update(
                question_sha256=_hex(hashlib.sha256(task.question.encode("utf-8")).digest()),
                answer=task.answer,
            )
        tasks.append(entry)
    return {
        "preset": preset_name,
        "round_seed": _hex(_round_seed(inputs)),
        "peer": inputs["peer"],
        "tasks": tasks,
    }


def tasks_smol_easy_vector(inputs: Inputs) -> Vector:
    return _tasks_vector(inputs, "smol-easy", full_text=True)


def tasks_paper_vector(inputs: Inputs) -> Vector:
    return _tasks_vector(inputs, "paper", full_text=False)


def _domain(inputs: Inputs) -> eip712.Domain:
    return eip712.Domain(
        inputs["chain_id"], inputs["coordinator"], bytes.fromhex(inputs["genesis_seed"][2:])
    )


def build_batch(inputs: Inputs) -> EncodedBatch:
    """The batch of the ``inputs`` vector's ``batch`` part, built the way a node builds its own."""
    spec = inputs["batch"]
    tasks = derive_tasks(_round_seed(inputs), inputs["peer"], PRESETS[spec["preset"]])
    return assemble_batch(
        account=Account.from_key(inputs["private_key"]),
        domain=_domain(inputs),
        round=inputs["round"],
        preset=spec["preset"],
        model=ModelInfo(
            name=spec["model"],
            base=spec["base"],
            adapter=spec["adapter"],
            lora=LoraShape(**spec["lora"]),
            sampler=SAMPLER_ID,
            tokenizer=spec["tokenizer"],
        ),
        tasks=[tasks[i] for i in spec["task_indexes"]],
        samples=[[_sample(c) for c in group] for group in spec["completions"]],
    )


def _sample(spec: dict[str, Any]) -> GeneratedCompletion:
    """A completion of the inputs: its text, sampled ids and their log-probs."""
    return GeneratedCompletion(
        spec["text"], tuple(spec["token_ids"]), spec["finish_reason"], tuple(spec["logprobs"])
    )


def batch_bytes_vector(inputs: Inputs) -> Vector:
    return build_batch(inputs).data.decode("utf-8")


def batch_vector(inputs: Inputs) -> Vector:
    encoded = build_batch(inputs)
    body = encoded.batch.body
    return {
        "rewards": [[c.reward for c in group.completions] for group in body.groups],
        "bytes": len(encoded.data),
        "body_hash": _hex(body_hash(body)),
        "digest": _hex(encoded.digest),
        "cid": cid_from_digest(encoded.digest),
        "groups": encoded.groups,
        "completions": encoded.completions,
        "reward_sum": encoded.reward_sum_milli,
        "signature": encoded.batch.signature,
    }


def eip712_vector(inputs: Inputs) -> Vector:
    account = Account.from_key(inputs["private_key"])
    domain = _domain(inputs)
    encoded = build_batch(inputs)
    publish = {
        "peer": account.address,
        "round": inputs["round"],
        "digest": _hex(encoded.digest),
        "groups": encoded.groups,
        "completions": encoded.completions,
        "rewardSum": encoded.reward_sum_milli,
        "relayer": inputs["relayer"],
        "deadline": inputs["deadline"],
    }
    publish_hash = eip712.publish_struct_hash(
        account.address,
        inputs["round"],
        encoded.digest,
        encoded.groups,
        encoded.completions,
        encoded.reward_sum_milli,
        inputs["relayer"],
        inputs["deadline"],
    )
    body = body_hash(encoded.batch.body)
    batch_hash = eip712.rollout_batch_struct_hash(account.address, inputs["round"], body)
    return {
        "domain": {k: _hex(v) if isinstance(v, bytes) else v for k, v in domain.as_dict().items()},
        "domain_type": eip712.DOMAIN_TYPE,
        "domain_typehash": _hex(eip712.DOMAIN_TYPEHASH),
        "domain_separator": _hex(domain.separator),
        "publish": {
            "type": eip712.PUBLISH_TYPE,
            "typehash": _hex(eip712.PUBLISH_TYPEHASH),
            "message": publish,
            "struct_hash": _hex(publish_hash),
            "digest": _hex(eip712.typed_data_hash(domain, publish_hash)),
            "signature": _hex(eip712.sign_struct(account, domain, publish_hash)),
        },
        "rollout_batch": {
            "type": eip712.ROLLOUT_BATCH_TYPE,
            "typehash": _hex(eip712.ROLLOUT_BATCH_TYPEHASH),
            "message": {"peer": account.address, "round": inputs["round"], "bodyHash": _hex(body)},
            "struct_hash": _hex(batch_hash),
            "digest": _hex(eip712.typed_data_hash(domain, batch_hash)),
            "signature": _hex(eip712.sign_struct(account, domain, batch_hash)),
        },
    }


def committee_vector(inputs: Inputs) -> Vector:
    """Seats of the ``committee`` inputs' members on the subject's committee, and one ballot."""
    spec = inputs["committee"]
    beacon = bytes.fromhex(spec["beacon"][2:])
    seats = {
        address: committee.vote_weight(
            beacon, spec["total_weight"], spec["committee_size"], spec["subject"], address, weight
        )
        for address, weight in spec["members"]
    }
    items = [
        VerdictItem(subject=s, checked=c, agreed=a, verified_reward_sum=v)
        for s, c, a, v in spec["items"]
    ]
    salt = bytes.fromhex(spec["salt"][2:])
    return {
        "subject_point": hex(committee.subject_point(beacon, spec["subject"])),
        "attester_points": {
            address: hex(committee.attester_point(beacon, address))
            for address, _ in spec["members"]
        },
        "seat_draws": {
            address: hex(committee.seat_draw(beacon, spec["subject"], address))
            for address, _ in spec["members"]
        },
        "vote_weights": seats,
        "items_hash": _hex(committee.items_hash(items)),
        "commitment": _hex(
            committee.ballot_commitment(spec["attester"], inputs["round"], items, salt)
        ),
        "reveal_receipt": _hex(committee.reveal_receipt(items)),
    }


def endpoint_key(inputs: Inputs) -> Libp2pKey:
    """The Ed25519 libp2p key of the inputs' ``endpoint`` part (its RFC 8032 seed)."""
    return Libp2pKey(ED25519, bytes.fromhex(inputs["endpoint"]["key_seed"][2:]))


def endpoint_vector(inputs: Inputs) -> Vector:
    """The inputs' peer announcing the endpoint key's peer id at the inputs' addresses: the
    message its key signs, the signature and the announced bytes."""
    key = endpoint_key(inputs)
    domain = EndpointDomain(inputs["chain_id"], inputs["coordinator"])
    message = domain.message(inputs["peer"])
    return {
        "public_key": _hex(key.public_key),
        "peer_id": key.peer_id,
        "message": message.decode("ascii"),
        "signed": (SIGNED_PREFIX + message).decode("ascii"),
        "signature": encode_signature(key.sign(message)),
        "announcement": key.announcement(
            inputs["peer"], *inputs["endpoint"]["addrs"], domain=domain
        ).decode("utf-8"),
    }


# Tables of (input, output) pairs: the document chooses the inputs, the code gives the outputs.


def cid_pairs(pairs: list[list[Any]]) -> Vector:
    """``[text, {digest, cid}]``: SHA-256 of the text's UTF-8 bytes and its CIDv1."""
    found = []
    for text, _ in pairs:
        digest = hashlib.sha256(text.encode("utf-8")).digest()
        found.append([text, {"digest": _hex(digest), "cid": cid_from_digest(digest)}])
    return found


def canonical_json_pairs(pairs: list[list[Any]]) -> Vector:
    """``[value, canonical text]``."""
    return [[value, canonical_json(value).decode("utf-8")] for value, _ in pairs]


def milli_unit_pairs(pairs: list[list[Any]]) -> Vector:
    """``[reward, milli-units]``."""
    return [[reward, to_milli(reward)] for reward, _ in pairs]


def weighted_median_pairs(pairs: list[list[Any]]) -> Vector:
    """``[[[value, weight], ...], verified reward]``: the stake-weighted median."""
    return [[votes, weighted_median_milli([tuple(v) for v in votes])] for votes, _ in pairs]


def scoring_pairs(pairs: list[list[Any]], inputs: Inputs) -> Vector:
    """``[[text, finish_reason], [dataset, strict]]``: a completion of the inputs' task 0 scored
    under both rules (``smol-easy`` and ``smol-strict`` derive the same tasks)."""
    loose = derive_tasks(_round_seed(inputs), inputs["peer"], PRESETS["smol-easy"])[0]
    strict = derive_tasks(_round_seed(inputs), inputs["peer"], PRESETS["smol-strict"])[0]
    return [
        [[text, why], [score_completion(t, text, finish_reason=why) for t in (loose, strict)]]
        for (text, why), _ in pairs
    ]


SAMPLE_LOGITS = [1.5, -0.25, 3.0, 0.0, 2.0, -8.0]
"""The fp32 logits of ``sample-pick`` (exact in fp32)."""


def sample_seeds_vector(inputs: Inputs) -> Vector:
    """Seeds of the inputs' peer's completions 0 and 1 of task 0, and u_0..u_3 of the first."""
    seeds = [completion_seed(_round_seed(inputs), inputs["peer"], 0, g) for g in (0, 1)]
    return {
        "round_seed": _hex(_round_seed(inputs)),
        "peer": inputs["peer"],
        "task": 0,
        "seeds": [_hex(seed) for seed in seeds],
        "u": uniforms(seeds[0], 4),
    }


def spec_pick(logits: list[float], u: float) -> tuple[int, float]:
    """The pick and its margin, read off docs/PROTOCOL.md ("Seeded sampler") in plain Python."""
    top = max(logits)
    weights = [math.exp(z - top) for z in logits]
    cumulative, running = [], 0.0
    for weight in weights:
        running += weight
        cumulative.append(running)
    total = cumulative[-1]
    k = next((k for k, c in enumerate(cumulative) if c > u * total), None)
    if k is None:
        k = max(j for j, w in enumerate(weights) if w > 0)
    lower = (cumulative[k - 1] if k else 0.0) / total
    return k, min(u - lower, cumulative[k] / total - u)


def sample_pick_vector(inputs: Inputs) -> Vector:
    """``SAMPLE_LOGITS``' pick and margin for the ``sample-seeds`` uniforms, 0 and 0.9999."""
    seed = completion_seed(_round_seed(inputs), inputs["peer"], 0, 0)
    rows = []
    for u in [*uniforms(seed, 4), 0.0, 0.9999]:
        token, margin = spec_pick(SAMPLE_LOGITS, u)
        rows.append({"u": u, "token": token, "margin": margin})
    return {"logits": SAMPLE_LOGITS, "picks": rows}


ADAPTER_TENSORS = {
    "m.q_proj.lora_B.weight": ([2, 1], [0.5, -1.0]),
    "m.q_proj.lora_A.weight": ([1, 3], [0.25, 0.0, 2.0]),
}
"""The two tensors of the ``adapter`` vector: name -> (shape, float32 values, row-major)."""


def spec_adapter_bytes(tensors: dict[str, tuple[list[int], list[float]]]) -> bytes:
    """``swarm.adapter/1`` bytes, read off docs/PROTOCOL.md ("Adapter bytes") in plain Python."""
    header: dict[str, Any] = {"__metadata__": {"format": "swarm.adapter/1"}}
    body, offset = b"", 0
    for name in sorted(tensors):
        shape, values = tensors[name]
        data = struct.pack(f"<{len(values)}f", *values)
        header[name] = {"dtype": "F32", "shape": shape, "data_offsets": [offset, offset + len(data)]}
        body += data
        offset += len(data)
    text = canonical_json(header)
    text += b" " * (-len(text) % 8)
    return struct.pack("<Q", len(text)) + text + body


def adapter_vector(inputs: Inputs) -> Vector:
    data = spec_adapter_bytes(ADAPTER_TENSORS)
    return {
        "tensors": {name: {"shape": s, "values": v} for name, (s, v) in ADAPTER_TENSORS.items()},
        "bytes": data.hex(),
        "digest": _hex(hashlib.sha256(data).digest()),
    }


def reasons_vector(inputs: Inputs) -> Vector:
    return [reason.value for reason in RejectReason]


COMPUTED: dict[str, Callable[[Inputs], Vector]] = {
    "abi": abi_vector,
    "limits": limits_vector,
    "presets": presets_vector,
    "round-seed": round_seed_vector,
    "tasks-smol-easy": tasks_smol_easy_vector,
    "tasks-paper": tasks_paper_vector,
    "batch-bytes": batch_bytes_vector,
    "batch": batch_vector,
    "eip712": eip712_vector,
    "committee": committee_vector,
    "reasons": reasons_vector,
    "endpoint": endpoint_vector,
    "sample-seeds": sample_seeds_vector,
    "sample-pick": sample_pick_vector,
    "adapter": adapter_vector,
}

PAIRS: dict[str, Callable[[list[list[Any]], Inputs], Vector]] = {
    "cid": lambda pairs, _: cid_pairs(pairs),
    "canonical-json": lambda pairs, _: canonical_json_pairs(pairs),
    "milli-units": lambda pairs, _: milli_unit_pairs(pairs),
    "weighted-median": lambda pairs, _: weighted_median_pairs(pairs),
    "scoring": scoring_pairs,
}


def compute_vectors(documented: dict[str, Vector]) -> dict[str, Vector]:
    """Every vector but ``inputs``, recomputed from the project's code and the document's inputs
    (the ``inputs`` vector, and the input column of each pair table)."""
    inputs = documented["inputs"]
    computed = {name: compute(inputs) for name, compute in COMPUTED.items()}
    computed.update({name: compute(documented[name], inputs) for name, compute in PAIRS.items()})
    return computed


def _compact(value: Any) -> str:
    """One-line JSON, non-ASCII kept but invisible characters (DEL, U+2028/9) escaped."""
    text = json.dumps(value, ensure_ascii=False)
    return re.sub("[\u007f\u2028\u2029]", lambda m: f"\\u{ord(m.group()):04x}", text)


def format_vector(value: Vector) -> str:
    """A vector as the document shows it: one key, list item or pair per line."""
    if isinstance(value, list):
        return "[\n  " + ",\n  ".join(_compact(item) for item in value) + "\n]"
    if not isinstance(value, dict):
        return _compact(value)
    lines = []
    for key, item in value.items():
        if isinstance(item, list) and any(isinstance(x, (dict, list)) for x in item):
            shown = "[\n    " + ",\n    ".join(_compact(x) for x in item) + "\n  ]"
        elif isinstance(item, dict) and item:
            shown = format_vector(item).replace("\n", "\n  ")
        else:
            shown = _compact(item)
        lines.append(f"  {_compact(key)}: {shown}")
    return "{\n" + ",\n".join(lines) + "\n}"


def main() -> None:
    """Prints the recomputed vectors as the document's fenced blocks."""
    documented = read_vectors(PROTOCOL_PATH.read_text(encoding="utf-8"))
    for name, value in compute_vectors(documented).items():
        if isinstance(value, str):
            print(f"```text vector:{name}\n{value}\n```\n")
        else:
            print(f"```json vector:{name}\n{format_vector(value)}\n```\n")


if __name__ == "__main__":
    main()

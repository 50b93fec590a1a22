"""Fuzzing decode_batch: whatever the bytes, the result is a valid batch or BatchRejected.

Random bytes, truncations and byte mutations of valid batches (plain and compressed), structural
mutations of the parsed document, deep nesting, huge strings, invalid Unicode, NaN/Infinity.
"""

from __future__ import annotations

import json

from hypothesis import HealthCheck, example, given, settings
from hypothesis import strategies as st

from node.rollouts import BatchRejected, SignedBatch, canonical_json, decode_batch, encode_batch
from tests.rollouts.factories import make_batch

BATCH = make_batch(groups=2, group_size=3, text='é <answer>[2]</answer> "q"\n')
PLAIN = encode_batch(BATCH)
COMPRESSED = encode_batch(BATCH, compress=True)
FUZZ = settings(max_examples=300, deadline=None, suppress_health_check=[HealthCheck.too_slow])


def decodes_or_rejects(data: bytes) -> SignedBatch | None:
    """decode_batch's contract: a batch whose canonical bytes are the input, or BatchRejected."""
    try:
        batch = decode_batch(data)
    except BatchRejected as error:
        assert error.reason.value and isinstance(error.detail, str)
        return None
    plain = data if not data.startswith(b"\x28\xb5\x2f\xfd") else None
    if plain is not None:
        assert canonical_json(batch) == plain
    return batch


@FUZZ
@given(st.binary(max_size=4096))
@example(b"\x28\xb5\x2f\xfd")
@example(b"\x28\xb5\x2f\xfd" + bytes(20))
@example(b"\xff\xfe")
@example(b'"\\ud800"')
@example(b"[" * 5000)
@example(b'{"body":{"schema":"swarm.rollouts/1"}}')
def test_random_bytes(data: bytes) -> None:
    decodes_or_rejects(data)


@FUZZ
@given(st.text(max_size=2048))
def test_random_text(text: str) -> None:
    decodes_or_rejects(text.encode("utf-8", "surrogatepass"))


@FUZZ
@given(st.sampled_from([PLAIN, COMPRESSED]), st.data())
def test_truncations(data: bytes, draw: st.DataObject) -> None:
    cut = draw.draw(st.integers(0, len(data) - 1))
    assert decodes_or_rejects(data[:cut]) is None


@FUZZ
@given(
    st.sampled_from([PLAIN, COMPRESSED]),
    st.lists(st.tuples(st.integers(0, 10**6), st.integers(0, 255)), min_size=1, max_size=8),
)
def test_byte_mutations(data: bytes, edits: list[tuple[int, int]]) -> None:
    mutated = bytearray(data)
    for position, value in edits:
        mutated[position % len(mutated)] = value
    batch = decodes_or_rejects(bytes(mutated))
    if batch is not None and data is PLAIN and bytes(mutated) != data:
        assert batch != BATCH  # a different valid batch (e.g. a changed digit), never the same


@FUZZ
@given(
    st.sampled_from([PLAIN, COMPRESSED]),
    st.integers(0, 10**6),
    st.binary(min_size=1, max_size=64),
    st.booleans(),
)
def test_insertions_and_deletions(data: bytes, position: int, chunk: bytes, insert: bool) -> None:
    at = position % len(data)
    mutated = data[:at] + chunk + data[at:] if insert else data[:at] + data[at + len(chunk) :]
    decodes_or_rejects(mutated)


json_leaves = (
    st.none()
    | st.booleans()
    | st.integers(-(2**70), 2**70)
    | st.floats()  # NaN, Infinity, -0.0 included: serialised with json.dumps below
    | st.text(max_size=20)
    | st.sampled_from(["\ud800", "x" * 9000, "swarm.rollouts/1", "0x" + "ab" * 32])
)
json_values = st.recursive(
    json_leaves,
    lambda inner: st.lists(inner, max_size=3)
    | st.dictionaries(st.text(max_size=8), inner, max_size=3),
    max_leaves=12,
)


def paths(document: object, prefix: tuple = ()) -> list[tuple]:
    found = [prefix]
    if isinstance(document, dict):
        for key, value in document.items():
            found += paths(value, (*prefix, key))
    elif isinstance(document, list):
        for index, value in enumerate(document):
            found += paths(value, (*prefix, index))
    return found


@FUZZ
@given(st.data(), json_values, st.sampled_from(["replace", "delete", "add"]))
def test_structural_mutations(draw: st.DataObject, value: object, action: str) -> None:
    document = json.loads(PLAIN)
    path = draw.draw(st.sampled_from(paths(document)[1:]))
    parent = document
    for part in path[:-1]:
        parent = parent[part]
    if action == "replace":
        parent[path[-1]] = value
    elif action == "delete":
        del parent[path[-1]]
    elif isinstance(parent, dict):
        parent["zz"] = value
    else:
        parent.append(value)
    text = json.dumps(document, sort_keys=True, separators=(",", ":"), ensure_ascii=False)
    decodes_or_rejects(text.encode("utf-8", "surrogatepass"))


@settings(max_examples=30, deadline=None)
@given(st.integers(1, 200_000), st.sampled_from(["[", "{", '{"a":', '[{"b":[']))
def test_deep_nesting(depth: int, opener: str) -> None:
    assert decodes_or_rejects((opener * depth).encode()) is None


@settings(max_examples=20, deadline=None)
@given(st.integers(8000, 1_100_000), st.sampled_from(["x", "é", "\\u0000", "[", "\\"]))
def test_huge_strings(length: int, unit: str) -> None:
    text = f'{{"body":{{"schema":"swarm.rollouts/1","peer":"{unit * (length // len(unit))}"}}}}'
    assert decodes_or_rejects(text.encode()) is None


@settings(max_examples=50, deadline=None)
@given(st.sampled_from(["NaN", "Infinity", "-Infinity", "1e999", "-1e999", "-0.0", "1", "2.0"]))
def test_special_rewards(literal: str) -> None:
    data = PLAIN.replace(b'"reward":0.0', b'"reward":' + literal.encode(), 1)
    assert decodes_or_rejects(data) is None

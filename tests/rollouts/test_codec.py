"""encode_batch / decode_batch: round trips, zstd, and every reject reason reachable from bytes."""

from __future__ import annotations

import json
import pickle
from collections.abc import Callable

import pytest
import zstandard

from node.rollouts import (
    MAX_BATCH_BYTES,
    BatchRejected,
    RejectReason,
    batch_digest,
    canonical_json,
    decode_batch,
    encode_batch,
    hash_from_hex,
    hash_to_hex,
)
from node.rollouts.codec import ZSTD_LEVEL
from tests.rollouts.factories import make_batch

BATCH = make_batch()
DATA = encode_batch(BATCH)


def rejected(data: bytes, reason: RejectReason, **kwargs: int) -> BatchRejected:
    with pytest.raises(BatchRejected) as excinfo:
        decode_batch(data, **kwargs)
    assert excinfo.value.reason is reason, excinfo.value
    return excinfo.value


def edited(edit: Callable[[dict], object]) -> bytes:
    """The canonical bytes of the sample batch after ``edit`` changed its parsed JSON."""
    document = json.loads(DATA)
    edit(document)
    return canonical_json(document)


def test_round_trip_plain() -> None:
    assert decode_batch(DATA) == BATCH
    assert DATA == canonical_json(BATCH)
    assert DATA.startswith(b'{"body":{"chain_id":31337,"coordinator":"0x5FbDB2315678afecb367f0')


def test_round_trip_compressed_is_deterministic() -> None:
    compressed = encode_batch(BATCH, compress=True)
    assert compressed.startswith(b"\x28\xb5\x2f\xfd")
    assert compressed == encode_batch(make_batch(), compress=True)
    assert decode_batch(compressed) == BATCH
    assert batch_digest(compressed) != batch_digest(DATA)  # the digest covers the stored bytes
    params = zstandard.get_frame_parameters(compressed)
    assert (params.content_size, params.has_checksum) == (len(DATA), False)
    assert ZSTD_LEVEL == 9


def test_largest_batch_fits() -> None:
    batch = make_batch(groups=64, group_size=32, text="x" * 400)
    data = encode_batch(batch)
    assert 800_000 < len(data) <= MAX_BATCH_BYTES
    assert decode_batch(data) == batch
    assert decode_batch(encode_batch(batch, compress=True)) == batch


def test_encode_refuses_an_oversized_batch() -> None:
    batch = make_batch(groups=64, group_size=32, text="x" * 600)
    with pytest.raises(BatchRejected) as excinfo:
        encode_batch(batch)
    assert excinfo.value.reason is RejectReason.TOO_LARGE


def test_digest_hex_helpers() -> None:
    digest = batch_digest(b"")
    assert hash_to_hex(digest) == (
        "0xe3b0c44298fc1c149afbf4c8996fb92427ae41e4649b934ca495991b7852b855"
    )
    assert hash_from_hex(hash_to_hex(digest)) == digest
    for bad in ["0x" + "AB" * 32, "ab" * 32, "0x" + "ab" * 31, "0x" + "ab" * 32 + "\n", 5]:
        with pytest.raises(ValueError):
            hash_from_hex(bad)  # type: ignore[arg-type]
    with pytest.raises(ValueError):
        hash_to_hex(b"\x00" * 31)


def test_reject_reasons_are_stable_strings() -> None:
    error = BatchRejected(RejectReason.BAD_JSON, "detail")
    assert str(error) == "bad_json: detail"
    assert RejectReason("digest_mismatch") is RejectReason.DIGEST_MISMATCH
    assert {reason.value for reason in RejectReason} >= {
        "too_large", "bad_compression", "bad_json", "unknown_schema", "bad_schema",
        "group_size", "not_canonical", "bad_signature", "wrong_chain", "wrong_coordinator",
        "digest_mismatch", "fetch_timeout", "fetch_failed", "wrong_peer", "wrong_round",
        "unknown_preset", "task_mismatch", "reward_mismatch",
    }  # fmt: skip
    again = pickle.loads(pickle.dumps(error))
    assert (again.reason, again.detail) == (error.reason, error.detail)


# --- too_large ---


def test_too_large_raw() -> None:
    rejected(DATA + b" " * (MAX_BATCH_BYTES + 1 - len(DATA)), RejectReason.TOO_LARGE)
    rejected(DATA, RejectReason.TOO_LARGE, max_size=len(DATA) - 1)
    assert decode_batch(DATA, max_size=len(DATA)) == BATCH


def test_too_large_decompressed_bomb() -> None:
    bomb = zstandard.ZstdCompressor(level=19).compress(b" " * (64 * 1024 * 1024))
    assert len(bomb) < 10_000
    error = rejected(bomb, RejectReason.TOO_LARGE)
    assert "67108864" in error.detail


def test_too_large_decompressed_just_over() -> None:
    compressed = encode_batch(BATCH, compress=True)
    rejected(compressed, RejectReason.TOO_LARGE, max_size=len(DATA) - 1)


# --- bad_compression ---


@pytest.mark.parametrize(
    "mangle",
    [
        lambda z: z[:-1],  # truncated
        lambda z: z[:4],  # magic only
        lambda z: z + b"\x00",  # trailing byte
        lambda z: z + z,  # two frames
        lambda z: z[:-8] + bytes(8),  # corrupt block
        lambda z: zstandard.ZstdCompressor(write_content_size=False).compress(DATA),
    ],
)
def test_bad_compression(mangle: Callable[[bytes], bytes]) -> None:
    rejected(mangle(encode_batch(BATCH, compress=True)), RejectReason.BAD_COMPRESSION)


def test_compressed_non_canonical_json_is_rejected() -> None:
    pretty = json.dumps(json.loads(DATA), indent=1).encode()
    rejected(zstandard.ZstdCompressor().compress(pretty), RejectReason.NOT_CANONICAL)


# --- bad_json ---


@pytest.mark.parametrize(
    "data",
    [
        b"",
        b"{",
        b"not json",
        DATA + b"x",
        DATA[:-1],
        b"\xef\xbb\xbf" + DATA,  # byte-order mark
        DATA.replace(b"basic_arithmetic", b"basic_\xff\xfeithmetic"),  # invalid UTF-8
        DATA.replace(b"basic_arithmetic", b"basic_\xed\xa0\x80ithmetic"),  # encoded surrogate
        DATA.replace(b'"reward":1.0', b'"reward":NaN'),
        DATA.replace(b'"reward":1.0', b'"reward":Infinity'),
        DATA.replace(b'"reward":1.0', b'"reward":-Infinity'),
        DATA.replace(b'"reward":1.0', b'"reward":1e400'),
        DATA.replace(b'"round":7', b'"round":' + b"9" * 5000),
        DATA.replace(b'{"body":{', b'{"body":{"round":8,', 1),  # duplicate key
        b"[" * 100_000 + b"]" * 100_000,
        b'{"body":' + b'{"a":' * 20 + b"1" + b"}" * 21,
    ],
)
def test_bad_json(data: bytes) -> None:
    rejected(data, RejectReason.BAD_JSON)


def test_nesting_limit_is_checked_before_parsing() -> None:
    error = rejected(b"[" * 900_000, RejectReason.BAD_JSON)
    assert "nested deeper" in error.detail


def test_brackets_inside_strings_do_not_count_as_nesting() -> None:
    batch = make_batch(text='[[[[[[[[[[{{{{{{{{{{ \\" ]]]]')
    assert decode_batch(encode_batch(batch)) == batch


# --- unknown_schema ---


@pytest.mark.parametrize(
    "schema", ["swarm.rollouts/1", "swarm.rollouts/2", "swarm.rollouts/4", 1, None, ["swarm.rollouts/3"]]
)
def test_unknown_schema(schema: object) -> None:
    rejected(edited(lambda d: d["body"].update(schema=schema)), RejectReason.UNKNOWN_SCHEMA)


def test_a_v1_batch_is_an_unknown_schema() -> None:
    """A ``swarm.rollouts/1`` batch (no finish reasons, no tokenizer) is not judged: it cannot be
    scored under the strict rule, and its publisher is not at fault for speaking v1."""

    def as_v1(document: dict) -> None:
        body = document["body"]
        body["schema"] = "swarm.rollouts/1"
        del body["model"]["tokenizer"]
        for group in body["groups"]:
            for completion in group["completions"]:
                for key in ("finish_reason", "token_ids", "logprobs"):
                    del completion[key]

    rejected(edited(as_v1), RejectReason.UNKNOWN_SCHEMA)


def test_missing_schema() -> None:
    rejected(edited(lambda d: d["body"].pop("schema")), RejectReason.UNKNOWN_SCHEMA)


# --- bad_schema ---


@pytest.mark.parametrize(
    "edit",
    [
        lambda d: d.update(extra=1),
        lambda d: d.pop("signature"),
        lambda d: d.update(signature="0x" + "AB" * 65),
        lambda d: d["body"].update(chain_id="31337"),
        lambda d: d["body"].update(round=-1),
        lambda d: d["body"].update(round=2**64),
        lambda d: d["body"].update(peer=d["body"]["peer"].lower()),
        lambda d: d["body"].update(groups=[]),
        lambda d: d["body"].update(groups=d["body"]["groups"] * 33),
        lambda d: d["body"]["groups"][0]["completions"][0].update(reward=1.5),
        lambda d: d["body"]["groups"][0]["completions"][0].update(reward="1.0"),
        lambda d: d["body"]["groups"][0]["completions"][0].update(text="x" * 8193),
        lambda d: d["body"]["groups"][0]["completions"][0].update(text="\ud800"),
        lambda d: d["body"]["groups"][0]["task"].update(index=True),
        lambda d: d["body"]["groups"][0].update(completions={}),
        lambda d: d.update(body=[]),
        lambda d: d.clear(),
    ],
)
def test_bad_schema(edit: Callable[[dict], object]) -> None:
    document = json.loads(DATA)
    edit(document)
    data = json.dumps(document, sort_keys=True, separators=(",", ":"), ensure_ascii=False)
    rejected(data.encode("utf-8", "surrogatepass"), _expected_bad_schema(data))


def _expected_bad_schema(data: str) -> RejectReason:
    # A lone surrogate cannot even be encoded as UTF-8 text: it arrives as invalid UTF-8.
    return RejectReason.BAD_JSON if "\ud800" in data else RejectReason.BAD_SCHEMA


def test_escaped_lone_surrogate_is_bad_schema() -> None:
    data = DATA.replace(b'"text":"<answer>2</answer> #0"', b'"text":"\\ud800"', 1)
    rejected(data, RejectReason.BAD_SCHEMA)


def test_json_array_or_scalar_is_bad_schema() -> None:
    rejected(b"[]", RejectReason.BAD_SCHEMA)
    rejected(b"1", RejectReason.BAD_SCHEMA)


def test_schema_errors_are_summarised() -> None:
    document = json.loads(DATA)
    for group in document["body"]["groups"]:
        for completion in group["completions"]:
            completion["reward"] = 2.0
    error = rejected(canonical_json(document), RejectReason.BAD_SCHEMA)
    assert "and 3 more" in error.detail and len(error.detail) < 2000


# --- group_size ---


def test_group_size() -> None:
    data = edited(lambda d: d["body"]["groups"][1]["completions"].pop())
    error = rejected(data, RejectReason.GROUP_SIZE)
    assert "[3, 4]" in error.detail


# --- not_canonical ---


@pytest.mark.parametrize(
    "data",
    [
        json.dumps(json.loads(DATA)).encode(),  # spaces after separators
        json.dumps(dict(reversed(json.loads(DATA).items())), separators=(",", ":")).encode(),
        DATA + b"\n",
        b" " + DATA,
        DATA.replace(b'"reward":1.0', b'"reward":1', 1),
        DATA.replace(b'"reward":0.5', b'"reward":0.50', 1),
        DATA.replace(b'"reward":0.5', b'"reward":5e-1', 1),
        DATA.replace(b'"reward":0.0', b'"reward":-0.0', 1),
        DATA.replace(b'"reward":0.0', b'"reward":0E0', 1),
        DATA.replace(b'"dataset":"basic', b'"dataset":"\\u0062asic', 1),
        DATA.replace(b"</answer>", b"<\\/answer>", 1),
        DATA.replace(b"#0", b"\\u00230", 1),
        DATA.replace(b'"logprobs":[-0.5,-1.25,0.0]', b'"logprobs":[-0.5,-1.25,0]', 1),
        DATA.replace(b'"logprobs":[-0.5,-1.25,0.0]', b'"logprobs":[-0.5,-1.25,-0.0]', 1),
    ],
)
def test_not_canonical(data: bytes) -> None:
    rejected(data, RejectReason.NOT_CANONICAL)


def test_escaped_non_ascii_is_not_canonical() -> None:
    batch = make_batch(text="é😀")
    escaped = json.dumps(json.loads(encode_batch(batch)), sort_keys=True, separators=(",", ":"))
    assert "\\u00e9" in escaped and "\\ud83d\\ude00" in escaped
    rejected(escaped.encode(), RejectReason.NOT_CANONICAL)

"""Adapter bytes swarm.adapter/1: canonical, readable by safetensors, and nothing else is read."""

from __future__ import annotations

import hashlib
import json
import struct

import pytest
import torch
from safetensors.torch import load as safetensors_load

from node.policy.adapters import LORA_TARGETS, AdapterPool, LoraSettings, OptimizerSettings
from node.policy.model import BaseModel, tiny_model
from node.provenance.adapter import (
    AdapterFormatError,
    decode_adapter,
    encode_adapter,
    weights_digest,
)
from tests.docs.protocol_vectors import PROTOCOL_PATH, read_vectors


@pytest.fixture(scope="module")
def state(tokenizer) -> dict[str, torch.Tensor]:  # type: ignore[no-untyped-def]
    """A rank-4 adapter on every projection of a fresh tiny model, B random (it starts at 0)."""
    model = tiny_model(tokenizer, seed=0).eval().requires_grad_(False)
    pool = AdapterPool(BaseModel(name="tiny", model=model, tokenizer=tokenizer))
    lora = LoraSettings(rank=4, alpha=8, target_modules=LORA_TARGETS["attention+mlp"])
    pool.add("node", lora, OptimizerSettings(), seed=0)
    draws = torch.Generator().manual_seed(0)
    return {
        k: torch.randn(v.shape, generator=draws) if "lora_B" in k else v
        for k, v in pool.adapter_state("node").items()
    }


def test_an_adapter_round_trips_and_any_safetensors_reader_opens_it(state) -> None:  # type: ignore[no-untyped-def]
    data = encode_adapter(state)
    for decoded in (decode_adapter(data), safetensors_load(data)):
        assert decoded.keys() == state.keys()
        assert all(torch.equal(decoded[k], state[k]) for k in state)
    assert len(data) == 8 + struct.unpack("<Q", data[:8])[0] + 4 * sum(t.numel() for t in state.values())


def test_the_same_weights_give_the_same_bytes_in_any_order(state) -> None:  # type: ignore[no-untyped-def]
    reversed_order = dict(reversed(list(state.items())))
    assert encode_adapter(reversed_order) == encode_adapter(state)
    changed = dict(state)
    name = next(iter(changed))
    changed[name] = changed[name].clone()
    changed[name].view(-1)[0] += 1e-6
    assert encode_adapter(changed) != encode_adapter(state)


def header_and_body(data: bytes) -> tuple[dict, bytes]:  # type: ignore[type-arg]
    length = struct.unpack("<Q", data[:8])[0]
    return json.loads(data[8 : 8 + length]), data[8 + length :]


def rebuilt(header: dict, body: bytes, *, indent: int | None = None) -> bytes:  # type: ignore[type-arg]
    text = json.dumps(header, sort_keys=True, separators=(",", ":"), indent=indent).encode()
    text += b" " * (-len(text) % 8)
    return struct.pack("<Q", len(text)) + text + body


def tampered(state, how: str) -> bytes:  # type: ignore[no-untyped-def]
    data = encode_adapter(state)
    header, body = header_and_body(data)
    first = sorted(k for k in header if k != "__metadata__")[0]
    if how == "truncated":
        return data[:-1]
    if how == "trailing byte":
        return data + b"\0"
    if how == "spaced header":
        return rebuilt(header, body, indent=1)
    if how == "another format":
        header["__metadata__"] = {"format": "pt"}
    elif how == "half precision":
        header[first]["dtype"] = "F16"
    elif how == "offsets out of order":
        header[first]["data_offsets"][0] += 4
    elif how == "NaN weight":
        body = struct.pack("<f", float("nan")) + body[4:]
    elif how == "not JSON":
        return struct.pack("<Q", 8) + b"{nope   " + body
    return rebuilt(header, body)


@pytest.mark.parametrize(
    ("how", "reason"),
    [
        ("truncated", "data offsets|bytes after"),
        ("trailing byte", "bytes after the last tensor"),
        ("spaced header", "not the canonical encoding"),
        ("another format", "does not name the format"),
        ("half precision", "dtype must be F32"),
        ("offsets out of order", "data offsets must follow on"),
        ("NaN weight", "NaN or infinite"),
        ("not JSON", "not JSON"),
    ],
)
def test_anything_but_the_canonical_form_is_refused_with_its_reason(state, how: str, reason: str) -> None:  # type: ignore[no-untyped-def]
    with pytest.raises(AdapterFormatError, match=reason):
        decode_adapter(tampered(state, how))


def test_an_oversized_adapter_is_refused_before_it_is_parsed(state) -> None:  # type: ignore[no-untyped-def]
    data = encode_adapter(state)
    with pytest.raises(AdapterFormatError, match="exceeds"):
        decode_adapter(data, max_bytes=len(data) - 1)
    with pytest.raises(AdapterFormatError, match="8-byte header"):
        decode_adapter(b"\1\0")


def test_the_node_s_encoding_is_the_spec_s_vector() -> None:
    vector = read_vectors(PROTOCOL_PATH.read_text())["adapter"]
    state = {
        name: torch.tensor(entry["values"], dtype=torch.float32).reshape(entry["shape"])
        for name, entry in vector["tensors"].items()
    }
    data = encode_adapter(state)
    assert data.hex() == vector["bytes"]
    assert "0x" + hashlib.sha256(data).hexdigest() == vector["digest"]


def test_the_streamed_digest_is_the_digest_of_the_bytes(state) -> None:  # type: ignore[no-untyped-def]
    assert weights_digest(state) == hashlib.sha256(encode_adapter(state)).digest()
    with pytest.raises(ValueError, match="float32"):
        weights_digest({"x": torch.zeros(2, dtype=torch.bfloat16)})

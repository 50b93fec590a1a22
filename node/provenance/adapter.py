"""A LoRA adapter as canonical bytes (``swarm.adapter/1``): what a publisher stores beside its batch
so that a verifier can recompute its samples, and the digest the batch commits to.

The bytes are a safetensors file whose every byte the spec fixes (docs/PROTOCOL.md, "Adapter
bytes"), so that two nodes holding the same weights produce the same digest and any safetensors
reader opens it:

    uint64_le(header length) ‖ header ‖ data
    header = canonical JSON of {"__metadata__": {"format": "swarm.adapter/1"},
                                name: {"data_offsets": [a, b], "dtype": "F32", "shape": [...]}, ...}
             padded with spaces to a multiple of 8 bytes
    data   = each tensor's float32 values, little-endian, row-major, in name order, back to back

Names are peft's, without the adapter's name (``AdapterPool.adapter_parameters``). The weights
are stored at the precision they are sampled with (float32), uncompressed: LoRA weights are
close to random mantissas, which zstd barely shrinks (``scripts/bench_provenance.py`` prints the
ratio).

``decode_adapter`` reads only that exact form (anything else raises ``AdapterFormatError``), so a
peer's bytes either are an adapter or are refused, never half-read.
"""

from __future__ import annotations

import hashlib
import json
import math
import struct
from collections.abc import Iterator, Mapping

import torch

from node.rollouts.canonical import canonical_json

ADAPTER_FORMAT = "swarm.adapter/1"
MAX_ADAPTER_BYTES = 64 * 2**20
"""Largest adapter a verifier fetches (rank 16 on every projection of SmolLM2-135M: 19.6 MB)."""
_METADATA = "__metadata__"


class AdapterFormatError(ValueError):
    """Bytes that are not a canonical ``swarm.adapter/1`` adapter; the message says why."""


def encode_adapter(state: Mapping[str, torch.Tensor]) -> bytes:
    """The canonical bytes of ``state`` (name -> float32 tensor)."""
    return b"".join(_pieces(state))


def weights_digest(state: Mapping[str, torch.Tensor]) -> bytes:
    """SHA-256 of ``encode_adapter(state)``, hashed piece by piece: the digest of a base model's
    weights without a second copy of them in memory."""
    digest = hashlib.sha256()
    for piece in _pieces(state):
        digest.update(piece)
    return digest.digest()


def _pieces(state: Mapping[str, torch.Tensor]) -> Iterator[bytes]:
    """The canonical bytes in pieces: header length and header, then each tensor's data."""
    yield _header(state)
    for name in sorted(state):
        yield state[name].detach().cpu().contiguous().numpy().astype("<f4", copy=False).tobytes()


def _header(state: Mapping[str, torch.Tensor]) -> bytes:
    """``uint64_le(header length) ‖ header`` of ``state``'s canonical bytes."""
    if not state:
        raise ValueError("an adapter needs at least one tensor")
    header: dict[str, object] = {_METADATA: {"format": ADAPTER_FORMAT}}
    offset = 0
    for name in sorted(state):
        tensor = state[name]
        if tensor.dtype != torch.float32:
            raise ValueError(f"{name} is {tensor.dtype}; adapters are stored as float32")
        size = 4 * tensor.numel()
        header[name] = {"dtype": "F32", "shape": list(tensor.shape), "data_offsets": [offset, offset + size]}
        offset += size
    text = canonical_json(header)
    text += b" " * (-len(text) % 8)
    return struct.pack("<Q", len(text)) + text


def decode_adapter(data: bytes, *, max_bytes: int = MAX_ADAPTER_BYTES) -> dict[str, torch.Tensor]:
    """The tensors of canonical adapter bytes; ``AdapterFormatError`` for anything else."""
    if len(data) > max_bytes:
        raise AdapterFormatError(f"adapter of {len(data)} bytes exceeds {max_bytes}")
    if len(data) < 8:
        raise AdapterFormatError("shorter than the 8-byte header length")
    (length,) = struct.unpack("<Q", data[:8])
    if length % 8 or 8 + length > len(data):
        raise AdapterFormatError(f"header length {length} is not a multiple of 8 within the data")
    raw = data[8 : 8 + length]
    try:
        header = json.loads(raw.rstrip(b" "))
    except (UnicodeDecodeError, json.JSONDecodeError) as error:
        raise AdapterFormatError(f"header is not JSON: {error}") from None
    if not isinstance(header, dict) or header.get(_METADATA) != {"format": ADAPTER_FORMAT}:
        raise AdapterFormatError(f"header does not name the format {ADAPTER_FORMAT}")
    tensors = _tensors(header, memoryview(data)[8 + length :])
    # The data section is the tensors' bytes as they are (float32 round-trips bit for bit and
    # the offsets follow on), so only the header can differ from the canonical encoding.
    if _header(tensors) != bytes(data[: 8 + length]):
        raise AdapterFormatError("not the canonical encoding of its tensors")
    return tensors


def _tensors(header: dict[str, object], body: memoryview) -> dict[str, torch.Tensor]:
    tensors, offset = {}, 0
    names = sorted(k for k in header if k != _METADATA)
    if not names:
        raise AdapterFormatError("no tensors")
    for name in names:
        entry = header[name]
        if not isinstance(entry, dict) or set(entry) != {"dtype", "shape", "data_offsets"}:
            raise AdapterFormatError(f"{name}: needs exactly dtype, shape and data_offsets")
        shape = entry["shape"]
        if entry["dtype"] != "F32" or not _is_shape(shape):
            raise AdapterFormatError(f"{name}: dtype must be F32 with a shape of natural numbers")
        size = 4 * math.prod(shape)
        if entry["data_offsets"] != [offset, offset + size] or offset + size > len(body):
            raise AdapterFormatError(f"{name}: data offsets must follow on, in name order")
        values = torch.frombuffer(bytearray(body[offset : offset + size]), dtype=torch.float32)
        if not torch.isfinite(values).all():
            raise AdapterFormatError(f"{name}: holds NaN or infinite weights")
        tensors[name] = values.reshape(shape)
        offset += size
    if offset != len(body):
        raise AdapterFormatError(f"{len(body) - offset} bytes after the last tensor")
    return tensors


def _is_shape(shape: object) -> bool:
    return isinstance(shape, list) and all(
        isinstance(n, int) and not isinstance(n, bool) and n >= 0 for n in shape
    )

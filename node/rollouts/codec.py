"""Batch bytes: ``encode_batch`` (canonical JSON, optionally zstd) and ``decode_batch``.

``decode_batch`` takes untrusted bytes from any peer and either returns a valid
:class:`SignedBatch` or raises :class:`BatchRejected`; no other exception escapes, whatever
the input. In order:

1. size: at most ``max_size`` bytes (docs/PROTOCOL.md: 1 MiB) ................ ``too_large``
2. zstd, detected by its magic ``28 b5 2f fd``: exactly one frame, nothing after it, with its
   content size declared in the frame header (zstd's default for one-shot compression) and at
   most ``max_size``, checked before anything is allocated (decompression bombs)
   ............................................................ ``bad_compression`` / ``too_large``
3. strict JSON (node.rollouts.strict_json) ...................................... ``bad_json``
4. ``body.schema`` names this schema ......................................... ``unknown_schema``
5. the pydantic models (node.rollouts.schema) ................... ``bad_schema`` / ``group_size``
6. the (decompressed) bytes are exactly ``canonical_json`` of the parsed batch .. ``not_canonical``

The signature is not checked here (it needs the verifier's domain): see node.rollouts.signing.

Compression is deterministic for a given zstd library (fixed level, content size written, no
checksum, no dictionary id), but it is not part of the canonical form: another zstd version
may compress the same JSON differently. That is harmless, because the digest committed on-chain
covers the stored bytes as they are, compressed or not; only the JSON inside must be canonical.
"""

from __future__ import annotations

from typing import Any

import zstandard
from pydantic import ValidationError

from node.rollouts.canonical import canonical_json
from node.rollouts.limits import MAX_BATCH_BYTES, SCHEMA
from node.rollouts.reasons import BatchRejected, RejectReason
from node.rollouts.schema import SignedBatch
from node.rollouts.strict_json import parse_strict_json

ZSTD_MAGIC = b"\x28\xb5\x2f\xfd"
#: zstd level used by ``encode_batch(compress=True)``; part of what makes its output repeatable.
ZSTD_LEVEL = 9
#: Largest back-reference window a compressed batch may ask the decoder for.
ZSTD_MAX_WINDOW = 8 * 1024 * 1024


def encode_batch(batch: SignedBatch, *, compress: bool = False) -> bytes:
    """The bytes to store for ``batch``: its canonical JSON, zstd-compressed if ``compress``.

    BatchRejected(too_large) if the JSON exceeds the protocol's 1 MiB (no peer would accept it).
    """
    data = canonical_json(batch)
    if len(data) > MAX_BATCH_BYTES:
        raise BatchRejected(
            RejectReason.TOO_LARGE, f"canonical JSON is {len(data)} bytes, over {MAX_BATCH_BYTES}"
        )
    if not compress:
        return data
    compressor = zstandard.ZstdCompressor(
        level=ZSTD_LEVEL,
        write_checksum=False,
        write_content_size=True,
        write_dict_id=False,
        threads=0,
    )
    return compressor.compress(data)


def decode_batch(data: bytes, *, max_size: int = MAX_BATCH_BYTES) -> SignedBatch:
    """Validates untrusted batch bytes; the batch, or BatchRejected with the first failed check."""
    if not isinstance(data, (bytes, bytearray, memoryview)):
        raise TypeError(f"decode_batch takes bytes, got {type(data).__name__}")
    data = bytes(data)
    if len(data) > max_size:
        raise BatchRejected(RejectReason.TOO_LARGE, f"{len(data)} bytes, over {max_size}")
    if data.startswith(ZSTD_MAGIC):
        data = decompress(data, max_size=max_size)
    document = parse_strict_json(data)
    _check_schema_name(document)
    try:
        batch = SignedBatch.model_validate(document, strict=True)
    except ValidationError as error:
        raise _schema_rejection(error) from None
    try:
        canonical = canonical_json(batch)
    except ValueError as error:  # cannot happen for a validated batch; never let it escape
        raise BatchRejected(RejectReason.NOT_CANONICAL, str(error)) from None
    if canonical != data:
        raise BatchRejected(
            RejectReason.NOT_CANONICAL,
            "the bytes are not the canonical JSON of their content "
            "(key order, whitespace, escapes, number form or a -0.0)",
        )
    return batch


def decompress(data: bytes, *, max_size: int = MAX_BATCH_BYTES) -> bytes:
    """One zstd frame -> its content, at most ``max_size`` bytes; BatchRejected otherwise."""
    try:
        params = zstandard.get_frame_parameters(data)
    except zstandard.ZstdError as error:
        raise BatchRejected(
            RejectReason.BAD_COMPRESSION, f"bad zstd frame header: {error}"
        ) from None
    if params.content_size == zstandard.CONTENTSIZE_UNKNOWN:
        raise BatchRejected(
            RejectReason.BAD_COMPRESSION, "the zstd frame does not declare its content size"
        )
    if params.content_size > max_size:
        raise BatchRejected(
            RejectReason.TOO_LARGE,
            f"decompresses to {params.content_size} bytes, over {max_size}",
        )
    if params.window_size > ZSTD_MAX_WINDOW:
        raise BatchRejected(
            RejectReason.BAD_COMPRESSION, f"zstd window of {params.window_size} bytes is too large"
        )
    decompressor = zstandard.ZstdDecompressor(max_window_size=ZSTD_MAX_WINDOW)
    try:
        # The declared content size (checked above) is what gets allocated; a frame whose real
        # content is longer or shorter than it declares fails instead of growing the buffer.
        return decompressor.decompress(data, max_output_size=max_size, allow_extra_data=False)
    except zstandard.ZstdError as error:
        raise BatchRejected(RejectReason.BAD_COMPRESSION, str(error)) from None
    except MemoryError:
        raise BatchRejected(RejectReason.TOO_LARGE, "decompression ran out of memory") from None


def _check_schema_name(document: Any) -> None:
    body = document.get("body") if isinstance(document, dict) else None
    schema = body.get("schema") if isinstance(body, dict) else None
    if schema is None and not isinstance(body, dict):
        return  # not even the shape of a batch: the models say what is wrong
    if schema != SCHEMA:
        shown = repr(schema[:64]) if isinstance(schema, str) else type(schema).__name__
        raise BatchRejected(
            RejectReason.UNKNOWN_SCHEMA, f"body.schema is {shown}, expected {SCHEMA!r}"
        )


def _schema_rejection(error: ValidationError) -> BatchRejected:
    problems = error.errors(include_url=False, include_input=False)
    reason = RejectReason.BAD_SCHEMA
    if any(problem["type"] == "group_size" for problem in problems):
        reason = RejectReason.GROUP_SIZE
    shown = "; ".join(
        f"{'.'.join(str(part)[:64] for part in problem['loc']) or '(root)'}: {problem['msg'][:200]}"
        for problem in problems[:5]
    )
    more = f" (and {len(problems) - 5} more)" if len(problems) > 5 else ""
    return BatchRejected(reason, shown + more)

"""Digests of stored batch bytes and their ``0x`` hex form (docs/PROTOCOL.md, "Digests and CIDs").

The digest committed on-chain is SHA-256 of the exact stored bytes (compressed or not); in JSON
and logs a 32-byte hash is written ``0x`` + 64 lower-case hex digits.
"""

from __future__ import annotations

import hashlib
import re

_HEX32 = re.compile(r"0x[0-9a-f]{64}")


def batch_digest(data: bytes) -> bytes:
    """SHA-256 of the stored bytes: the on-chain ``digest`` and the content address."""
    return hashlib.sha256(data).digest()


def hash_to_hex(value: bytes) -> str:
    """``0x`` + 64 lower-case hex digits of a 32-byte hash; ValueError for other lengths."""
    if len(value) != 32:
        raise ValueError(f"a hash is 32 bytes, got {len(value)}")
    return "0x" + bytes(value).hex()


def hash_from_hex(text: str) -> bytes:
    """The 32 bytes of ``0x`` + 64 lower-case hex digits; ValueError for anything else."""
    if not isinstance(text, str) or not _HEX32.fullmatch(text):
        raise ValueError(f"expected 0x and 64 lower-case hex digits, got {str(text)[:80]!r}")
    return bytes.fromhex(text[2:])

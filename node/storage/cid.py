"""SHA-256 digests <-> CIDv1 strings (docs/PROTOCOL.md, "Digests and CIDs").

A blob's CID is CIDv1 with codec ``raw`` (0x55) and multihash ``sha2-256`` (0x12, 32 bytes) of
the same digest, in multibase ``base32`` lower-case without padding (prefix ``b``)::

    "b" + base32lower(0x01 0x55 0x12 0x20 <32-byte digest>)

That is what Kubo prints for ``ipfs block put --cid-codec raw``. Only this one form is accepted
back: other versions (CIDv0 ``Qm...``), codecs (dag-pb, ...), hash functions, digest lengths
and multibases are refused with InvalidAddress saying which part differs.
"""

from __future__ import annotations

import base64
import re

from node.storage.base import check_digest
from node.storage.errors import InvalidAddress

CID_VERSION = 0x01
RAW_CODEC = 0x55
SHA2_256 = 0x12
SHA2_256_LENGTH = 32
_PREFIX = bytes([CID_VERSION, RAW_CODEC, SHA2_256, SHA2_256_LENGTH])
_BASE32_LOWER = re.compile(r"[a-z2-7]+")
_CODECS = {0x70: "dag-pb", 0x71: "dag-cbor", 0x0129: "dag-json", 0x0200: "json", 0x51: "cbor"}
_HASHES = {0x11: "sha1", 0x13: "sha2-512", 0x1E: "blake3", 0xB220: "blake2b-256", 0x16: "sha3-256"}


def cid_from_digest(digest: bytes) -> str:
    """The CIDv1 (raw, sha2-256, base32) string of a 32-byte SHA-256 digest."""
    return _base32_multibase(_PREFIX + check_digest(digest))


def digest_from_cid(cid: str) -> bytes:
    """The 32-byte SHA-256 digest inside a CIDv1 raw/sha2-256/base32 string; InvalidAddress else."""
    if not isinstance(cid, str) or not cid:
        raise InvalidAddress(f"a CID is a non-empty string, got {cid!r}")
    if cid.startswith("Qm"):
        raise InvalidAddress(f"{cid[:80]} is a CIDv0 (dag-pb); expected a CIDv1 raw block ('b...')")
    if cid[0] != "b":
        raise InvalidAddress(
            f"CID {cid[:80]!r} has multibase prefix {cid[0]!r}; only base32 lower-case ('b') is used"
        )
    body = cid[1:]
    if not _BASE32_LOWER.fullmatch(body):
        raise InvalidAddress(f"CID {cid[:80]!r} is not lower-case base32")
    padded = body.upper() + "=" * (-len(body) % 8)
    try:
        raw = base64.b32decode(padded)
    except ValueError as error:
        raise InvalidAddress(f"CID {cid[:80]!r} is not valid base32: {error}") from None
    if _base32_multibase(raw) != cid:
        raise InvalidAddress(f"CID {cid[:80]!r} is not in canonical base32 (stray bits)")
    return _digest_from_raw(raw, cid)


def _base32_multibase(raw: bytes) -> str:
    """Multibase base32 lower-case, unpadded, of binary CID bytes."""
    return "b" + base64.b32encode(raw).decode("ascii").lower().rstrip("=")


def _digest_from_raw(raw: bytes, cid: str) -> bytes:
    shown = cid[:80]
    version, rest = _varint(raw, shown)
    if version != CID_VERSION:
        raise InvalidAddress(f"CID {shown} has version {version}; expected CIDv1")
    codec, rest = _varint(rest, shown)
    if codec != RAW_CODEC:
        name = _CODECS.get(codec, hex(codec))
        raise InvalidAddress(f"CID {shown} has codec {name}; expected raw (0x55)")
    hash_code, rest = _varint(rest, shown)
    if hash_code != SHA2_256:
        name = _HASHES.get(hash_code, hex(hash_code))
        raise InvalidAddress(f"CID {shown} uses hash {name}; expected sha2-256 (0x12)")
    length, rest = _varint(rest, shown)
    if length != SHA2_256_LENGTH or len(rest) != SHA2_256_LENGTH:
        raise InvalidAddress(
            f"CID {shown} has a {len(rest)}-byte digest declared as {length}; expected 32"
        )
    return rest


def _varint(data: bytes, shown: str) -> tuple[int, bytes]:
    """Reads one unsigned LEB128 varint (at most 9 bytes, minimal form); returns (value, rest)."""
    value = 0
    for position, byte in enumerate(data[:9]):
        value |= (byte & 0x7F) << (7 * position)
        if not byte & 0x80:
            if position > 0 and byte == 0:
                raise InvalidAddress(f"CID {shown} has a non-minimal varint")
            return value, data[position + 1 :]
    raise InvalidAddress(f"CID {shown} ends inside a varint")

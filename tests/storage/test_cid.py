"""CIDv1 (raw, sha2-256, base32) <-> digest: Kubo's vector, a hand-built vector, refusals."""

from __future__ import annotations

import hashlib

import pytest
from hypothesis import given
from hypothesis import strategies as st

from node.storage import InvalidAddress, cid_from_digest, digest_from_cid

# `printf '' | ipfs block put --cid-codec raw` (Kubo), as the issue quotes it.
EMPTY_BLOCK_CID = "bafkreihdwdcefgh4dqkjv67uzcmw7ojee6xedzdetojuzjevtenxquvyku"


def base32_lower_by_hand(data: bytes) -> str:
    """RFC 4648 base32, lower-case, unpadded, written out bit by bit (independent of base64)."""
    alphabet = "abcdefghijklmnopqrstuvwxyz234567"
    bits = "".join(f"{byte:08b}" for byte in data)
    bits += "0" * (-len(bits) % 5)
    return "".join(alphabet[int(bits[i : i + 5], 2)] for i in range(0, len(bits), 5))


def cid_by_hand(data: bytes) -> str:
    multihash = bytes([0x12, 32]) + hashlib.sha256(data).digest()  # sha2-256, 32 bytes
    cid = bytes([0x01, 0x55]) + multihash  # CIDv1, raw
    return "b" + base32_lower_by_hand(cid)  # multibase base32 lower


def test_empty_block_matches_kubo() -> None:
    digest = hashlib.sha256(b"").digest()
    assert cid_from_digest(digest) == EMPTY_BLOCK_CID
    assert digest_from_cid(EMPTY_BLOCK_CID) == digest
    assert cid_by_hand(b"") == EMPTY_BLOCK_CID  # the hand-built encoder agrees with Kubo


def test_hello_world() -> None:
    digest = hashlib.sha256(b"hello world").digest()
    expected = cid_by_hand(b"hello world")
    assert expected.startswith("bafkrei") and len(expected) == 59
    assert cid_from_digest(digest) == expected
    assert digest_from_cid(expected) == digest


@given(st.binary(min_size=32, max_size=32))
def test_round_trip(digest: bytes) -> None:
    cid = cid_from_digest(digest)
    assert digest_from_cid(cid) == digest
    assert cid == "b" + base32_lower_by_hand(bytes([1, 0x55, 0x12, 32]) + digest)


def raw_cid(prefix: bytes, digest: bytes = bytes(32)) -> str:
    return "b" + base32_lower_by_hand(prefix + digest)


@pytest.mark.parametrize(
    ("cid", "message"),
    [
        ("QmYwAPJzv5CZsnA625s3Xf2nemtYgPpHdWEz79ojWnPbdG", "CIDv0"),
        ("bafybeigdyrzt5sfp7udm7hu76uh7y26nf3efuylqabf3oclgtqy55fbzdi", "dag-pb"),
        (raw_cid(bytes([1, 0x71, 0x12, 32])), "dag-cbor"),
        (raw_cid(bytes([1, 0x55, 0x13, 64]), bytes(64)), "sha2-512"),
        (raw_cid(bytes([1, 0x55, 0x12, 20]), bytes(20)), "32"),
        (raw_cid(bytes([1, 0x55, 0x12, 32]), bytes(31)), "32"),
        (raw_cid(bytes([1, 0x55, 0x12, 32]), bytes(33)), "32"),
        (raw_cid(bytes([2, 0x55, 0x12, 32])), "version 2"),
        (raw_cid(bytes([1, 0xD5, 0x00, 0x12, 32])), "non-minimal"),
        (raw_cid(bytes([1, 0xFF])), "varint"),
        (EMPTY_BLOCK_CID.upper(), "prefix"),
        ("B" + EMPTY_BLOCK_CID[1:].upper(), "prefix"),
        ("z" + EMPTY_BLOCK_CID[1:], "prefix"),
        ("b" + EMPTY_BLOCK_CID[1:].upper(), "lower-case base32"),
        (EMPTY_BLOCK_CID + "=", "lower-case base32"),
        (EMPTY_BLOCK_CID[:-1] + "l", "canonical"),  # stray trailing bits
        (EMPTY_BLOCK_CID[:-3], "canonical"),
        (EMPTY_BLOCK_CID[:-8], "32"),
        ("b", "base32"),
        ("", "non-empty"),
        ("b18", "base32"),
    ],
)
def test_refused(cid: str, message: str) -> None:
    with pytest.raises(InvalidAddress, match=message):
        digest_from_cid(cid)


@pytest.mark.parametrize("digest", [b"", bytes(31), bytes(33), "00" * 32, None])
def test_digest_must_be_32_bytes(digest: object) -> None:
    with pytest.raises(InvalidAddress):
        cid_from_digest(digest)  # type: ignore[arg-type]
    assert issubclass(InvalidAddress, ValueError)

"""The proof in a store endpoint announcement: the libp2p key's signature over the announcer.

Without it any registered peer could announce another's libp2p peer id before its owner did and
hold it (docs/PROTOCOL.md, "Store endpoints"). With it an announcement counts only when the key
that the peer id names signed, for this announcing chain address on this coordinator of this
chain, the message :meth:`EndpointDomain.message` builds::

    swarm.endpoint/1
    chain_id=31337
    coordinator=0x5fbdb2315678afecb367f032d93f642f64180aa3
    peer=0xf39fd6e51aad88f6f4ce6ab8827279cfffb92266

(ASCII, lines joined by ``\\n``, no final newline, addresses in lower-case hex, the chain id in
decimal). The key signs it the way libp2p signs a message, which is what Kubo's ``key/sign``
does: over :data:`SIGNED_PREFIX` followed by the message. The addresses are not signed: only
the announcing chain address can send its announcements, and libp2p authenticates the peer id
of every connection, so one signature serves every restart on new ports.

Only a key inlined in its peer id can be checked (node.storage.endpoint decodes it): Ed25519
(``12D3KooW...``; RFC 8032 through pycryptodome) and Secp256k1 (``16Uiu2...``; ECDSA over
SHA-256, DER, low S, through coincurve). A ``Qm...`` peer id (an RSA key, hashed) names no key
here. The node never holds the private key: its Kubo daemon signs.
"""

from __future__ import annotations

import base64
import binascii
import re
from dataclasses import dataclass

import coincurve
from Crypto.Signature import eddsa

#: The first line of the signed message: what the signature is for, and the format's version.
PROOF_TAG = "swarm.endpoint/1"
#: What libp2p (Kubo's ``key/sign``) puts before a message it signs.
SIGNED_PREFIX = b"libp2p-key signed message:"
#: libp2p's KeyType numbers of the keys a proof may be checked with.
ED25519, SECP256K1 = 1, 2
#: Most characters of a signature's text (a DER Secp256k1 signature of 72 bytes has 96).
MAX_SIGNATURE_CHARS = 100

_ADDRESS = re.compile(r"^0x[0-9a-fA-F]{40}$")
_BASE64URL = re.compile(r"^[A-Za-z0-9_-]*$")


class ProofInvalid(ValueError):
    """The proof does not show control of the key; ``reason`` says why (one line)."""

    def __init__(self, reason: str) -> None:
        super().__init__(reason)
        self.reason = reason


@dataclass(frozen=True)
class EndpointDomain:
    """The coordinator deployment a proof is for, so that it counts on no other chain or
    coordinator."""

    chain_id: int
    coordinator: str

    def __post_init__(self) -> None:
        if isinstance(self.chain_id, bool) or not isinstance(self.chain_id, int):
            raise ValueError(f"a chain id is an integer, got {self.chain_id!r}")
        if self.chain_id <= 0 or not _ADDRESS.match(self.coordinator):
            raise ValueError(f"not a deployment: chain {self.chain_id}, {self.coordinator!r}")

    def message(self, peer: str) -> bytes:
        """What the libp2p key signs (after :data:`SIGNED_PREFIX`) for ``peer``'s announcement."""
        if not isinstance(peer, str) or not _ADDRESS.match(peer):
            raise ProofInvalid(f"the announcer {peer!r:.60} is not a 20-byte hex address")
        lines = (
            PROOF_TAG,
            f"chain_id={self.chain_id}",
            f"coordinator={self.coordinator.lower()}",
            f"peer={peer.lower()}",
        )
        return "\n".join(lines).encode("ascii")


def encode_signature(signature: bytes) -> str:
    """A signature as announced: base64url (RFC 4648, section 5) without padding."""
    return base64.urlsafe_b64encode(signature).decode("ascii").rstrip("=")


def decode_signature(text: str) -> bytes:
    """The bytes of an announced signature; ProofInvalid unless it is canonical base64url."""
    if not 0 < len(text) <= MAX_SIGNATURE_CHARS or not _BASE64URL.match(text):
        raise ProofInvalid(f"the signature is not 1 to {MAX_SIGNATURE_CHARS} base64url characters")
    try:
        data = base64.urlsafe_b64decode(text + "=" * (-len(text) % 4))
    except (binascii.Error, ValueError):
        raise ProofInvalid("the signature is not base64url") from None
    if encode_signature(data) != text:
        raise ProofInvalid("the signature is not canonical base64url (no padding, zero spare bits)")
    return data


def verify_signature(key_type: int, public_key: bytes, message: bytes, signature: bytes) -> None:
    """Checks that the libp2p key (``key_type``, ``public_key``) signed ``message`` (libp2p's
    prefix is added here); ProofInvalid otherwise."""
    signed = SIGNED_PREFIX + message
    if key_type == ED25519:
        valid = _ed25519_valid(public_key, signed, signature)
    elif key_type == SECP256K1:
        valid = _secp256k1_valid(public_key, signed, signature)
    else:
        raise ProofInvalid(f"a key of libp2p type {key_type} cannot be checked here")
    if not valid:
        raise ProofInvalid(
            "the signature is not the peer id's key signing this announcer, chain and coordinator"
        )


def _ed25519_valid(public_key: bytes, signed: bytes, signature: bytes) -> bool:
    if len(signature) != 64:
        return False
    try:
        key = eddsa.import_public_key(public_key)
        eddsa.new(key, "rfc8032").verify(signed, signature)
    except (ValueError, TypeError):  # not a point of the curve, or not authentic
        return False
    return True


def _secp256k1_valid(public_key: bytes, signed: bytes, signature: bytes) -> bool:
    try:
        return bool(coincurve.PublicKey(public_key).verify(signature, signed))
    except (ValueError, TypeError):  # not a point of the curve, or not DER
        return False

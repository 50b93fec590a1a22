"""Real libp2p keys for tests that cannot run a Kubo daemon per peer id: Ed25519 from a 32-byte
seed (pycryptodome) and Secp256k1 (coincurve), their peer ids, and their signatures made as libp2p
makes them (Kubo's ``key/sign``: over ``libp2p-key signed message:`` + the message). That Kubo
signs the same bytes is checked against a daemon in tests/storage/test_endpoint_kubo.py.
"""

from __future__ import annotations

import base64
import hashlib
from dataclasses import dataclass

import coincurve
from Crypto.Signature import eddsa

from node.storage.endpoint import StoreEndpoint, encode_endpoint
from node.storage.endpoint_proof import ED25519, SECP256K1, SIGNED_PREFIX, EndpointDomain

_BASE58 = "123456789ABCDEFGHJKLMNPQRSTUVWXYZabcdefghijkmnopqrstuvwxyz"

#: The deployment the tests' announcements are for (Anvil's chain id, its first contract).
DOMAIN = EndpointDomain(31337, "0x5FbDB2315678afecb367f032d93F642f64180aa3")


def base58(data: bytes) -> str:
    number = int.from_bytes(data, "big")
    text = ""
    while number:
        number, digit = divmod(number, 58)
        text = _BASE58[digit] + text
    return "1" * (len(data) - len(data.lstrip(b"\0"))) + text


def cid_form(multihash: bytes) -> str:
    """The CIDv1 (libp2p-key, base32) text of a peer id's multihash: ``bafz...``."""
    return "b" + base64.b32encode(b"\x01\x72" + multihash).decode().lower().rstrip("=")


@dataclass(frozen=True)
class Libp2pKey:
    """A libp2p private key: ``kind`` is libp2p's KeyType (1 Ed25519, 2 Secp256k1)."""

    kind: int
    secret: bytes

    @classmethod
    def ed25519(cls, name: str) -> Libp2pKey:
        """The Ed25519 key whose RFC 8032 seed is sha256(``name``)."""
        return cls(ED25519, hashlib.sha256(name.encode()).digest())

    @classmethod
    def secp256k1(cls, name: str) -> Libp2pKey:
        return cls(SECP256K1, hashlib.sha256(name.encode()).digest())

    @property
    def public_key(self) -> bytes:
        if self.kind == ED25519:
            return eddsa.import_private_key(self.secret).public_key().export_key(format="raw")
        return coincurve.PrivateKey(self.secret).public_key.format(compressed=True)

    @property
    def multihash(self) -> bytes:
        """The identity multihash of the protobuf ``PublicKey{Type, Data}``."""
        protobuf = bytes([0x08, self.kind, 0x12, len(self.public_key)]) + self.public_key
        return bytes([0x00, len(protobuf)]) + protobuf

    @property
    def peer_id(self) -> str:
        return base58(self.multihash)

    @property
    def private_protobuf(self) -> bytes:
        """libp2p's marshalled private key (what ``ipfs key import`` reads): for Ed25519 the
        seed followed by the public key."""
        data = self.secret + self.public_key if self.kind == ED25519 else self.secret
        return bytes([0x08, self.kind, 0x12, len(data)]) + data

    def sign(self, message: bytes) -> bytes:
        """What Kubo's ``key/sign`` returns for ``message``."""
        signed = SIGNED_PREFIX + message
        if self.kind == ED25519:
            return eddsa.new(eddsa.import_private_key(self.secret), "rfc8032").sign(signed)
        return coincurve.PrivateKey(self.secret).sign(signed)  # DER, SHA-256, RFC 6979

    def proof(self, announcer: str, domain: EndpointDomain = DOMAIN) -> bytes:
        return self.sign(domain.message(announcer))

    def announcement(
        self, announcer: str, *addrs: str, domain: EndpointDomain = DOMAIN
    ) -> bytes:
        """The bytes ``announcer`` announces for this key's peer id at ``addrs``."""
        endpoint = StoreEndpoint(self.peer_id, addrs)
        return encode_endpoint(endpoint, self.proof(announcer, domain))

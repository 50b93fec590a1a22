"""Where a peer's content store can be reached from other hosts (announced on-chain).

A network store (Kubo) has an endpoint: its libp2p peer id and the multiaddrs it listens on. A
node announces its own on the coordinator (``announceEndpoint``) and connects to the announced
endpoints of the peers whose batches it fetches, so peers find each other through the chain, with
no bootstrap list. A local folder has no endpoint. The rules are docs/PROTOCOL.md, "Store
endpoints":

- the announced bytes are canonical JSON ``{"addrs":[...],"peer_id":"...","signature":"..."}``
  (UTF-8, keys sorted, no whitespace), at most :data:`MAX_ENDPOINT_BYTES`; empty bytes withdraw
  the endpoint. ``signature`` is the peer id's key signing the announcing address, chain and
  coordinator (node.storage.endpoint_proof), so nobody can announce a peer id whose key it lacks;
- :func:`parse_endpoint` turns peer-supplied bytes into a :class:`StoreEndpoint` or raises
  :class:`EndpointRejected` with the reason (never anything else, whatever the bytes);
- node.storage.announced applies announcements in chain order (which one counts, who holds a
  peer id).

Pure Python: base58btc, base32 and the multihash / CID / multiaddr subsets are decoded here.
"""

from __future__ import annotations

import base64
import binascii
import ipaddress
import json
import re
from dataclasses import dataclass
from typing import Any

from node.storage.endpoint_proof import (
    EndpointDomain,
    ProofInvalid,
    decode_signature,
    encode_signature,
    verify_signature,
)

#: Most bytes an announcement may hold (the coordinator's ``MAX_ENDPOINT_BYTES``).
MAX_ENDPOINT_BYTES = 512
#: Most addresses in one announcement.
MAX_ADDRS = 8
#: Most characters of one multiaddr.
MAX_ADDR_CHARS = 128
#: Most characters of a peer id (an Ed25519 peer id has 52, its CID form 62).
MAX_PEER_ID_CHARS = 100

_BASE58 = "123456789ABCDEFGHJKLMNPQRSTUVWXYZabcdefghijkmnopqrstuvwxyz"
_BASE58_INDEX = {c: i for i, c in enumerate(_BASE58)}
_SHA2_256, _IDENTITY, _LIBP2P_KEY = 0x12, 0x00, 0x72
#: Key types a peer id may inline (identity multihash): libp2p's KeyType -> public key length.
_INLINE_KEYS = {1: 32, 2: 33}  # Ed25519, Secp256k1
_FIELDS = {"addrs", "peer_id", "signature"}
_LABEL = re.compile(r"^[a-z0-9]([a-z0-9-]{0,61}[a-z0-9])?$")
_MULTIBASE_VALUE = re.compile(r"^[A-Za-z0-9_-]{2,100}$")
_FLAGS = frozenset(
    {"quic", "quic-v1", "webtransport", "webrtc-direct", "ws", "wss", "tls", "noise"}
)
_PRIVATE_SUFFIXES = (".localhost", ".local", ".internal", ".lan", ".home.arpa")


class EndpointRejected(ValueError):
    """A peer's announced endpoint cannot be used; ``reason`` says why (one line)."""

    def __init__(self, reason: str) -> None:
        super().__init__(reason)
        self.reason = reason


@dataclass(frozen=True)
class StoreEndpoint:
    """A libp2p peer id and the multiaddrs (without ``/p2p/<id>``) it listens on."""

    peer_id: str
    addrs: tuple[str, ...]


# ------------------------------------------------------------------------------------ encoding


def encode_endpoint(endpoint: StoreEndpoint, signature: bytes) -> bytes:
    """The announced bytes: canonical JSON ``{"addrs":[...],"peer_id":"...","signature":"..."}``,
    the signature in base64url without padding."""
    value = {
        "addrs": list(endpoint.addrs),
        "peer_id": endpoint.peer_id,
        "signature": encode_signature(signature),
    }
    return _canonical(value)


def _canonical(value: dict[str, Any]) -> bytes:
    return json.dumps(value, ensure_ascii=False, sort_keys=True, separators=(",", ":")).encode()


def parse_endpoint(
    data: bytes, *, announcer: str, domain: EndpointDomain, allow_private: bool
) -> StoreEndpoint:
    """The endpoint ``announcer`` announced in ``data``, with only the addresses this node may
    dial (whoever holds the peer id: node.storage.announced decides that).

    EndpointRejected when the bytes are not the encoding, the peer id is not a libp2p peer id, an
    address names another peer id, the signature is not the peer id's key signing ``announcer``
    on ``domain``, or no address remains (private, loopback and link-local ones count only with
    ``allow_private``).
    """
    announcement = verified_announcement(data, announcer=announcer, domain=domain)
    return usable_endpoint(announcement, allow_private=allow_private)


def announceable(
    endpoint: StoreEndpoint, signature: bytes, *, allow_private: bool
) -> StoreEndpoint | None:
    """This node's own endpoint as peers would accept it: the addresses they may dial, sorted (so
    that the bytes depend on the set, not on the order a daemon lists them in), as many as fit
    :data:`MAX_ADDRS` and :data:`MAX_ENDPOINT_BYTES` beside ``signature``; None when nothing is
    left."""
    try:
        key = peer_id_key(endpoint.peer_id)
    except EndpointRejected:
        return None
    addrs: list[str] = []
    for text in endpoint.addrs:
        try:
            addr = _parse_multiaddr(text, key)
        except (_BadAddr, EndpointRejected):
            continue
        if _host_refusal(addr.host, allow_private) is None and addr.text not in addrs:
            addrs.append(addr.text)
    addrs.sort()
    del addrs[MAX_ADDRS:]
    while addrs and _encoded_size(endpoint.peer_id, addrs, signature) > MAX_ENDPOINT_BYTES:
        addrs.pop()
    return StoreEndpoint(endpoint.peer_id, tuple(addrs)) if addrs else None


def _encoded_size(peer_id: str, addrs: list[str], signature: bytes) -> int:
    return len(encode_endpoint(StoreEndpoint(peer_id, tuple(addrs)), signature))


# ---------------------------------------------------------------------------------- decoding


@dataclass(frozen=True)
class _Addr:
    """One parsed multiaddr: its text without ``/p2p/...`` and the host it names."""

    text: str
    host: ipaddress.IPv4Address | ipaddress.IPv6Address | str


@dataclass(frozen=True)
class Announcement:
    """What the bytes say, checked as far as needs neither the announcer nor a local setting."""

    peer_id: str
    key: bytes  # the peer id's multihash: the same peer in either text form
    addrs: tuple[_Addr, ...]
    dropped: tuple[str, ...]  # "<addr>: <reason>" for each address that does not parse
    signature: str  # as announced; decoded with the proof (an RSA key's would not fit anyway)


def read_announcement(data: bytes) -> Announcement:
    """Decodes announced bytes (shape, encoding, peer id, multiaddr syntax); EndpointRejected.
    The proof is not checked here (:func:`verified_announcement` does)."""
    value = _decode_json(data)
    peer_id, texts = value["peer_id"], value["addrs"]
    key = peer_id_key(peer_id)
    addrs: list[_Addr] = []
    dropped: list[str] = []
    for text in texts:
        try:
            addr = _parse_multiaddr(text, key)
        except _BadAddr as exc:
            dropped.append(f"{_shown(text)}: {exc}")
            continue
        if addr.text not in {a.text for a in addrs}:
            addrs.append(addr)
    if not addrs:
        raise EndpointRejected("no usable address (" + "; ".join(dropped) + ")")
    return Announcement(peer_id, key, tuple(addrs), tuple(dropped), value["signature"])


def verified_announcement(data: bytes, *, announcer: str, domain: EndpointDomain) -> Announcement:
    """:func:`read_announcement`, then the proof: the key the peer id inlines signed
    ``announcer`` on ``domain``. EndpointRejected, for a peer id whose key is only hashed
    (``Qm...``, an RSA key) too: nothing shows who holds it."""
    announcement = read_announcement(data)
    public_key = inline_public_key(announcement.key)
    if public_key is None:
        raise EndpointRejected(
            f"peer id {announcement.peer_id} names its key by hash (an RSA key), so its signature "
            "cannot be checked: only Ed25519 and Secp256k1 peer ids (12D3KooW..., 16Uiu2...) "
            "can announce"
        )
    try:
        signature = decode_signature(announcement.signature)
        verify_signature(*public_key, domain.message(announcer), signature)
    except ProofInvalid as invalid:
        raise EndpointRejected(invalid.reason) from None
    return announcement


def usable_endpoint(announcement: Announcement, *, allow_private: bool) -> StoreEndpoint:
    """The announcement's peer id and the addresses this node may dial; EndpointRejected when
    none is left."""
    refused = [
        f"{addr.text}: {reason}"
        for addr in announcement.addrs
        if (reason := _host_refusal(addr.host, allow_private)) is not None
    ]
    kept = tuple(
        a.text for a in announcement.addrs if _host_refusal(a.host, allow_private) is None
    )
    if not kept:
        reasons = [*announcement.dropped, *refused]
        raise EndpointRejected("no usable address (" + "; ".join(reasons) + ")")
    return StoreEndpoint(announcement.peer_id, kept)


def _decode_json(data: Any) -> dict[str, Any]:
    """The announcement's JSON, checked for shape and encoding."""
    if not isinstance(data, (bytes, bytearray, memoryview)):
        raise EndpointRejected(f"an endpoint is bytes, got {type(data).__name__}")
    data = bytes(data)
    if not data:
        raise EndpointRejected("empty (the peer withdrew its endpoint)")
    if len(data) > MAX_ENDPOINT_BYTES:
        raise EndpointRejected(f"{len(data)} bytes, over the {MAX_ENDPOINT_BYTES}-byte limit")
    try:
        value = json.loads(data.decode("utf-8"), parse_constant=_no_constant)
    except (UnicodeDecodeError, ValueError, RecursionError):
        raise EndpointRejected("not UTF-8 JSON") from None
    if isinstance(value, dict) and set(value) == _FIELDS - {"signature"}:
        raise EndpointRejected(
            "no signature (the format before endpoint proofs): the peer must announce again"
        )
    if not (
        isinstance(value, dict)
        and set(value) == _FIELDS
        and isinstance(value["peer_id"], str)
        and isinstance(value["signature"], str)
        and isinstance(value["addrs"], list)
        and all(isinstance(a, str) for a in value["addrs"])
    ):
        raise EndpointRejected('not {"addrs": [strings], "peer_id": string, "signature": string}')
    if not 1 <= len(value["addrs"]) <= MAX_ADDRS:
        raise EndpointRejected(f"{len(value['addrs'])} addresses; 1 to {MAX_ADDRS} are allowed")
    if _canonical(value) != data:
        raise EndpointRejected("not canonical JSON (sorted keys, no whitespace, UTF-8)")
    return value


def _no_constant(name: str) -> None:
    raise ValueError(f"{name} is not JSON")


def _shown(text: str) -> str:
    """Peer-supplied text fit for a log line: as is if printable ASCII, else escaped; cut."""
    cut = text[:MAX_ADDR_CHARS]
    return cut if cut.isascii() and cut.isprintable() else ascii(cut)


# ----------------------------------------------------------------------------------- peer ids


def peer_id_key(peer_id: str) -> bytes:
    """The multihash a libp2p peer id names: base58btc (``Qm...``, ``12D3Koo...``) or a CIDv1 with
    codec libp2p-key in base32 (``bafz...``). EndpointRejected for anything else."""
    if not 0 < len(peer_id) <= MAX_PEER_ID_CHARS:
        raise EndpointRejected(f"a peer id has 1 to {MAX_PEER_ID_CHARS} characters")
    shown = _shown(peer_id)
    if peer_id[0] in "1Q":
        multihash = _base58_decode(peer_id)
    elif peer_id[0] == "b":
        cid = _base32_decode(peer_id[1:])
        version, rest = _varint(cid) if cid else (None, b"")
        codec, multihash = _varint(rest) if version == 1 else (None, b"")
        if codec != _LIBP2P_KEY:
            raise EndpointRejected(f"{shown} is not a CIDv1 of a libp2p key")
    else:
        raise EndpointRejected(f"{shown} is not a base58btc or base32 CID peer id")
    if multihash is None or not _is_peer_multihash(multihash):
        raise EndpointRejected(f"{shown} is not a libp2p peer id")
    return multihash


def inline_public_key(multihash: bytes) -> tuple[int, bytes] | None:
    """(libp2p KeyType, public key bytes) of a peer id's multihash (:func:`peer_id_key`) that
    inlines its key; None for a hashed one (sha2-256: ``Qm...``), whose key it does not carry."""
    code, rest = _varint(multihash)
    _, digest = _varint(rest)
    if code != _IDENTITY or not _is_inline_key(digest):
        return None
    return digest[1], digest[4:]


def _is_peer_multihash(multihash: bytes) -> bool:
    code, rest = _varint(multihash)
    length, digest = _varint(rest)
    if code is None or length is None or len(digest) != length:
        return False
    if code == _SHA2_256:
        return length == 32
    return code == _IDENTITY and _is_inline_key(digest)


def _is_inline_key(data: bytes) -> bool:
    """A protobuf ``PublicKey{Type, Data}`` small enough to be inlined (Ed25519, Secp256k1)."""
    if len(data) < 4 or data[0] != 0x08 or data[2] != 0x12:
        return False
    expected = _INLINE_KEYS.get(data[1])
    return expected is not None and data[3] == expected and len(data) == 4 + expected


def _varint(data: bytes) -> tuple[int | None, bytes]:
    """(value, rest) of an unsigned LEB128 varint of at most 9 bytes; (None, b"") if malformed."""
    value = 0
    for index, byte in enumerate(data[:9]):
        value |= (byte & 0x7F) << (7 * index)
        if not byte & 0x80:
            return value, data[index + 1 :]
    return None, b""


def _base58_decode(text: str) -> bytes | None:
    if any(c not in _BASE58_INDEX for c in text):
        return None
    number = 0
    for char in text:
        number = number * 58 + _BASE58_INDEX[char]
    zeros = len(text) - len(text.lstrip("1"))
    body = number.to_bytes((number.bit_length() + 7) // 8, "big") if number else b""
    return b"\0" * zeros + body


def _base32_decode(text: str) -> bytes | None:
    """Multibase ``b``: RFC 4648 base32, lower case, no padding; None unless canonical."""
    if not text or text != text.lower() or not text.isascii() or "=" in text:
        return None
    try:
        data = base64.b32decode(text.upper() + "=" * (-len(text) % 8))
    except (binascii.Error, ValueError):
        return None
    if base64.b32encode(data).decode().lower().rstrip("=") != text:
        return None
    return data


# ---------------------------------------------------------------------------------- multiaddrs


class _BadAddr(Exception):
    """One address is unusable (internal: the address is dropped, the reason reported)."""


def _parse_multiaddr(text: str, key: bytes) -> _Addr:
    """``/ip4|ip6|dns|dns4|dns6/<host>/tcp|udp/<port>[/<flag>|/certhash/<mb>|/sni/<name>]...
    [/p2p/<id>]``; a ``/p2p/`` that names another peer id rejects the whole announcement."""
    if len(text) > MAX_ADDR_CHARS:
        raise _BadAddr(f"over {MAX_ADDR_CHARS} characters")
    parts = text.split("/")
    if len(parts) < 5 or parts[0] != "" or "" in parts[1:]:
        raise _BadAddr("not a multiaddr /<host protocol>/<host>/tcp|udp/<port>...")
    if len(parts) >= 7 and parts[-2] == "p2p":
        if _p2p_key(parts[-1]) != key:
            raise EndpointRejected(f"{_shown(text)} names another peer id than the announcement's")
        parts = parts[:-2]
    host = _host(parts[1], parts[2])
    if parts[3] not in ("tcp", "udp"):
        raise _BadAddr(f"transport {parts[3]!r} is not tcp or udp")
    if not parts[4].isdecimal() or not parts[4].isascii() or not 0 < int(parts[4]) < 65536:
        raise _BadAddr(f"port {parts[4]!r} is not 1-65535")
    if parts[4] != str(int(parts[4])):
        raise _BadAddr(f"port {parts[4]!r} has leading zeros")
    _check_suffix(parts[5:])
    return _Addr("/".join(parts), host)


def _p2p_key(peer_id: str) -> bytes:
    try:
        return peer_id_key(peer_id)
    except EndpointRejected as exc:
        raise _BadAddr(f"/p2p/: {exc.reason}") from None


def _host(protocol: str, value: str) -> ipaddress.IPv4Address | ipaddress.IPv6Address | str:
    try:
        if protocol == "ip4":
            return ipaddress.IPv4Address(value)
        if protocol == "ip6":
            return ipaddress.IPv6Address(value)
    except ValueError:
        raise _BadAddr(f"{value!r} is not an {protocol} address") from None
    if protocol not in ("dns", "dns4", "dns6"):
        raise _BadAddr(f"host protocol {protocol!r} is not ip4, ip6, dns, dns4 or dns6")
    name = value.lower().removesuffix(".")
    if len(name) > 253 or not all(_LABEL.match(label) for label in name.split(".")):
        raise _BadAddr(f"{value!r} is not a DNS name")
    try:
        return ipaddress.ip_address(name)  # resolvers answer an address literal with itself
    except ValueError:
        return name


def _check_suffix(parts: list[str]) -> None:
    index = 0
    while index < len(parts):
        protocol = parts[index]
        if protocol in _FLAGS:
            index += 1
        elif protocol == "certhash" and index + 1 < len(parts):
            if not _MULTIBASE_VALUE.match(parts[index + 1]):
                raise _BadAddr("certhash is not a multibase value")
            index += 2
        elif protocol == "sni" and index + 1 < len(parts):
            _host("dns", parts[index + 1])
            index += 2
        else:
            raise _BadAddr(f"protocol {protocol!r} is not supported here")


def _host_refusal(
    host: ipaddress.IPv4Address | ipaddress.IPv6Address | str, allow_private: bool
) -> str | None:
    """Why this node may not dial ``host``; None when it may."""
    if isinstance(host, str):
        if allow_private:
            return None
        top = host.rsplit(".", 1)[-1]
        if "." not in host or top.isdigit() or host.endswith(_PRIVATE_SUFFIXES):
            return "not a public DNS name"
        return None
    if isinstance(host, ipaddress.IPv6Address) and host.ipv4_mapped is not None:
        host = host.ipv4_mapped
    if host.is_unspecified or host.is_multicast:
        return "unspecified or multicast address"
    if allow_private or host.is_global:
        return None
    if host.is_loopback:
        return "loopback address"
    if host.is_link_local:
        return "link-local address"
    if host.is_private:
        return "private address"
    return "not a public address"

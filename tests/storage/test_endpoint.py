"""Store endpoints as announced on-chain: encoding, every rejection, the first-announcer rule."""

from __future__ import annotations

import base64

import pytest
from hypothesis import given, settings
from hypothesis import strategies as st

from node.storage.endpoint import (
    MAX_ENDPOINT_BYTES,
    AnnouncedEndpoints,
    EndpointRejected,
    StoreEndpoint,
    announceable,
    encode_endpoint,
    parse_endpoint,
    peer_id_key,
)

_BASE58 = "123456789ABCDEFGHJKLMNPQRSTUVWXYZabcdefghijkmnopqrstuvwxyz"

# The libp2p peer-id spec's example: one key in both text forms.
SPEC_QM = "QmYyQSo1c1Ym7orWxLYvCrM2EmxFTANf8wXmmE7DWjhx5N"
SPEC_CID = "bafzbeie5745rpv2m6tjyuugywy4d5ewrqgqqhfnf445he3omzpjbx5xqxe"
PUBLIC = "/ip4/93.184.216.34/tcp/4001"
PUBLIC_QUIC = "/ip4/93.184.216.34/udp/4001/quic-v1"


def base58(data: bytes) -> str:
    number = int.from_bytes(data, "big")
    text = ""
    while number:
        number, digit = divmod(number, 58)
        text = _BASE58[digit] + text
    return "1" * (len(data) - len(data.lstrip(b"\0"))) + text


def ed25519_peer_id(seed: int) -> str:
    """A well-formed Ed25519 peer id (identity multihash of the protobuf public key)."""
    return base58(bytes([0x00, 0x24, 0x08, 0x01, 0x12, 0x20]) + bytes([seed]) * 32)


ALICE_ID = ed25519_peer_id(1)
BOB_ID = ed25519_peer_id(2)
ALICE = "0x70997970C51812dc3A010C7d01b50e0d17dc79C8"
BOB = "0x3C44CdDdB6a900fa2b585dd299e03d12FA4293BC"


def announced(peer_id: str, *addrs: str) -> bytes:
    return encode_endpoint(StoreEndpoint(peer_id, addrs))


def rejected(data: bytes, *, allow_private: bool = False) -> str:
    with pytest.raises(EndpointRejected) as caught:
        parse_endpoint(data, allow_private=allow_private)
    return caught.value.reason


# ------------------------------------------------------------------------------- accepted


def test_the_encoding_is_canonical_json_and_round_trips() -> None:
    endpoint = StoreEndpoint(ALICE_ID, (PUBLIC, PUBLIC_QUIC))
    data = encode_endpoint(endpoint)
    assert data == (
        b'{"addrs":["/ip4/93.184.216.34/tcp/4001","/ip4/93.184.216.34/udp/4001/quic-v1"],'
        b'"peer_id":"' + ALICE_ID.encode() + b'"}'
    )
    assert parse_endpoint(data, allow_private=False) == endpoint


def test_peer_ids_in_every_supported_form() -> None:
    real = "12D3KooWD3eckifWpRn9wQpMG9R9hX3sD158z7EqHWmweQAJU5SA"
    secp256k1 = base58(bytes([0x00, 0x25, 0x08, 0x02, 0x12, 0x21]) + b"\x02" + b"\x07" * 32)
    assert secp256k1.startswith("16Uiu2")
    for peer_id in (real, SPEC_QM, SPEC_CID, secp256k1):
        assert parse_endpoint(announced(peer_id, PUBLIC), allow_private=False).peer_id == peer_id
    assert peer_id_key(SPEC_QM) == peer_id_key(SPEC_CID)


def test_public_hosts_of_every_kind_are_kept_in_order_without_duplicates() -> None:
    addrs = (
        "/ip6/2606:4700:4700::1111/udp/4001/quic-v1/webtransport",
        "/dns4/node.example.org/tcp/443/tls/sni/node.example.org/ws",
        "/dns/node.example.org/udp/4001/webrtc-direct/certhash/"
        "uEiDDq4_xNyDorZBH3TlGazyJdOWSwvo4PUo5YHFMrvDE8g",
        PUBLIC,
        PUBLIC,
    )
    endpoint = parse_endpoint(announced(ALICE_ID, *addrs), allow_private=False)
    assert endpoint.addrs == addrs[:4]


def test_a_p2p_suffix_naming_the_same_peer_is_stripped_in_either_form() -> None:
    data = announced(SPEC_QM, f"{PUBLIC}/p2p/{SPEC_CID}", f"{PUBLIC_QUIC}/p2p/{SPEC_QM}")
    assert parse_endpoint(data, allow_private=False).addrs == (PUBLIC, PUBLIC_QUIC)


# ------------------------------------------------------------------------ whole rejections


@pytest.mark.parametrize(
    ("data", "reason"),
    [
        (b"\xff\xfe", "not UTF-8 JSON"),
        (b"hello", "not UTF-8 JSON"),
        (b'{"addrs":[NaN],"peer_id":"x"}', "not UTF-8 JSON"),
        (b"[]", "not {"),
        (b'{"addrs":"/ip4/1.1.1.1/tcp/1","peer_id":"x"}', "not {"),
        (b'{"addrs":[1],"peer_id":"x"}', "not {"),
        (b'{"addrs":[],"extra":1,"peer_id":"x"}', "not {"),
        (b'{"addrs":[],"peer_id":"' + ALICE_ID.encode() + b'"}', "0 addresses"),
        (b'{"peer_id":"' + ALICE_ID.encode() + b'","addrs":["' + PUBLIC.encode() + b'"]}',
         "not canonical"),
        (b'{"addrs": ["' + PUBLIC.encode() + b'"], "peer_id": "' + ALICE_ID.encode() + b'"}',
         "not canonical"),
        (b"", "empty"),
    ],
)
def test_unparsable_or_misshapen_bytes_are_rejected(data: bytes, reason: str) -> None:
    assert reason in rejected(data)


def test_oversized_is_rejected_before_it_is_read() -> None:
    data = announced(ALICE_ID, PUBLIC, PUBLIC_QUIC)
    padded = data[:-2] + b" " * (MAX_ENDPOINT_BYTES + 1 - len(data)) + data[-2:]
    assert len(padded) == MAX_ENDPOINT_BYTES + 1
    assert "513 bytes, over the 512-byte limit" in rejected(padded)


def test_more_than_eight_addresses_are_rejected() -> None:
    addrs = [f"/ip4/93.184.216.{i}/tcp/4001" for i in range(9)]
    assert "9 addresses" in rejected(announced(ALICE_ID, *addrs))
    assert len(parse_endpoint(announced(ALICE_ID, *addrs[:8]), allow_private=False).addrs) == 8


@pytest.mark.parametrize(
    "peer_id",
    [
        "",
        "QmNotAPeerId",  # base58 of no multihash
        "12D3KooWD3eckifWpRn9wQpMG9R9hX3sD158z7EqHWmweQAJU5S",  # one character short
        "0OIl" * 10,  # not base58
        base58(bytes([0x12, 0x20]) + b"\x01" * 31),  # sha2-256 multihash of 31 bytes
        base58(bytes([0x13, 0x20]) + b"\x01" * 32),  # sha2-512 code, not a peer id hash
        base58(bytes([0x00, 0x24, 0x08, 0x00, 0x12, 0x20]) + b"\x01" * 32),  # RSA key inlined
        base58(bytes([0x00, 0x23, 0x08, 0x01, 0x12, 0x1F]) + b"\x01" * 31),  # short Ed25519 key
        "bafkreihdwdcefgh4dqkjv67uzcmw7ojee6xedzdetojuzjevtenxquvyku",  # CID of a raw block
        SPEC_CID.upper(),  # base32 upper case is another multibase
        "k51qzi5uqu5dlvj2baxnqndepeb86cbk3ng7n3i46uzyxzyqj2xjonzllnv0v8",  # base36 CID
        "Qm" + "1" * 200,
        "Qm\nforged log line",
    ],
)
def test_a_bad_peer_id_is_rejected(peer_id: str) -> None:
    reason = rejected(announced(peer_id, PUBLIC))
    assert "peer id" in reason or "libp2p" in reason
    assert "\n" not in reason


def test_an_address_naming_another_peer_id_rejects_the_whole_endpoint() -> None:
    data = announced(ALICE_ID, PUBLIC, f"{PUBLIC_QUIC}/p2p/{BOB_ID}")
    assert "names another peer id" in rejected(data)
    assert "names another peer id" in rejected(data, allow_private=True)


# ---------------------------------------------------------------------- per-address drops


@pytest.mark.parametrize(
    "addr",
    [
        "/ip4/300.1.1.1/tcp/4001",
        "/ip4/93.184.216.034/tcp/4001",
        "/ip4/93.184.216.34/tcp/0",
        "/ip4/93.184.216.34/tcp/65536",
        "/ip4/93.184.216.34/tcp/04001",
        "/ip4/93.184.216.34/tcp/٤٠٠١",
        "/ip4/93.184.216.34/sctp/4001",
        "/ip4/93.184.216.34/tcp/4001/p2p-circuit",
        "/ip4/93.184.216.34/tcp/4001/",
        "ip4/93.184.216.34/tcp/4001",
        "/unix/tmp/kubo.sock",
        "/dnsaddr/bootstrap.libp2p.io",
        "/dns4/-bad-.example.org/tcp/4001",
        "/ip6/2606:4700:4700::1111/udp/4001/quic-v1/certhash/!!",
        "/ip4/93.184.216.34/tcp/4001/p2p/QmNotAPeerId",
        "/dns4/" + "a" * 120 + ".org/tcp/4001",  # over 128 characters
        "",
    ],
)
def test_a_malformed_address_is_dropped_and_alone_rejects(addr: str) -> None:
    reason = rejected(announced(ALICE_ID, addr))
    assert reason.startswith("no usable address")
    assert parse_endpoint(announced(ALICE_ID, addr, PUBLIC), allow_private=False).addrs == (
        PUBLIC,
    )


@pytest.mark.parametrize(
    ("addr", "why"),
    [
        ("/ip4/10.1.2.3/tcp/4001", "private address"),
        ("/ip4/192.168.1.20/udp/4001/quic-v1", "private address"),
        ("/ip4/127.0.0.1/tcp/4001", "loopback address"),
        ("/ip6/::1/tcp/4001", "loopback address"),
        ("/ip4/169.254.10.1/tcp/4001", "link-local address"),
        ("/ip6/fe80::1/tcp/4001", "link-local address"),
        ("/ip6/::ffff:10.0.0.1/tcp/4001", "private address"),
        ("/ip4/100.64.0.1/tcp/4001", "not a public address"),  # carrier-grade NAT
        ("/dns4/localhost/tcp/4001", "not a public DNS name"),
        ("/dns4/kubo.local/tcp/4001", "not a public DNS name"),
        ("/dns4/10.0.0.1/tcp/4001", "private address"),  # an address literal as a name
        ("/dns4/127.1/tcp/4001", "not a public DNS name"),
    ],
)
def test_a_private_address_counts_only_with_allow_private(addr: str, why: str) -> None:
    reason = rejected(announced(ALICE_ID, addr))
    assert why in reason and reason.startswith("no usable address")
    assert parse_endpoint(announced(ALICE_ID, addr, PUBLIC), allow_private=False).addrs == (
        PUBLIC,
    )
    assert parse_endpoint(announced(ALICE_ID, addr), allow_private=True).addrs == (addr,)


@pytest.mark.parametrize(
    "addr", ["/ip4/0.0.0.0/tcp/4001", "/ip6/::/tcp/4001", "/ip4/224.0.0.1/udp/1"]
)
def test_unspecified_and_multicast_addresses_are_never_dialled(addr: str) -> None:
    assert "unspecified or multicast" in rejected(announced(ALICE_ID, addr), allow_private=True)


# -------------------------------------------------------------------- the chain's record


def test_the_first_announcer_keeps_its_peer_id() -> None:
    book = AnnouncedEndpoints(allow_private=False)
    assert book.apply(ALICE, announced(SPEC_QM, PUBLIC)) == StoreEndpoint(SPEC_QM, (PUBLIC,))
    with pytest.raises(EndpointRejected, match=f"announced first by {ALICE}"):
        book.apply(BOB, announced(SPEC_CID, PUBLIC_QUIC))  # the same key in its CID form
    assert book.endpoint(BOB) is None
    assert book.owner(SPEC_CID) == ALICE
    # The owner announces again (new ports): still its own.
    assert book.apply(ALICE, announced(SPEC_QM, PUBLIC_QUIC)).addrs == (PUBLIC_QUIC,)
    # Moving to a new peer id does not free the old one.
    book.apply(ALICE, announced(ALICE_ID, PUBLIC))
    with pytest.raises(EndpointRejected, match="announced first"):
        book.apply(BOB, announced(SPEC_QM, PUBLIC))


@pytest.mark.parametrize("allow_private", [False, True])
def test_ownership_does_not_depend_on_the_local_setting(allow_private: bool) -> None:
    """An announcement with only private addresses still claims its peer id, on every node."""
    book = AnnouncedEndpoints(allow_private=allow_private)
    try:
        book.apply(ALICE, announced(ALICE_ID, "/ip4/10.0.0.5/tcp/4001"))
    except EndpointRejected:
        assert not allow_private
    with pytest.raises(EndpointRejected, match="announced first"):
        book.apply(BOB, announced(ALICE_ID, PUBLIC))


def test_a_rejected_announcement_does_not_claim_the_peer_id() -> None:
    book = AnnouncedEndpoints(allow_private=False)
    with pytest.raises(EndpointRejected):
        book.apply(BOB, announced(ALICE_ID, PUBLIC, f"{PUBLIC}/p2p/{BOB_ID}"))
    assert book.apply(ALICE, announced(ALICE_ID, PUBLIC)) is not None
    assert book.owner(ALICE_ID) == ALICE


def test_the_latest_announcement_replaces_the_previous_one() -> None:
    book = AnnouncedEndpoints(allow_private=False)
    first = announced(ALICE_ID, PUBLIC)
    book.apply(ALICE, first)
    assert book.latest(ALICE) == first and book.endpoint(ALICE) is not None
    with pytest.raises(EndpointRejected):
        book.apply(ALICE, b"garbage")
    assert book.endpoint(ALICE) is None and book.latest(ALICE) == b"garbage"
    book.apply(ALICE, first)
    assert book.apply(ALICE, b"") is None
    assert book.endpoint(ALICE) is None and book.latest(ALICE) == b""
    assert book.latest(BOB) is None and book.owner("not a peer id") is None


# ---------------------------------------------------------------------- this node's own


def test_announceable_keeps_what_peers_accept_within_the_limits() -> None:
    own = StoreEndpoint(
        ALICE_ID,
        (
            "/ip4/127.0.0.1/tcp/4001",
            "/ip4/10.0.0.2/tcp/4001",
            *(f"/ip4/93.184.216.{i}/udp/4001/quic-v1/webtransport" for i in range(12)),
        ),
    )
    public = announceable(own, allow_private=False)
    assert public is not None
    data = encode_endpoint(public)
    assert len(data) <= MAX_ENDPOINT_BYTES and 1 <= len(public.addrs) <= 8
    assert public.addrs[0] == "/ip4/93.184.216.0/udp/4001/quic-v1/webtransport"
    assert parse_endpoint(data, allow_private=False) == public
    local = announceable(own, allow_private=True)
    assert local is not None and set(own.addrs[:2]) <= set(local.addrs)
    shuffled = StoreEndpoint(ALICE_ID, tuple(reversed(own.addrs)))
    assert announceable(shuffled, allow_private=False) == public  # the set decides, not the order
    loopback = StoreEndpoint(ALICE_ID, ("/ip4/127.0.0.1/tcp/1",))
    assert announceable(loopback, allow_private=False) is None
    assert announceable(StoreEndpoint("bad", (PUBLIC,)), allow_private=True) is None


# ------------------------------------------------------------------------- never raises


@settings(max_examples=300, deadline=None)
@given(st.binary(max_size=600))
def test_any_bytes_parse_or_are_rejected(data: bytes) -> None:
    _parses_or_is_rejected(data)


_addr_part = st.sampled_from(
    ["ip4", "ip6", "dns4", "tcp", "udp", "p2p", "quic-v1", "certhash", "1.2.3.4", "::1", "4001",
     "0", "", ALICE_ID, BOB_ID, "x" * 70, "é", "\n"]
)


@settings(max_examples=300, deadline=None)
@given(
    st.lists(st.lists(_addr_part, max_size=8).map(lambda p: "/" + "/".join(p)), max_size=9),
    st.sampled_from([ALICE_ID, BOB_ID, SPEC_CID, "", "1", "b", "Q" * 50, "\x00"]),
)
def test_any_announcement_shape_parses_or_is_rejected(addrs: list[str], peer_id: str) -> None:
    _parses_or_is_rejected(announced(peer_id, *addrs))


def _parses_or_is_rejected(data: bytes) -> None:
    book = AnnouncedEndpoints(allow_private=False)
    for allow_private in (False, True):
        try:
            endpoint = parse_endpoint(data, allow_private=allow_private)
        except EndpointRejected as exc:
            assert exc.reason and "\n" not in exc.reason
        else:
            assert endpoint.addrs and len(endpoint.addrs) <= 8
    try:
        book.apply(ALICE, data)
    except EndpointRejected:
        pass


def test_base32_helper_matches_the_spec_vector() -> None:
    """The spec's CID is CIDv1 (0x01), libp2p-key (0x72), sha2-256 multihash of the Qm form."""
    raw = base64.b32decode(SPEC_CID[1:].upper() + "=" * (-len(SPEC_CID[1:]) % 8))
    assert raw[:2] == b"\x01\x72" and base58(raw[2:]) == SPEC_QM

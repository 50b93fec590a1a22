"""Store endpoints as announced on-chain: encoding, every rejection, the proof of the libp2p key,
which announcement counts (node.storage.endpoint, node.storage.endpoint_proof,
node.storage.announced). Keys are real (tests/storage/libp2p_keys.py); Kubo's own signatures are
tests/storage/test_endpoint_kubo.py."""

from __future__ import annotations

import base64

import pytest
from hypothesis import given, settings
from hypothesis import strategies as st

from node.storage.announced import AnnouncedEndpoints
from node.storage.endpoint import (
    MAX_ENDPOINT_BYTES,
    EndpointRejected,
    StoreEndpoint,
    announceable,
    encode_endpoint,
    parse_endpoint,
    peer_id_key,
    read_announcement,
)
from node.storage.endpoint_proof import EndpointDomain, decode_signature, encode_signature
from tests.storage.libp2p_keys import DOMAIN, Libp2pKey, base58, cid_form

# The libp2p peer-id spec's example: one key in both text forms.
SPEC_QM = "QmYyQSo1c1Ym7orWxLYvCrM2EmxFTANf8wXmmE7DWjhx5N"
SPEC_CID = "bafzbeie5745rpv2m6tjyuugywy4d5ewrqgqqhfnf445he3omzpjbx5xqxe"
PUBLIC = "/ip4/93.184.216.34/tcp/4001"
PUBLIC_QUIC = "/ip4/93.184.216.34/udp/4001/quic-v1"

ALICE_KEY, BOB_KEY = Libp2pKey.ed25519("alice"), Libp2pKey.ed25519("bob")
ALICE_ID, BOB_ID = ALICE_KEY.peer_id, BOB_KEY.peer_id
ALICE = "0x70997970C51812dc3A010C7d01b50e0d17dc79C8"
BOB = "0x3C44CdDdB6a900fa2b585dd299e03d12FA4293BC"
CAROL = "0x90F79bf6EB2c4f870365E785982E1f101E93b906"
#: A well-formed signature that proves nothing (for the checks that come before the proof's).
NO_PROOF = b"\x00" * 64


def ed25519_peer_id(seed: int) -> str:
    """A well-formed Ed25519 peer id of no known private key."""
    return base58(bytes([0x00, 0x24, 0x08, 0x01, 0x12, 0x20]) + bytes([seed]) * 32)


def announced(peer_id: str, *addrs: str, signature: bytes = NO_PROOF) -> bytes:
    return encode_endpoint(StoreEndpoint(peer_id, addrs), signature)


def alice(*addrs: str) -> bytes:
    """ALICE's announcement of her own key's peer id at ``addrs``."""
    return ALICE_KEY.announcement(ALICE, *addrs)


def parsed(data: bytes, *, allow_private: bool = False, by: str = ALICE) -> StoreEndpoint:
    return parse_endpoint(data, announcer=by, domain=DOMAIN, allow_private=allow_private)


def rejected(data: bytes, *, allow_private: bool = False, by: str = ALICE) -> str:
    with pytest.raises(EndpointRejected) as caught:
        parsed(data, allow_private=allow_private, by=by)
    return caught.value.reason


def book(*, allow_private: bool = False) -> AnnouncedEndpoints:
    return AnnouncedEndpoints(DOMAIN, allow_private=allow_private)


# ------------------------------------------------------------------------------- accepted


def test_the_encoding_is_canonical_json_and_round_trips() -> None:
    endpoint = StoreEndpoint(ALICE_ID, (PUBLIC, PUBLIC_QUIC))
    signature = ALICE_KEY.proof(ALICE)
    data = encode_endpoint(endpoint, signature)
    assert data == (
        b'{"addrs":["/ip4/93.184.216.34/tcp/4001","/ip4/93.184.216.34/udp/4001/quic-v1"],'
        b'"peer_id":"' + ALICE_ID.encode() + b'","signature":"'
        + base64.urlsafe_b64encode(signature).rstrip(b"=") + b'"}'
    )
    assert parsed(data) == endpoint
    assert decode_signature(read_announcement(data).signature) == signature


def test_peer_ids_in_every_supported_form() -> None:
    secp256k1 = Libp2pKey.secp256k1("alice")
    assert secp256k1.peer_id.startswith("16Uiu2") and ALICE_ID.startswith("12D3KooW")
    for key in (ALICE_KEY, secp256k1):
        for peer_id in (key.peer_id, cid_form(key.multihash)):
            data = announced(peer_id, PUBLIC, signature=key.proof(ALICE))
            assert parsed(data).peer_id == peer_id
    for peer_id in (SPEC_QM, SPEC_CID):  # well formed, but naming a key no proof can check
        assert read_announcement(announced(peer_id, PUBLIC)).peer_id == peer_id
    assert peer_id_key(SPEC_QM) == peer_id_key(SPEC_CID)
    assert peer_id_key(ALICE_ID) == peer_id_key(cid_form(ALICE_KEY.multihash))


def test_public_hosts_of_every_kind_are_kept_in_order_without_duplicates() -> None:
    addrs = (
        "/ip6/2606:4700:4700::1111/udp/4001/quic-v1/webtransport",
        "/dns4/node.example.org/tcp/443/tls/sni/node.example.org/ws",
        "/dns/node.example.org/udp/4001/webrtc-direct/certhash/"
        "uEiDDq4_xNyDorZBH3TlGazyJdOWSwvo4PUo5YHFMrvDE8g",
        PUBLIC,
        PUBLIC,
    )
    assert parsed(alice(*addrs)).addrs == addrs[:4]


def test_a_p2p_suffix_naming_the_same_peer_is_stripped_in_either_form() -> None:
    cid = cid_form(ALICE_KEY.multihash)
    data = alice(f"{PUBLIC}/p2p/{cid}", f"{PUBLIC_QUIC}/p2p/{ALICE_ID}")
    assert parsed(data).addrs == (PUBLIC, PUBLIC_QUIC)


# -------------------------------------------------------------------------------- the proof


def test_the_message_is_the_documented_text() -> None:
    assert DOMAIN.message(ALICE) == (
        b"swarm.endpoint/1\n"
        b"chain_id=31337\n"
        b"coordinator=0x5fbdb2315678afecb367f032d93f642f64180aa3\n"
        b"peer=0x70997970c51812dc3a010c7d01b50e0d17dc79c8"
    )
    assert DOMAIN.message(ALICE.lower()) == DOMAIN.message(ALICE)  # the address's case is moot


@pytest.mark.parametrize(
    "signed_for",
    [
        (BOB, DOMAIN),  # another announcer
        (ALICE, EndpointDomain(1, DOMAIN.coordinator)),  # another chain
        (ALICE, EndpointDomain(31337, "0x" + "00" * 19 + "01")),  # another coordinator
    ],
)
def test_a_proof_for_another_announcer_chain_or_coordinator_fails(
    signed_for: tuple[str, EndpointDomain],
) -> None:
    announcer, domain = signed_for
    data = ALICE_KEY.announcement(announcer, PUBLIC, domain=domain)
    assert "signature is not the peer id's key" in rejected(data, by=ALICE)


@pytest.mark.parametrize("key", [ALICE_KEY, Libp2pKey.secp256k1("alice")])
def test_tampered_signature_bytes_fail(key: Libp2pKey) -> None:
    signature = key.proof(ALICE)
    for index in (0, len(signature) // 2, len(signature) - 1):
        tampered = bytearray(signature)
        tampered[index] ^= 0x01
        data = announced(key.peer_id, PUBLIC, signature=bytes(tampered))
        assert "signature is not the peer id's key" in rejected(data)
    for cut in (signature[:-1], signature + b"\x00", b"\x00"):
        assert "signature is not the peer id's key" in rejected(
            announced(key.peer_id, PUBLIC, signature=cut)
        )


def test_another_key_s_signature_fails() -> None:
    data = announced(ALICE_ID, PUBLIC, signature=BOB_KEY.proof(ALICE))
    assert "signature is not the peer id's key" in rejected(data)


@pytest.mark.parametrize("peer_id", [SPEC_QM, SPEC_CID])
def test_a_peer_id_whose_key_is_hashed_is_refused(peer_id: str) -> None:
    reason = rejected(announced(peer_id, PUBLIC))
    assert "names its key by hash (an RSA key)" in reason and "cannot be checked" in reason


@pytest.mark.parametrize(
    ("text", "why"),
    [
        ("", "1 to 100 base64url"),
        ("A" * 101, "1 to 100 base64url"),
        ("AAAA====", "1 to 100 base64url"),  # padding
        ("AA+/", "1 to 100 base64url"),  # base64, not base64url
        ("AB", "not canonical base64url"),  # spare bits set
        ("A", "not base64url"),  # no whole byte
    ],
)
def test_a_signature_that_is_not_canonical_base64url_is_rejected(text: str, why: str) -> None:
    data = (
        b'{"addrs":["' + PUBLIC.encode() + b'"],"peer_id":"' + ALICE_ID.encode()
        + b'","signature":"' + text.encode() + b'"}'
    )
    assert why in rejected(data)


def test_signature_text_round_trips() -> None:
    for size in range(1, 76):  # 75 bytes make the longest text allowed, 100 characters
        data = bytes(range(size))
        assert decode_signature(encode_signature(data)) == data


def test_a_bad_announcer_address_is_a_rejection_not_a_crash() -> None:
    for announcer in ("", "0x1234", "alice", "0x" + "g" * 40):
        assert "not a 20-byte hex address" in rejected(alice(PUBLIC), by=announcer)


# ------------------------------------------------------------------------ whole rejections


@pytest.mark.parametrize(
    ("data", "reason"),
    [
        (b"\xff\xfe", "not UTF-8 JSON"),
        (b"hello", "not UTF-8 JSON"),
        (b'{"addrs":[NaN],"peer_id":"x","signature":"AA"}', "not UTF-8 JSON"),
        (b"[]", "not {"),
        (b'{"addrs":"/ip4/1.1.1.1/tcp/1","peer_id":"x","signature":"AA"}', "not {"),
        (b'{"addrs":[1],"peer_id":"x","signature":"AA"}', "not {"),
        (b'{"addrs":["/ip4/1.1.1.1/tcp/1"],"peer_id":"x","signature":1}', "not {"),
        (b'{"addrs":[],"extra":1,"peer_id":"x","signature":"AA"}', "not {"),
        (b'{"addrs":[],"peer_id":"' + ALICE_ID.encode() + b'","signature":"AA"}', "0 addresses"),
        (b'{"addrs":["' + PUBLIC.encode() + b'"],"peer_id":"' + ALICE_ID.encode() + b'"}',
         "no signature (the format before endpoint proofs)"),
        (b'{"peer_id":"' + ALICE_ID.encode() + b'","addrs":["' + PUBLIC.encode()
         + b'"],"signature":"AA"}', "not canonical"),
        (b'{"addrs": ["' + PUBLIC.encode() + b'"], "peer_id": "' + ALICE_ID.encode()
         + b'", "signature": "AA"}', "not canonical"),
        (b"", "empty"),
    ],
)
def test_unparsable_or_misshapen_bytes_are_rejected(data: bytes, reason: str) -> None:
    assert reason in rejected(data)


def test_oversized_is_rejected_before_it_is_read() -> None:
    data = alice(PUBLIC, PUBLIC_QUIC)
    padded = data[:-2] + b" " * (MAX_ENDPOINT_BYTES + 1 - len(data)) + data[-2:]
    assert len(padded) == MAX_ENDPOINT_BYTES + 1
    assert "513 bytes, over the 512-byte limit" in rejected(padded)


def test_more_than_eight_addresses_are_rejected() -> None:
    addrs = [f"/ip4/93.184.216.{i}/tcp/4001" for i in range(9)]
    assert "9 addresses" in rejected(alice(*addrs))
    assert len(parsed(alice(*addrs[:8])).addrs) == 8


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


def test_an_inlined_key_that_is_no_curve_point_is_rejected() -> None:
    for peer_id in (ed25519_peer_id(1), ed25519_peer_id(2), ed25519_peer_id(0xFF)):
        assert "signature is not the peer id's key" in rejected(announced(peer_id, PUBLIC))


def test_an_address_naming_another_peer_id_rejects_the_whole_endpoint() -> None:
    data = alice(PUBLIC, f"{PUBLIC_QUIC}/p2p/{BOB_ID}")
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
    reason = rejected(alice(addr))
    assert reason.startswith("no usable address")
    assert parsed(alice(addr, PUBLIC)).addrs == (PUBLIC,)


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
    reason = rejected(alice(addr))
    assert why in reason and reason.startswith("no usable address")
    assert parsed(alice(addr, PUBLIC)).addrs == (PUBLIC,)
    assert parsed(alice(addr), allow_private=True).addrs == (addr,)


@pytest.mark.parametrize(
    "addr", ["/ip4/0.0.0.0/tcp/4001", "/ip6/::/tcp/4001", "/ip4/224.0.0.1/udp/1"]
)
def test_unspecified_and_multicast_addresses_are_never_dialled(addr: str) -> None:
    assert "unspecified or multicast" in rejected(alice(addr), allow_private=True)


# -------------------------------------------------------------------- the chain's record


def test_a_squatter_without_the_key_is_rejected_and_the_victim_wins() -> None:
    """The attack the proof stops: BOB announces ALICE's peer id first, in every way he can
    without her key (no proof, his own key's, her announcement's proof copied)."""
    record = book()
    victim = alice(PUBLIC)
    squats = [
        announced(ALICE_ID, PUBLIC_QUIC),
        announced(ALICE_ID, PUBLIC_QUIC, signature=BOB_KEY.proof(BOB)),
        victim,  # copied from ALICE's pending transaction: signed for ALICE, not BOB
        announced(cid_form(ALICE_KEY.multihash), PUBLIC, signature=ALICE_KEY.proof(ALICE)),
    ]
    for squat in squats:
        with pytest.raises(EndpointRejected, match="signature is not the peer id's key"):
            record.apply(BOB, squat)
        assert record.holder(ALICE_ID) is None and record.endpoint(BOB) is None
    assert record.apply(ALICE, victim) == StoreEndpoint(ALICE_ID, (PUBLIC,))
    assert record.holder(ALICE_ID) == ALICE
    assert record.holder(cid_form(ALICE_KEY.multihash)) == ALICE
    with pytest.raises(EndpointRejected, match="signature is not the peer id's key"):
        record.apply(BOB, victim)
    assert record.endpoint(ALICE) == StoreEndpoint(ALICE_ID, (PUBLIC,))


def test_the_first_holder_keeps_its_peer_id_until_it_releases_it() -> None:
    """Two addresses with valid proofs for one key (one operator's two nodes on one Kubo): the
    first keeps it; announcing another peer id, or nothing, releases it."""
    record = book()
    assert record.apply(ALICE, alice(PUBLIC)) is not None
    with pytest.raises(EndpointRejected, match=f"is held by {ALICE}, which announced it first"):
        record.apply(BOB, ALICE_KEY.announcement(BOB, PUBLIC_QUIC))
    assert record.endpoint(BOB) is None and record.holder(ALICE_ID) == ALICE
    assert "is held by" in (record.refusal(BOB) or "")
    # The holder announces again (new ports): still its own.
    assert record.apply(ALICE, alice(PUBLIC_QUIC)).addrs == (PUBLIC_QUIC,)
    # Moving to another peer id releases the old one.
    record.apply(ALICE, BOB_KEY.announcement(ALICE, PUBLIC))
    assert record.holder(ALICE_ID) is None and record.holder(BOB_ID) == ALICE
    assert record.apply(BOB, ALICE_KEY.announcement(BOB, PUBLIC)) is not None
    assert record.holder(ALICE_ID) == BOB and record.refusal(BOB) is None
    # Empty bytes and rejected bytes release too.
    record.apply(BOB, b"")
    assert record.holder(ALICE_ID) is None
    record.apply(CAROL, ALICE_KEY.announcement(CAROL, PUBLIC))
    with pytest.raises(EndpointRejected):
        record.apply(CAROL, b"garbage")
    assert record.holder(ALICE_ID) is None


def test_an_exit_releases_the_peer_id_and_the_exited_endpoint_stays_until_taken() -> None:
    record = book()
    record.apply(ALICE, alice(PUBLIC))
    with pytest.raises(EndpointRejected, match="is held by"):
        record.apply(BOB, ALICE_KEY.announcement(BOB, PUBLIC_QUIC))
    record.exited(ALICE)
    assert record.holder(ALICE_ID) is None
    assert record.endpoint(ALICE) == StoreEndpoint(ALICE_ID, (PUBLIC,))  # its last batches
    assert record.apply(BOB, ALICE_KEY.announcement(BOB, PUBLIC_QUIC)) is not None
    assert record.holder(ALICE_ID) == BOB
    assert record.endpoint(ALICE) is None  # one address per peer id
    record.exited(CAROL)  # an exit of a peer that holds nothing changes nothing
    assert record.holder(ALICE_ID) == BOB


@pytest.mark.parametrize("allow_private", [False, True])
def test_holding_does_not_depend_on_the_local_setting(allow_private: bool) -> None:
    """An announcement with only private addresses still holds its peer id, on every node."""
    record = book(allow_private=allow_private)
    try:
        record.apply(ALICE, alice("/ip4/10.0.0.5/tcp/4001"))
    except EndpointRejected:
        assert not allow_private
    assert record.holder(ALICE_ID) == ALICE
    with pytest.raises(EndpointRejected, match="is held by"):
        record.apply(BOB, ALICE_KEY.announcement(BOB, PUBLIC))


def test_a_rejected_announcement_does_not_claim_the_peer_id() -> None:
    record = book()
    with pytest.raises(EndpointRejected):
        record.apply(BOB, ALICE_KEY.announcement(BOB, PUBLIC, f"{PUBLIC}/p2p/{BOB_ID}"))
    assert record.apply(ALICE, alice(PUBLIC)) is not None
    assert record.holder(ALICE_ID) == ALICE


def test_the_latest_announcement_replaces_the_previous_one() -> None:
    record = book()
    first = alice(PUBLIC)
    record.apply(ALICE, first)
    assert record.latest(ALICE) == first and record.endpoint(ALICE) is not None
    with pytest.raises(EndpointRejected):
        record.apply(ALICE, b"garbage")
    assert record.endpoint(ALICE) is None and record.latest(ALICE) == b"garbage"
    assert record.refusal(ALICE) == "not UTF-8 JSON"
    record.apply(ALICE, first)
    assert record.refusal(ALICE) is None
    assert record.apply(ALICE, b"") is None
    assert record.endpoint(ALICE) is None and record.latest(ALICE) == b""
    assert record.latest(BOB) is None and record.holder("not a peer id") is None


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
    signature = ALICE_KEY.proof(ALICE)
    public = announceable(own, signature, allow_private=False)
    assert public is not None
    data = encode_endpoint(public, signature)
    assert len(data) <= MAX_ENDPOINT_BYTES and 1 <= len(public.addrs) <= 8
    assert public.addrs[0] == "/ip4/93.184.216.0/udp/4001/quic-v1/webtransport"
    assert parsed(data) == public
    local = announceable(own, signature, allow_private=True)
    assert local is not None and set(own.addrs[:2]) <= set(local.addrs)
    shuffled = StoreEndpoint(ALICE_ID, tuple(reversed(own.addrs)))
    assert announceable(shuffled, signature, allow_private=False) == public  # the set decides
    loopback = StoreEndpoint(ALICE_ID, ("/ip4/127.0.0.1/tcp/1",))
    assert announceable(loopback, signature, allow_private=False) is None
    assert announceable(StoreEndpoint("bad", (PUBLIC,)), signature, allow_private=True) is None


def test_a_signed_announcement_of_a_typical_daemon_fits() -> None:
    """What `ipfs id` lists on a public host (TCP, QUIC, WebTransport with two certhashes, IPv4
    and IPv6): the signed announcement keeps several addresses within 512 bytes."""
    certhash = "/certhash/uEiDDq4_xNyDorZBH3TlGazyJdOWSwvo4PUo5YHFMrvDE8g"
    own = StoreEndpoint(
        ALICE_ID,
        (
            "/ip4/93.184.216.34/tcp/4001",
            "/ip4/93.184.216.34/udp/4001/quic-v1",
            "/ip4/93.184.216.34/udp/4001/quic-v1/webtransport" + certhash + certhash[:30],
            "/ip4/93.184.216.34/udp/4001/webrtc-direct" + certhash,
            "/ip6/2606:2800:220:1:248:1893:25c8:1946/tcp/4001",
            "/ip6/2606:2800:220:1:248:1893:25c8:1946/udp/4001/quic-v1",
        ),
    )
    for key in (ALICE_KEY, Libp2pKey.secp256k1("alice")):
        own = StoreEndpoint(key.peer_id, own.addrs)
        signature = key.proof(ALICE)
        endpoint = announceable(own, signature, allow_private=False)
        assert endpoint is not None and len(endpoint.addrs) >= 4
        data = encode_endpoint(endpoint, signature)
        assert len(data) <= MAX_ENDPOINT_BYTES
        assert parsed(data) == endpoint


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
    st.sampled_from([NO_PROOF, ALICE_KEY.proof(ALICE), b"\x01", b"\xff" * 72]),
)
def test_any_announcement_shape_parses_or_is_rejected(
    addrs: list[str], peer_id: str, signature: bytes
) -> None:
    _parses_or_is_rejected(announced(peer_id, *addrs, signature=signature))


def _parses_or_is_rejected(data: bytes) -> None:
    record = book()
    for allow_private in (False, True):
        try:
            endpoint = parsed(data, allow_private=allow_private)
        except EndpointRejected as exc:
            assert exc.reason and "\n" not in exc.reason
        else:
            assert endpoint.addrs and len(endpoint.addrs) <= 8
    try:
        record.apply(ALICE, data)
    except EndpointRejected:
        pass


def test_base32_helper_matches_the_spec_vector() -> None:
    """The spec's CID is CIDv1 (0x01), libp2p-key (0x72), sha2-256 multihash of the Qm form."""
    raw = base64.b32decode(SPEC_CID[1:].upper() + "=" * (-len(SPEC_CID[1:]) % 8))
    assert raw[:2] == b"\x01\x72" and base58(raw[2:]) == SPEC_QM
    assert cid_form(raw[2:]) == SPEC_CID

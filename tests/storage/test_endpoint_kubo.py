"""Endpoint proofs made by real Kubo daemons (``key/sign``): an Ed25519 daemon's announcement
verifies for its announcer only, Kubo signs exactly what tests/storage/libp2p_keys.py signs, a
Secp256k1 identity verifies too, and an RSA identity (a ``Qm...`` peer id) cannot announce."""

from __future__ import annotations

import os
import subprocess
from pathlib import Path

import pytest
import requests

from node.local.kubo import init_repo, kubo_binary
from node.storage.endpoint import (
    EndpointRejected,
    StoreEndpoint,
    announceable,
    encode_endpoint,
    parse_endpoint,
)
from node.storage.endpoint_proof import ED25519, EndpointDomain, decode_signature
from node.storage.kubo import KuboStore
from tests.docs.protocol_vectors import PROTOCOL_PATH, endpoint_key, read_vectors
from tests.storage.kubo_daemons import KuboSwarm
from tests.storage.libp2p_keys import DOMAIN, Libp2pKey
from tests.storage.test_endpoint import ALICE, BOB, book, parsed


def _rotated(swarm: KuboSwarm, name: str, key_type: str) -> Path:
    """A new repository in the swarm's folder whose identity is a new key of ``key_type``."""
    repo = swarm.folder / name
    init_repo(repo)
    env = {**os.environ, "IPFS_PATH": str(repo), "IPFS_TELEMETRY": "off"}
    command = [str(kubo_binary()), "key", "rotate", "--oldkey=old-self", f"--type={key_type}"]
    subprocess.run(command, env=env, check=True, capture_output=True, timeout=60)
    return repo


def _signed_announcement(
    store: KuboStore, own: StoreEndpoint, announcer: str, domain: EndpointDomain
) -> bytes:
    """What a node announcing ``announcer`` builds from its daemon (node.round.exchange)."""
    signature = store.sign(domain.message(announcer))
    endpoint = announceable(own, signature, allow_private=True)
    assert endpoint is not None
    return encode_endpoint(endpoint, signature)


def test_a_kubo_signed_announcement_verifies_for_its_announcer_only(
    kubo_swarm: KuboSwarm,
) -> None:
    daemon = kubo_swarm.start("ed25519")
    assert daemon.peer_id.startswith("12D3KooW")
    store = daemon.store()
    data = _signed_announcement(store, daemon.endpoint(), ALICE, DOMAIN)
    assert store.sign(DOMAIN.message(ALICE)) == store.sign(DOMAIN.message(ALICE))  # no re-sends
    assert parsed(data, allow_private=True, by=ALICE).peer_id == daemon.peer_id
    record = book(allow_private=True)
    with pytest.raises(EndpointRejected, match="signature is not the peer id's key"):
        record.apply(BOB, data)  # the squatter copies the victim's bytes
    assert record.apply(ALICE, data) is not None and record.holder(daemon.peer_id) == ALICE
    elsewhere = EndpointDomain(1, DOMAIN.coordinator)
    with pytest.raises(EndpointRejected, match="signature is not the peer id's key"):
        parsed(_signed_announcement(store, daemon.endpoint(), ALICE, elsewhere), by=ALICE)


def test_kubo_signs_what_the_test_keys_sign(kubo_swarm: KuboSwarm) -> None:
    """The documented vector's key and a Secp256k1 key, imported into a daemon: Kubo's key/sign
    gives the vector's very signature (Ed25519 is deterministic) and a Secp256k1 signature that
    verifies, so the test keys sign as Kubo does."""
    vectors = read_vectors(PROTOCOL_PATH.read_text(encoding="utf-8"))
    inputs, vector = vectors["inputs"], vectors["endpoint"]
    domain = EndpointDomain(inputs["chain_id"], inputs["coordinator"])
    daemon = kubo_swarm.start("importer")
    for key in (endpoint_key(inputs), Libp2pKey.secp256k1("imported")):
        signed = _kubo_sign(daemon.api_url, key, domain.message(inputs["peer"]))
        if key.kind == ED25519:
            assert key.peer_id == vector["peer_id"] and signed == vector["signature"]
        endpoint = StoreEndpoint(key.peer_id, tuple(inputs["endpoint"]["addrs"]))
        data = encode_endpoint(endpoint, decode_signature(signed))
        assert parse_endpoint(data, announcer=inputs["peer"], domain=domain, allow_private=False)


def _kubo_sign(api_url: str, key: Libp2pKey, message: bytes) -> str:
    """``key`` imported into the daemon (key/import), then its key/sign of ``message``: the
    signature's base64url text without Kubo's multibase ``u``."""
    base, name = f"{api_url}/api/v0", f"imported-{key.kind}"
    files = {"file": ("key", key.private_protobuf, "application/octet-stream")}
    answer = requests.post(
        f"{base}/key/import", params={"arg": name, "ipns-base": "b58mh"}, files=files, timeout=30
    )
    assert answer.status_code == 200, answer.text
    assert answer.json()["Id"] == key.peer_id
    files = {"file": ("message", message, "application/octet-stream")}
    answer = requests.post(f"{base}/key/sign", params={"key": name}, files=files, timeout=30)
    assert answer.status_code == 200, answer.text
    signed = answer.json()["Signature"]
    assert signed.startswith("u")  # multibase base64url
    return signed[1:]


def test_a_secp256k1_daemon_s_announcement_verifies(kubo_swarm: KuboSwarm) -> None:
    _rotated(kubo_swarm, "secp256k1", "secp256k1")
    daemon = kubo_swarm.start("secp256k1")
    assert daemon.peer_id.startswith("16Uiu2")
    data = _signed_announcement(daemon.store(), daemon.endpoint(), ALICE, DOMAIN)
    assert parsed(data, allow_private=True, by=ALICE).peer_id == daemon.peer_id
    with pytest.raises(EndpointRejected, match="signature is not the peer id's key"):
        parsed(data, allow_private=True, by=BOB)


def test_an_rsa_daemon_cannot_announce(kubo_swarm: KuboSwarm) -> None:
    _rotated(kubo_swarm, "rsa", "rsa")
    daemon = kubo_swarm.start("rsa")
    assert daemon.peer_id.startswith("Qm")
    data = _signed_announcement(daemon.store(), daemon.endpoint(), ALICE, DOMAIN)
    with pytest.raises(EndpointRejected, match=r"names its key by hash \(an RSA key\)"):
        parsed(data, allow_private=True, by=ALICE)

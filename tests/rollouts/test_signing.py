"""Batch signatures: sign and recover with an Anvil dev key, forgeries, malformed signatures."""

from __future__ import annotations

import hashlib

import pytest
from eth_account import Account
from eth_account.messages import encode_typed_data

from node.chain.eip712 import (
    Domain,
    recover_struct_signer,
    rollout_batch_struct_hash,
    sign_rollout_batch,
)
from node.rollouts import (
    BatchRejected,
    RejectReason,
    SignedBatch,
    body_hash,
    canonical_json,
    decode_batch,
    encode_batch,
    recover_batch_signer,
    sign_batch,
    verify_batch_signature,
)
from node.rollouts.signing import SECP256K1_N
from tests.rollouts.factories import COORDINATOR, DOMAIN, OTHER, PEER, make_batch, make_body

# Anvil's dev account #0; the factories sign with #1.
DEPLOYER = Account.from_key("0xac0974bec39a17e36ba4a6b4d238ff944bacb478cbed5efcae784d7bf4f2ff80")


def with_signature(batch: SignedBatch, signature: bytes) -> SignedBatch:
    return SignedBatch(body=batch.body, signature="0x" + signature.hex())


def rejected(batch: SignedBatch, reason: RejectReason, domain: Domain = DOMAIN) -> BatchRejected:
    with pytest.raises(BatchRejected) as excinfo:
        verify_batch_signature(batch, domain)
    assert excinfo.value.reason is reason, excinfo.value
    return excinfo.value


def test_sign_and_recover() -> None:
    batch = make_batch()
    assert recover_batch_signer(batch, DOMAIN) == PEER.address
    verify_batch_signature(batch, DOMAIN)
    # The signature survives the trip through bytes.
    verify_batch_signature(decode_batch(encode_batch(batch, compress=True)), DOMAIN)


def test_body_hash_is_sha256_of_canonical_body() -> None:
    body = make_body()
    assert body_hash(body) == hashlib.sha256(canonical_json(body)).digest()
    assert body_hash(body) != body_hash(make_body(round=8))


def test_signature_is_the_eip712_rolloutbatch_signature() -> None:
    body = make_body()
    message = encode_typed_data(
        full_message={
            "types": {
                "EIP712Domain": [
                    {"name": "name", "type": "string"},
                    {"name": "version", "type": "string"},
                    {"name": "chainId", "type": "uint256"},
                    {"name": "verifyingContract", "type": "address"},
                    {"name": "salt", "type": "bytes32"},
                ],
                "RolloutBatch": [
                    {"name": "peer", "type": "address"},
                    {"name": "round", "type": "uint64"},
                    {"name": "bodyHash", "type": "bytes32"},
                ],
            },
            "primaryType": "RolloutBatch",
            "domain": DOMAIN.as_dict(),
            "message": {"peer": PEER.address, "round": body.round, "bodyHash": body_hash(body)},
        }
    )
    expected = PEER.sign_message(message).signature
    assert sign_batch(body, PEER, DOMAIN).signature == "0x" + bytes(expected).hex()


def test_other_key_signing_is_caught() -> None:
    body = make_body()
    forged = sign_batch(make_body(peer=OTHER.address), OTHER, DOMAIN).signature
    batch = SignedBatch(body=body, signature=forged)
    assert recover_batch_signer(batch, DOMAIN) != PEER.address
    error = rejected(batch, RejectReason.BAD_SIGNATURE)
    assert "not by the peer" in error.detail


def test_signature_of_another_body_is_caught() -> None:
    batch = make_batch()
    tampered = SignedBatch(body=make_body(text="tampered"), signature=batch.signature)
    rejected(tampered, RejectReason.BAD_SIGNATURE)


def test_signature_for_another_domain_is_caught() -> None:
    body = make_body()
    for other_domain in (
        Domain(chain_id=1, verifying_contract=COORDINATOR, salt=DOMAIN.salt),
        # the same chain and address after a reset: only the genesis seed (salt) differs
        Domain(chain_id=31337, verifying_contract=COORDINATOR, salt=bytes(32)),
    ):
        signature = sign_rollout_batch(
            PEER, other_domain, round=body.round, body_hash=body_hash(body)
        )
        rejected(with_signature(make_batch(), signature), RejectReason.BAD_SIGNATURE)


def test_wrong_chain_and_coordinator() -> None:
    batch = make_batch()
    rejected(batch, RejectReason.WRONG_CHAIN, Domain(1, COORDINATOR, DOMAIN.salt))
    rejected(batch, RejectReason.WRONG_COORDINATOR, Domain(31337, DEPLOYER.address, DOMAIN.salt))


def test_sign_refuses_mismatches() -> None:
    with pytest.raises(ValueError, match="cannot sign for peer"):
        sign_batch(make_body(), OTHER, DOMAIN)
    with pytest.raises(ValueError, match="chain"):
        sign_batch(make_body(), PEER, Domain(1, COORDINATOR, DOMAIN.salt))
    with pytest.raises(ValueError, match="coordinator"):
        sign_batch(make_body(), PEER, Domain(31337, DEPLOYER.address, DOMAIN.salt))


def split(signature: str) -> tuple[int, int, int]:
    raw = bytes.fromhex(signature[2:])
    return int.from_bytes(raw[:32], "big"), int.from_bytes(raw[32:64], "big"), raw[64]


def join(r: int, s: int, v: int) -> bytes:
    return r.to_bytes(32, "big") + s.to_bytes(32, "big") + bytes([v])


@pytest.mark.parametrize(
    "mangle",
    [
        lambda r, s, v: join(r, s, v - 27),  # v as 0/1
        lambda r, s, v: join(r, s, 29),
        lambda r, s, v: join(r, SECP256K1_N - s, 55 - v),  # the high-s twin
        lambda r, s, v: join(0, s, v),
        lambda r, s, v: join(r, 0, v),
        lambda r, s, v: join(SECP256K1_N, s, v),
        lambda r, s, v: join(5, s, v),  # r not an x coordinate on the curve
        lambda r, s, v: bytes(65),
        lambda r, s, v: b"\xff" * 65,
    ],
)
def test_malformed_signatures(mangle) -> None:  # type: ignore[no-untyped-def]
    batch = make_batch()
    signature = mangle(*split(batch.signature))
    with pytest.raises(BatchRejected) as excinfo:
        recover_batch_signer(with_signature(batch, signature), DOMAIN)
    assert excinfo.value.reason is RejectReason.BAD_SIGNATURE


def test_high_s_twin_would_recover_the_same_signer_without_the_check() -> None:
    batch = make_batch()
    r, s, v = split(batch.signature)
    twin = join(r, SECP256K1_N - s, 55 - v)
    struct = rollout_batch_struct_hash(PEER.address, batch.body.round, body_hash(batch.body))
    assert recover_struct_signer(DOMAIN, struct, twin) == PEER.address  # why we refuse it

"""Signing batch bodies and recovering their signer (EIP-712 ``RolloutBatch``).

``bodyHash`` = SHA-256 of ``canonical_json(body)``; the peer signs
``RolloutBatch(address peer,uint64 round,bytes32 bodyHash)`` in the coordinator's EIP-712
domain (node.chain.eip712, reused here). Signatures are 65 bytes ``r || s || v`` written as
``0x`` + 130 lower-case hex; only the canonical form is accepted: v in {27, 28}, 0 < r < n,
0 < s <= n/2 (low s, as OpenZeppelin's ECDSA and the contract require), so a valid signature
cannot be re-encoded into a second valid one.
"""

from __future__ import annotations

import hashlib

from eth_account.signers.local import LocalAccount
from eth_keys.exceptions import BadSignature, ValidationError
from eth_utils import to_checksum_address

from node.chain.eip712 import (
    Domain,
    recover_struct_signer,
    rollout_batch_struct_hash,
    sign_rollout_batch,
)
from node.rollouts.canonical import canonical_json
from node.rollouts.reasons import BatchRejected, RejectReason
from node.rollouts.schema import BatchBody, SignedBatch

#: Order of secp256k1's group.
SECP256K1_N = 0xFFFFFFFFFFFFFFFFFFFFFFFFFFFFFFFEBAAEDCE6AF48A03BBFD25E8CD0364141


def body_hash(body: BatchBody) -> bytes:
    """SHA-256 of the body's canonical JSON: the ``bodyHash`` the peer signs."""
    return hashlib.sha256(canonical_json(body)).digest()


def sign_batch(body: BatchBody, account: LocalAccount, domain: Domain) -> SignedBatch:
    """The signed batch of ``body`` by ``account`` (which must be ``body.peer``) in ``domain``.

    ValueError if the account is not the body's peer or the domain is not the body's chain and
    coordinator: a batch signed like that would be rejected by every verifier.
    """
    if account.address != body.peer:
        raise ValueError(f"account {account.address} cannot sign for peer {body.peer}")
    _check_domain(body, domain, error=ValueError)
    signature = sign_rollout_batch(account, domain, round=body.round, body_hash=body_hash(body))
    return SignedBatch(body=body, signature="0x" + signature.hex())


def recover_batch_signer(batch: SignedBatch, domain: Domain) -> str:
    """The checksummed address that signed ``batch`` in ``domain``.

    BatchRejected(wrong_chain / wrong_coordinator) if the body names another domain,
    BatchRejected(bad_signature) if the signature is malformed or not in canonical form.
    """
    _check_domain(batch.body, domain, error=None)
    signature = bytes.fromhex(batch.signature[2:])
    _check_canonical_signature(signature)
    struct_hash = rollout_batch_struct_hash(
        batch.body.peer, batch.body.round, body_hash(batch.body)
    )
    try:
        return recover_struct_signer(domain, struct_hash, signature)
    except (ValueError, BadSignature, ValidationError) as error:
        raise BatchRejected(
            RejectReason.BAD_SIGNATURE, f"cannot recover a signer: {error}"
        ) from None


def verify_batch_signature(batch: SignedBatch, domain: Domain) -> None:
    """BatchRejected unless ``batch`` is signed by its own ``body.peer`` in ``domain``."""
    signer = recover_batch_signer(batch, domain)
    if signer != batch.body.peer:
        raise BatchRejected(
            RejectReason.BAD_SIGNATURE, f"signed by {signer}, not by the peer {batch.body.peer}"
        )


def _check_domain(body: BatchBody, domain: Domain, *, error: type[ValueError] | None) -> None:
    problems = []
    if body.chain_id != domain.chain_id:
        problems.append(
            (RejectReason.WRONG_CHAIN, f"body is for chain {body.chain_id}, not {domain.chain_id}")
        )
    coordinator = to_checksum_address(domain.verifying_contract)
    if body.coordinator != coordinator:
        problems.append(
            (
                RejectReason.WRONG_COORDINATOR,
                f"body is for coordinator {body.coordinator}, not {coordinator}",
            )
        )
    if problems:
        reason, detail = problems[0]
        if error is not None:
            raise error(detail)
        raise BatchRejected(reason, detail)


def _check_canonical_signature(signature: bytes) -> None:
    r = int.from_bytes(signature[:32], "big")
    s = int.from_bytes(signature[32:64], "big")
    v = signature[64]
    if v not in (27, 28):
        detail = f"v is {v}, must be 27 or 28"
    elif not 0 < r < SECP256K1_N:
        detail = "r out of range"
    elif not 0 < s <= SECP256K1_N // 2:
        detail = "s out of range (high-s signatures are not canonical)"
    else:
        return
    raise BatchRejected(RejectReason.BAD_SIGNATURE, detail)

"""EIP-712 typed data of the swarm protocol: hashing, signing, recovering (docs/PROTOCOL.md,
"EIP-712").

Domain: name "SwarmCoordinator", version "2", the chain id, the coordinator's address and, as
``salt``, the deployment's genesis seed (so a signature made for one deployment never verifies on
another, even at the same address after a chain reset). Types:

    Publish(address peer,uint64 round,bytes32 digest,uint32 groups,uint32 completions,
            int64 rewardSum,address relayer,uint64 deadline)
    RolloutBatch(address peer,uint64 round,bytes32 bodyHash)

``relayer`` zero lets anyone relay a Publish, otherwise only that address; ``deadline`` is the last
unix time (inclusive) at which it may be relayed.

The hashes are computed here directly (``keccak256(abi.encode(typeHash, fields...))``), as the
contract does; the tests check them against eth-account's generic encoder and the contract's
``domainSeparator()``. Signatures are 65 bytes ``r || s || v``, v in {27, 28}, low s, which is
what the contract's ``publishRolloutsFor`` accepts.
"""

from __future__ import annotations

from dataclasses import dataclass
from typing import Any

from eth_abi import encode
from eth_account import Account
from eth_account.messages import SignableMessage
from eth_account.signers.local import LocalAccount
from eth_utils import keccak, to_checksum_address

ZERO_ADDRESS = "0x0000000000000000000000000000000000000000"

DOMAIN_NAME = "SwarmCoordinator"
DOMAIN_VERSION = "2"
DOMAIN_TYPE = (
    "EIP712Domain(string name,string version,uint256 chainId,address verifyingContract,"
    "bytes32 salt)"
)
PUBLISH_TYPE = (
    "Publish(address peer,uint64 round,bytes32 digest,uint32 groups,uint32 completions,"
    "int64 rewardSum,address relayer,uint64 deadline)"
)
ROLLOUT_BATCH_TYPE = "RolloutBatch(address peer,uint64 round,bytes32 bodyHash)"

DOMAIN_TYPEHASH = keccak(text=DOMAIN_TYPE)
PUBLISH_TYPEHASH = keccak(text=PUBLISH_TYPE)
ROLLOUT_BATCH_TYPEHASH = keccak(text=ROLLOUT_BATCH_TYPE)


@dataclass(frozen=True)
class Domain:
    """The EIP-712 domain of one coordinator deployment."""

    chain_id: int
    verifying_contract: str
    salt: bytes

    def __post_init__(self) -> None:
        if len(self.salt) != 32:
            raise ValueError(f"the domain salt (genesis seed) is 32 bytes, got {len(self.salt)}")

    @property
    def separator(self) -> bytes:
        """``keccak256(abi.encode(DOMAIN_TYPEHASH, nameHash, versionHash, chainId, contract,
        salt))``."""
        return keccak(
            encode(
                ["bytes32", "bytes32", "bytes32", "uint256", "address", "bytes32"],
                [
                    DOMAIN_TYPEHASH,
                    keccak(text=DOMAIN_NAME),
                    keccak(text=DOMAIN_VERSION),
                    self.chain_id,
                    to_checksum_address(self.verifying_contract),
                    self.salt,
                ],
            )
        )

    @classmethod
    def of_deployment(cls, deployment: Any) -> Domain:
        """The domain of a deployment record (its chain id, coordinator and genesis seed)."""
        return cls(
            chain_id=deployment.chain_id,
            verifying_contract=deployment.coordinator,
            salt=bytes.fromhex(deployment.genesis_seed.removeprefix("0x")),
        )

    def as_dict(self) -> dict[str, object]:
        """The domain in eth-account's typed-data form."""
        return {
            "name": DOMAIN_NAME,
            "version": DOMAIN_VERSION,
            "chainId": self.chain_id,
            "verifyingContract": to_checksum_address(self.verifying_contract),
            "salt": self.salt,
        }


def publish_struct_hash(
    peer: str,
    round: int,
    digest: bytes,
    groups: int,
    completions: int,
    reward_sum: int,
    relayer: str,
    deadline: int,
) -> bytes:
    """hashStruct of a ``Publish`` message (``relayer`` ZERO_ADDRESS: anyone may relay)."""
    return keccak(
        encode(
            [
                "bytes32",
                "address",
                "uint64",
                "bytes32",
                "uint32",
                "uint32",
                "int64",
                "address",
                "uint64",
            ],
            [
                PUBLISH_TYPEHASH,
                to_checksum_address(peer),
                round,
                digest,
                groups,
                completions,
                reward_sum,
                to_checksum_address(relayer),
                deadline,
            ],
        )
    )


def rollout_batch_struct_hash(peer: str, round: int, body_hash: bytes) -> bytes:
    """hashStruct of a ``RolloutBatch`` message (``body_hash`` = SHA-256 of the canonical body)."""
    return keccak(
        encode(
            ["bytes32", "address", "uint64", "bytes32"],
            [ROLLOUT_BATCH_TYPEHASH, to_checksum_address(peer), round, body_hash],
        )
    )


def _signable(domain: Domain, struct_hash: bytes) -> SignableMessage:
    return SignableMessage(version=b"\x01", header=domain.separator, body=struct_hash)


def typed_data_hash(domain: Domain, struct_hash: bytes) -> bytes:
    """``keccak256("\\x19\\x01" || domainSeparator || structHash)``: the hash that is signed."""
    return keccak(b"\x19\x01" + domain.separator + struct_hash)


def sign_struct(account: LocalAccount, domain: Domain, struct_hash: bytes) -> bytes:
    """The 65-byte signature (r, s, v) of ``account`` over a struct hash in ``domain``."""
    return bytes(account.sign_message(_signable(domain, struct_hash)).signature)


def recover_struct_signer(domain: Domain, struct_hash: bytes, signature: bytes) -> str:
    """The address that signed ``struct_hash`` in ``domain``; ValueError if malformed."""
    if len(signature) != 65:
        raise ValueError(f"a signature is 65 bytes, got {len(signature)}")
    return Account.recover_message(_signable(domain, struct_hash), signature=signature)


def sign_publish(
    account: LocalAccount,
    domain: Domain,
    *,
    round: int,
    digest: bytes,
    groups: int,
    completions: int,
    reward_sum: int,
    relayer: str = ZERO_ADDRESS,
    deadline: int,
) -> bytes:
    """The peer's signature that lets ``relayer`` (anyone, if zero) call ``publishRolloutsFor`` on
    its behalf until unix time ``deadline`` (inclusive)."""
    struct_hash = publish_struct_hash(
        account.address, round, digest, groups, completions, reward_sum, relayer, deadline
    )
    return sign_struct(account, domain, struct_hash)


def sign_rollout_batch(
    account: LocalAccount, domain: Domain, *, round: int, body_hash: bytes
) -> bytes:
    """The peer's signature of a batch body (the batch document's ``signature``)."""
    return sign_struct(
        account, domain, rollout_batch_struct_hash(account.address, round, body_hash)
    )

"""EIP-712 hashing against eth-account's encoder, signatures, and round arithmetic (no chain)."""

from __future__ import annotations

import pytest
from eth_account import Account
from eth_account.messages import encode_typed_data
from eth_utils import keccak
from hypothesis import given
from hypothesis import strategies as st

from node.chain.eip712 import (
    ZERO_ADDRESS,
    Domain,
    publish_struct_hash,
    recover_struct_signer,
    rollout_batch_struct_hash,
    sign_publish,
    sign_rollout_batch,
    typed_data_hash,
)
from node.chain.rounds import RoundClock, round_seed

ACCOUNT = Account.from_key("0x59c6995e998f97a5a0044966f0945389dc9e86dae88c7a8412f4603b6b78690d")
SALT = keccak(text="genesis seed")
DOMAIN = Domain(
    chain_id=31337, verifying_contract="0x5FbDB2315678afecb367f032d93F642f64180aa3", salt=SALT
)
RELAYER = "0x70997970C51812dc3A010C7d01b50e0d17dc79C8"
HALF_ORDER = 0x7FFFFFFFFFFFFFFFFFFFFFFFFFFFFFFF5D576E7357A4501DDFE92F46681B20A0
DOMAIN_FIELDS = [
    {"name": "name", "type": "string"},
    {"name": "version", "type": "string"},
    {"name": "chainId", "type": "uint256"},
    {"name": "verifyingContract", "type": "address"},
    {"name": "salt", "type": "bytes32"},
]
PUBLISH_FIELDS = [
    {"name": "peer", "type": "address"},
    {"name": "round", "type": "uint64"},
    {"name": "digest", "type": "bytes32"},
    {"name": "groups", "type": "uint32"},
    {"name": "completions", "type": "uint32"},
    {"name": "rewardSum", "type": "int64"},
    {"name": "relayer", "type": "address"},
    {"name": "deadline", "type": "uint64"},
]
BATCH_FIELDS = [
    {"name": "peer", "type": "address"},
    {"name": "round", "type": "uint64"},
    {"name": "bodyHash", "type": "bytes32"},
]


def eth_account_encoding(primary: str, fields: list[dict], message: dict, domain: Domain = DOMAIN):
    return encode_typed_data(
        full_message={
            "types": {"EIP712Domain": DOMAIN_FIELDS, primary: fields},
            "primaryType": primary,
            "domain": domain.as_dict(),
            "message": message,
        }
    )


@given(
    round=st.integers(0, 2**64 - 1),
    digest=st.binary(min_size=32, max_size=32),
    groups=st.integers(0, 2**32 - 1),
    completions=st.integers(0, 2**32 - 1),
    reward_sum=st.integers(-(2**63), 2**63 - 1),
    chain_id=st.integers(1, 2**64),
    salt=st.binary(min_size=32, max_size=32),
    relayer=st.sampled_from([ZERO_ADDRESS, RELAYER]),
    deadline=st.integers(0, 2**64 - 1),
)
def test_publish_hash_matches_eth_account(
    round, digest, groups, completions, reward_sum, chain_id, salt, relayer, deadline
) -> None:
    domain = Domain(chain_id=chain_id, verifying_contract=DOMAIN.verifying_contract, salt=salt)
    expected = eth_account_encoding(
        "Publish",
        PUBLISH_FIELDS,
        {
            "peer": ACCOUNT.address,
            "round": round,
            "digest": digest,
            "groups": groups,
            "completions": completions,
            "rewardSum": reward_sum,
            "relayer": relayer,
            "deadline": deadline,
        },
        domain,
    )
    struct_hash = publish_struct_hash(
        ACCOUNT.address, round, digest, groups, completions, reward_sum, relayer, deadline
    )
    assert expected.header == domain.separator and expected.body == struct_hash
    assert typed_data_hash(domain, struct_hash) == keccak(
        b"\x19" + expected.version + expected.header + expected.body
    )


def test_rollout_batch_hash_matches_eth_account() -> None:
    body_hash = keccak(text="body")
    expected = eth_account_encoding(
        "RolloutBatch", BATCH_FIELDS, {"peer": ACCOUNT.address, "round": 12, "bodyHash": body_hash}
    )
    assert expected.body == rollout_batch_struct_hash(ACCOUNT.address, 12, body_hash)


def test_signatures_recover_to_the_signer_and_fit_the_contract() -> None:
    digest = keccak(text="batch")
    signature = sign_publish(
        ACCOUNT,
        DOMAIN,
        round=3,
        digest=digest,
        groups=2,
        completions=16,
        reward_sum=-5,
        relayer=RELAYER,
        deadline=99,
    )
    assert len(signature) == 65 and signature[64] in (27, 28)
    assert int.from_bytes(signature[32:64], "big") <= HALF_ORDER
    struct_hash = publish_struct_hash(ACCOUNT.address, 3, digest, 2, 16, -5, RELAYER, 99)
    assert recover_struct_signer(DOMAIN, struct_hash, signature) == ACCOUNT.address
    for other in (
        publish_struct_hash(ACCOUNT.address, 3, digest, 2, 17, -5, RELAYER, 99),
        publish_struct_hash(ACCOUNT.address, 3, digest, 2, 16, -5, ZERO_ADDRESS, 99),
        publish_struct_hash(ACCOUNT.address, 3, digest, 2, 16, -5, RELAYER, 100),
    ):
        assert recover_struct_signer(DOMAIN, other, signature) != ACCOUNT.address
    other_deployment = Domain(DOMAIN.chain_id, DOMAIN.verifying_contract, keccak(text="other"))
    assert recover_struct_signer(other_deployment, struct_hash, signature) != ACCOUNT.address
    batch_signature = sign_rollout_batch(ACCOUNT, DOMAIN, round=3, body_hash=digest)
    assert (
        recover_struct_signer(
            DOMAIN, rollout_batch_struct_hash(ACCOUNT.address, 3, digest), batch_signature
        )
        == ACCOUNT.address
    )
    with pytest.raises(ValueError):
        recover_struct_signer(DOMAIN, struct_hash, signature[:64])


def test_domain_needs_a_32_byte_salt() -> None:
    with pytest.raises(ValueError, match="genesis seed"):
        Domain(chain_id=1, verifying_contract=RELAYER, salt=b"short")


def test_round_clock_boundaries() -> None:
    clock = RoundClock(genesis=1_000, duration=60)
    assert clock.round_at(1_000) == 0 and clock.round_at(1_059) == 0 and clock.round_at(1_060) == 1
    assert clock.start_of(2) == 1_120 and clock.end_of(2) == 1_180
    assert clock.seconds_until_next(1_000) == 60 and clock.seconds_until_next(1_059) == 1
    assert clock.elapsed_in_round(1_075) == 15
    with pytest.raises(ValueError):
        clock.round_at(999)
    with pytest.raises(ValueError):
        RoundClock(genesis=0, duration=0)


@given(genesis=st.integers(0, 2**40), duration=st.integers(1, 10**6), offset=st.integers(0, 2**40))
def test_round_clock_properties(genesis: int, duration: int, offset: int) -> None:
    clock = RoundClock(genesis=genesis, duration=duration)
    now = genesis + offset
    r = clock.round_at(now)
    assert clock.start_of(r) <= now < clock.end_of(r)
    assert 1 <= clock.seconds_until_next(now) <= duration
    assert clock.round_at(now + clock.seconds_until_next(now)) == r + 1


def test_round_seed_is_keccak_of_abi_encoding() -> None:
    seed = bytes(range(32))
    assert round_seed(seed, 5) == keccak(seed + (5).to_bytes(32, "big"))
    assert round_seed(seed, 5) != round_seed(seed, 6)
    with pytest.raises(ValueError):
        round_seed(seed, -1)

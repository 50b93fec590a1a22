"""Typed values of the coordinator's ABI: peers, attestations, verdicts, parameters, receipts.

Pydantic models, frozen and validated (integer ranges of the Solidity types, checksummed addresses,
32-byte hashes), each with ``from_abi`` / ``to_abi`` to cross the ABI boundary. In JSON, bytes32
values are ``0x`` + 64 lower-case hex and addresses are EIP-55 (docs/PROTOCOL.md, "Units and
encodings").
"""

from __future__ import annotations

from collections.abc import Iterable, Sequence
from enum import IntEnum
from typing import Annotated, Any

from eth_utils import is_address, to_checksum_address
from pydantic import BaseModel, BeforeValidator, ConfigDict, Field, PlainSerializer

ZERO_ADDRESS = "0x0000000000000000000000000000000000000000"


def _checksum(value: Any) -> str:
    if isinstance(value, bytes) and len(value) == 20:
        value = "0x" + value.hex()
    if not isinstance(value, str) or not is_address(value):
        raise ValueError(f"not an Ethereum address: {value!r}")
    return to_checksum_address(value)


def _bytes32(value: Any) -> bytes:
    if isinstance(value, str):
        text = value[2:] if value.startswith("0x") else value
        try:
            value = bytes.fromhex(text)
        except ValueError:
            raise ValueError(f"not hex: {value!r}") from None
    if not isinstance(value, (bytes, bytearray)) or len(value) != 32:
        raise ValueError(f"expected 32 bytes, got {value!r}")
    return bytes(value)


def _hex_bytes(value: Any) -> bytes:
    if isinstance(value, str):
        if not value.startswith("0x"):
            raise ValueError(f"not 0x-hex: {value!r}")
        try:
            return bytes.fromhex(value[2:])
        except ValueError:
            raise ValueError(f"not hex: {value!r}") from None
    if not isinstance(value, (bytes, bytearray)):
        raise ValueError(f"expected bytes, got {value!r}")
    return bytes(value)


def _hash_hex(value: Any) -> str:
    return "0x" + _bytes32(value).hex()


Address = Annotated[str, BeforeValidator(_checksum)]
Bytes32 = Annotated[
    bytes, BeforeValidator(_bytes32), PlainSerializer(lambda b: "0x" + b.hex(), return_type=str)
]
HashHex = Annotated[str, BeforeValidator(_hash_hex)]
#: Bytes of any length, ``0x`` + lower-case hex in JSON (and read back from it).
HexBytes = Annotated[
    bytes, BeforeValidator(_hex_bytes), PlainSerializer(lambda b: "0x" + b.hex(), return_type=str)
]
Uint16 = Annotated[int, Field(ge=0, lt=2**16)]
Uint32 = Annotated[int, Field(ge=0, lt=2**32)]
Uint64 = Annotated[int, Field(ge=0, lt=2**64)]
Uint96 = Annotated[int, Field(ge=0, lt=2**96)]
Int64 = Annotated[int, Field(ge=-(2**63), lt=2**63)]


class FrozenModel(BaseModel):
    model_config = ConfigDict(frozen=True, extra="forbid")


class PeerStatus(IntEnum):
    """Life cycle of a peer (Solidity ``PeerStatus``)."""

    NONE = 0
    ACTIVE = 1
    EXITING = 2
    WITHDRAWN = 3


class PeerInfo(FrozenModel):
    """A peer's on-chain record (``peerInfo(address)``)."""

    stake: Uint96 = Field(description="Wei staked now (after any slashes).")
    withdrawable_at: Uint64 = Field(
        description="Unix time from which an exiting peer may withdraw; 0 if active."
    )
    next_attest_round: Uint64 = Field(description="Lowest round this peer may still attest for.")
    open_disputes: int = Field(
        ge=0, lt=2**24, description="Flagged rounds of this peer not settled yet."
    )
    status: PeerStatus

    @classmethod
    def from_abi(cls, values: Sequence[Any]) -> PeerInfo:
        stake, withdrawable_at, next_attest_round, open_disputes, status = values
        return cls(
            stake=stake,
            withdrawable_at=withdrawable_at,
            next_attest_round=next_attest_round,
            open_disputes=open_disputes,
            status=PeerStatus(status),
        )

    @property
    def is_active(self) -> bool:
        return self.status is PeerStatus.ACTIVE


class Attestation(FrozenModel):
    """One peer's verdict on another peer's batch (Solidity ``Attestation``).

    A *flag* when ``agreed < checked``, an *agreement* otherwise.
    """

    round: Uint64
    subject: Address
    digest: Bytes32
    checked: Uint32 = Field(description="Completions re-scored (> 0).")
    agreed: Uint32 = Field(description="Completions whose claimed reward matched (<= checked).")
    verified_reward_sum: Int64 = Field(description="Sum of the attester's own scores, milli-units.")

    @property
    def is_flag(self) -> bool:
        return self.agreed < self.checked

    def sort_key(self) -> tuple[int, int]:
        """The contract's order: round, then subject as a number."""
        return (self.round, int(self.subject, 16))

    def to_abi(self) -> tuple[Any, ...]:
        return (
            self.round,
            self.subject,
            self.digest,
            self.checked,
            self.agreed,
            self.verified_reward_sum,
        )


def median_milli(values: Sequence[int]) -> int | None:
    """A batch's verified reward from its attesters' ``verifiedRewardSum`` values: the median
    (None for none; even counts average the middle two, floored). One attester lying high or low
    cannot move the median of three. Shared by ``swarm status`` and the indexer."""
    if not values:
        return None
    ordered = sorted(values)
    middle = len(ordered) // 2
    if len(ordered) % 2:
        return ordered[middle]
    return (ordered[middle - 1] + ordered[middle]) // 2


def sort_attestations(items: Iterable[Attestation]) -> list[Attestation]:
    """Items in the strictly ascending (round, subject) order ``attest`` requires."""
    return sorted(items, key=Attestation.sort_key)


class Verdict(FrozenModel):
    """Attestation tally of one (round, subject) (``verdict(round, subject)``)."""

    flags: Uint32
    agreements: Uint32
    settled: bool

    @classmethod
    def from_abi(cls, values: Sequence[Any]) -> Verdict:
        flags, agreements, settled = values
        return cls(flags=flags, agreements=agreements, settled=settled)


class Parameters(FrozenModel):
    """Owner-settable parameters (``parameters()``; the constructor's ``params``)."""

    min_stake: Uint96 = Field(gt=0, description="Wei needed to register and to keep publishing.")
    unbonding_period: Uint32 = Field(
        description="Seconds between requestExit and withdraw; "
        "at least (attestation_window_rounds + 1) rounds."
    )
    grace_rounds: Uint16 = Field(
        description="Rounds after round r during which a batch for r is accepted."
    )
    attestation_window_rounds: Uint16 = Field(
        gt=0, description="Rounds after round r during which r may be attested; settle comes after."
    )
    slash_bps: Uint16 = Field(
        le=10_000, description="Share of stake slashed by a lost dispute, basis points."
    )
    dispute_quorum: Uint16 = Field(
        gt=0, description="Flags needed (and more flags than agreements) to slash."
    )
    paused: bool = False

    @classmethod
    def from_abi(cls, values: Sequence[Any]) -> Parameters:
        names = (
            "min_stake",
            "unbonding_period",
            "grace_rounds",
            "attestation_window_rounds",
            "slash_bps",
            "dispute_quorum",
            "paused",
        )
        return cls(**dict(zip(names, values, strict=True)))

    def to_abi(self) -> tuple[Any, ...]:
        return (
            self.min_stake,
            self.unbonding_period,
            self.grace_rounds,
            self.attestation_window_rounds,
            self.slash_bps,
            self.dispute_quorum,
            self.paused,
        )

    def problems(self, round_duration: int) -> list[str]:
        """The contract's cross-field rules, as readable sentences (empty when all hold)."""
        found = []
        if self.grace_rounds > self.attestation_window_rounds:
            found.append(
                f"grace rounds ({self.grace_rounds}) must not exceed the attestation window "
                f"({self.attestation_window_rounds} rounds)"
            )
        minimum = (self.attestation_window_rounds + 1) * round_duration
        if self.unbonding_period < minimum:
            found.append(
                f"the unbonding period ({self.unbonding_period} s) must be at least (attestation "
                f"window + 1) rounds = {minimum} s"
            )
        return found


class TxReceipt(FrozenModel):
    """What a mined, successful transaction left behind."""

    tx_hash: HashHex
    block_number: int
    block_hash: HashHex
    gas_used: int
    effective_gas_price: int
    contract_address: Address | None = None

    @property
    def fee_wei(self) -> int:
        return self.gas_used * self.effective_gas_price

    @classmethod
    def from_web3(cls, receipt: Any) -> TxReceipt:
        return cls(
            tx_hash="0x" + bytes(receipt["transactionHash"]).hex(),
            block_number=receipt["blockNumber"],
            block_hash="0x" + bytes(receipt["blockHash"]).hex(),
            gas_used=receipt["gasUsed"],
            effective_gas_price=receipt.get("effectiveGasPrice", 0),
            contract_address=receipt.get("contractAddress"),
        )

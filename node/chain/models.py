"""Typed values of the coordinator's ABI: peers, phases, rules, verdicts, seals, receipts.

Pydantic models, frozen and validated (integer ranges of the Solidity types, checksummed addresses,
32-byte hashes), each with ``from_abi`` / ``to_abi`` to cross the ABI boundary. In JSON, bytes32
values are ``0x`` + 64 lower-case hex and addresses are EIP-55 (docs/PROTOCOL.md, "Units and
encodings").
"""

from __future__ import annotations

from collections.abc import Sequence
from enum import IntEnum
from typing import Annotated, Any, ClassVar

from eth_utils import (
    is_address,
    is_checksum_address,
    is_checksum_formatted_address,
    to_checksum_address,
)
from pydantic import BaseModel, BeforeValidator, ConfigDict, Field, PlainSerializer, model_validator

ZERO_ADDRESS = "0x0000000000000000000000000000000000000000"


def _checksum(value: Any) -> str:
    if isinstance(value, bytes) and len(value) == 20:
        value = "0x" + value.hex()
    if not isinstance(value, str):
        raise ValueError(f"not an Ethereum address: {value!r}")
    return checksummed(value)


_CHECKSUMMED: dict[str, str] = {}  # an address as asked -> its EIP-55 form
_CHECKSUMMED_KEPT = 1 << 16


def checksummed(address: str) -> str:
    """The EIP-55 form of ``address`` (40 hex digits; in mixed case only with a valid
    checksum, which is what catches a mistyped one). Kept: ingesting a swarm's events
    checksums the same peers' addresses over and over, which was a quarter of a sync. The
    EIP-55 form is kept as its own answer too: a decoder's lower-case address is checksummed,
    then checked again as the model's field."""
    kept = _CHECKSUMMED.get(address)
    if kept is not None:
        return kept
    if not is_address(address):
        raise ValueError(f"not an Ethereum address: {address!r}")
    if is_checksum_formatted_address(address) and not is_checksum_address(address):
        raise ValueError(
            f"not an Ethereum address: {address!r} has a wrong EIP-55 checksum (mistyped?)"
        )
    result = to_checksum_address(address)
    if len(_CHECKSUMMED) >= _CHECKSUMMED_KEPT:
        _CHECKSUMMED.clear()
    _CHECKSUMMED[address] = _CHECKSUMMED[result] = result
    return result


def _bytes32(value: Any) -> bytes:
    if isinstance(value, str):
        text = value.removeprefix("0x")
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
        raise ValueError(f"expected bytes, got {value!r}")  # noqa: TRY004 - pydantic wants it
    return bytes(value)


def _bytes20(value: Any) -> bytes:
    if isinstance(value, str):
        value = _hex_bytes(value)
    if not isinstance(value, (bytes, bytearray)) or len(value) != 20:
        raise ValueError(f"expected 20 bytes, got {value!r}")
    return bytes(value)


def _hash_hex(value: Any) -> str:
    return "0x" + _bytes32(value).hex()


Address = Annotated[str, BeforeValidator(_checksum)]
Bytes32 = Annotated[
    bytes, BeforeValidator(_bytes32), PlainSerializer(lambda b: "0x" + b.hex(), return_type=str)
]
Bytes20 = Annotated[
    bytes, BeforeValidator(_bytes20), PlainSerializer(lambda b: "0x" + b.hex(), return_type=str)
]
HashHex = Annotated[str, BeforeValidator(_hash_hex)]
#: Bytes of any length, ``0x`` + lower-case hex in JSON (and read back from it).
HexBytes = Annotated[
    bytes, BeforeValidator(_hex_bytes), PlainSerializer(lambda b: "0x" + b.hex(), return_type=str)
]
Uint16 = Annotated[int, Field(ge=0, lt=2**16)]
Uint24 = Annotated[int, Field(ge=0, lt=2**24)]
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

    stake: Uint96 = Field(description="Wei held for the peer, pending part included.")
    pending_stake: Uint96 = Field(
        description="Part of stake deposited recently, not voting weight before pending_from."
    )
    pending_from: Uint64 = Field(description="First round in which pending_stake counts.")
    locked_bonds: Uint96 = Field(description="Wei of stake locked by unresolved flags.")
    exit_round: Uint64 = Field(description="Round of requestExit (0 while active).")
    open_disputes: Uint32 = Field(description="Flagged rounds of this peer not settled yet.")
    open_flags: Uint32 = Field(description="Flags this peer revealed that are not resolved.")
    status: PeerStatus

    _FIELDS: ClassVar[tuple[str, ...]] = (
        "stake",
        "pending_stake",
        "pending_from",
        "locked_bonds",
        "exit_round",
        "open_disputes",
        "open_flags",
        "status",
    )

    @classmethod
    def from_abi(cls, values: Sequence[Any]) -> PeerInfo:
        fields = dict(zip(cls._FIELDS, values, strict=True))
        return cls(**(fields | {"status": PeerStatus(fields["status"])}))

    @property
    def is_active(self) -> bool:
        return self.status is PeerStatus.ACTIVE

    @property
    def free_stake(self) -> int:
        """Stake not locked by open flags (what a new flag's bond can lock)."""
        return self.stake - self.locked_bonds

    def counted_stake(self, round: int) -> int:
        """The stake that counts for ``round`` (the contract's weightAt before the status rule)."""
        return self.stake - (self.pending_stake if round < self.pending_from else 0)


class Phases(FrozenModel):
    """The immutable round phases (``graceRounds``, ``commitRounds``, ``revealRounds``).

    Round r: publish r .. r+g; seal and commit r+g+1 .. r+g+c; reveal r+g+c+1 .. r+J;
    settle from r+J+1 (J = g + c + v, ``judging_rounds``).
    """

    grace_rounds: Uint16 = Field(description="Rounds after r during which a batch of r is taken.")
    commit_rounds: int = Field(
        gt=0, lt=2**16, description="Rounds to seal r and commit verdicts on it."
    )
    reveal_rounds: int = Field(
        gt=0, lt=2**16, description="Rounds to reveal committed verdicts on r."
    )

    @classmethod
    def from_abi(cls, values: Sequence[Any]) -> Phases:
        grace, commit, reveal = values
        return cls(grace_rounds=grace, commit_rounds=commit, reveal_rounds=reveal)

    def to_abi(self) -> tuple[int, int, int]:
        return (self.grace_rounds, self.commit_rounds, self.reveal_rounds)

    @property
    def judging_rounds(self) -> int:
        """J = grace + commit + reveal: rounds after r until r can no longer be judged."""
        return self.grace_rounds + self.commit_rounds + self.reveal_rounds

    def publish_phase(self, round: int) -> range:
        """Rounds during which a batch of ``round`` is accepted."""
        return range(round, round + self.grace_rounds + 1)

    def commit_phase(self, round: int) -> range:
        """Rounds during which ``round`` is sealed and verdicts on it are committed."""
        start = round + self.grace_rounds + 1
        return range(start, start + self.commit_rounds)

    def reveal_phase(self, round: int) -> range:
        """Rounds during which committed verdicts on ``round`` are revealed."""
        start = round + self.grace_rounds + self.commit_rounds + 1
        return range(start, start + self.reveal_rounds)

    def settleable_from(self, round: int) -> int:
        """First round in which a flagged batch of ``round`` can be settled."""
        return round + self.judging_rounds + 1

    def withdrawable_from(self, exit_round: int) -> int:
        """First round in which a peer that exited in ``exit_round`` may withdraw: its last rounds
        are judged for J rounds, then settled and reported for J more."""
        return exit_round + 2 * self.judging_rounds + 1

    def committing_rounds(self, current: int) -> range:
        """The rounds whose commit phase contains ``current`` (oldest first)."""
        last = current - self.grace_rounds - 1
        return range(max(0, last - self.commit_rounds + 1), max(0, last + 1))

    def revealing_rounds(self, current: int) -> range:
        """The rounds whose reveal phase contains ``current`` (oldest first)."""
        last = current - self.grace_rounds - self.commit_rounds - 1
        return range(max(0, last - self.reveal_rounds + 1), max(0, last + 1))


_MAX_BPS = 10_000
#: Milli-units of a completion scored 1 (docs/PROTOCOL.md, "Rewards in milli-units").
MILLI_PER_COMPLETION = 1000


def max_reward_milli(tasks_per_round: int, group_size: int) -> int:
    """n * G * 1000: the most a batch of n groups of G can claim or be credited, in milli-units
    (every completion right)."""
    return tasks_per_round * group_size * MILLI_PER_COMPLETION


class Rules(FrozenModel):
    """The rules that judge a round (Solidity ``Rules``; ``rulesAt(round)``).

    ``from_round`` is set by the contract when rules are scheduled (any value passed is ignored).
    """

    from_round: Uint64 = Field(0, description="First round these rules govern (set on chain).")
    flag_bond: int = Field(
        gt=0, lt=2**96, description="Wei locked per flag, forfeited if it loses."
    )
    committee_size: int = Field(
        ge=1, lt=2**16, description="Expected committee seats per batch (k)."
    )
    quorum_bps: int = Field(
        ge=5_000,
        lt=_MAX_BPS,
        description="Flags win above this share of the voted weight (below 10000, so unanimous "
        "flags can win).",
    )
    floor_bps: int = Field(
        ge=0,
        le=_MAX_BPS,
        description="...and at this share of the judging weight but the subject's.",
    )
    slash_bps: int = Field(ge=1, le=_MAX_BPS, description="Share of the stake slashed when upheld.")
    reward_bps: int = Field(ge=0, le=_MAX_BPS, description="Share of a slash paid to the flaggers.")
    tip_bps: int = Field(
        ge=0,
        le=_MAX_BPS,
        description="Share of a slash (or penalty) paid to its settler (reporter).",
    )
    tasks_per_round: int = Field(
        8, ge=1, le=64, description="n: groups in every batch, one per task of the round."
    )
    group_size: int = Field(8, ge=2, le=32, description="G: completions in every group.")

    _FIELDS: ClassVar[tuple[str, ...]] = (
        "from_round",
        "flag_bond",
        "committee_size",
        "quorum_bps",
        "floor_bps",
        "slash_bps",
        "reward_bps",
        "tip_bps",
        "tasks_per_round",
        "group_size",
    )

    @model_validator(mode="after")
    def _shares_fit(self) -> Rules:
        if self.reward_bps + self.tip_bps > _MAX_BPS:
            raise ValueError(
                f"reward_bps + tip_bps ({self.reward_bps} + {self.tip_bps}) must not exceed 10000"
            )
        return self

    @classmethod
    def from_abi(cls, values: Sequence[Any]) -> Rules:
        return cls(**dict(zip(cls._FIELDS, values, strict=True)))

    def to_abi(self) -> tuple[int, ...]:
        return tuple(getattr(self, name) for name in self._FIELDS)

    @property
    def completions_per_batch(self) -> int:
        """n * G: the completions of every batch of a round under these rules."""
        return self.tasks_per_round * self.group_size

    @property
    def max_reward_milli(self) -> int:
        """n * G * 1000: the most a batch can claim or be credited, in milli-units."""
        return max_reward_milli(self.tasks_per_round, self.group_size)


class VerdictState(IntEnum):
    """State of one (round, subject) publication and its verdict (Solidity ``VerdictState``)."""

    NONE = 0
    PUBLISHED = 1
    UPHELD = 2
    REJECTED = 3
    INCONCLUSIVE = 4


class Verdict(FrozenModel):
    """Tally of one (round, subject) (``verdict(round, subject)``)."""

    flag_weight: Uint96 = Field(description="Vote weight of the revealed flags.")
    agree_weight: Uint96 = Field(description="Vote weight of the revealed agreements.")
    flaggers: Uint24 = Field(description="Number of revealed flags.")
    agreers: Uint24 = Field(description="Number of revealed agreements.")
    state: VerdictState

    @classmethod
    def from_abi(cls, values: Sequence[Any]) -> Verdict:
        flag_weight, agree_weight, flaggers, agreers, state = values
        return cls(
            flag_weight=flag_weight,
            agree_weight=agree_weight,
            flaggers=flaggers,
            agreers=agreers,
            state=VerdictState(state),
        )

    @property
    def published(self) -> bool:
        """Whether the subject published a batch for the round."""
        return self.state is not VerdictState.NONE

    @property
    def settled(self) -> bool:
        return self.state > VerdictState.PUBLISHED


class SealInfo(FrozenModel):
    """A sealed round's committee draw (``seal(round)``)."""

    beacon: Bytes20 = Field(description="Randomness fixed when the round was sealed.")
    total_weight: Uint96 = Field(description="Judging weight of all peers for the round (T).")

    @classmethod
    def from_abi(cls, values: Sequence[Any]) -> SealInfo | None:
        """The seal, None when the round is not sealed (zero beacon and weight)."""
        beacon, total_weight = bytes(values[0]), int(values[1])
        if total_weight == 0 and not any(beacon):
            return None
        return cls(beacon=beacon, total_weight=total_weight)


class VerdictItem(FrozenModel):
    """One committee member's verdict on one batch (Solidity ``VerdictItem``).

    A *flag* when ``agreed < checked``, an *agreement* otherwise.
    """

    subject: Address
    checked: Uint32 = Field(description="Completions re-scored (> 0).")
    agreed: Uint32 = Field(description="Completions whose claimed reward matched (<= checked).")
    verified_reward_sum: Int64 = Field(description="Sum of the attester's own scores, milli-units.")

    @property
    def is_flag(self) -> bool:
        return self.agreed < self.checked

    def sort_key(self) -> int:
        """The contract's order: subject as a number."""
        return int(self.subject, 16)

    @classmethod
    def from_abi(cls, values: Sequence[Any]) -> VerdictItem:
        subject, checked, agreed, verified_reward_sum = values
        return cls(
            subject=subject, checked=checked, agreed=agreed, verified_reward_sum=verified_reward_sum
        )

    def to_abi(self) -> tuple[str, int, int, int]:
        return (self.subject, self.checked, self.agreed, self.verified_reward_sum)


def weighted_median_milli(votes: Sequence[tuple[int, int]]) -> int | None:
    """A batch's verified reward: the stake-weighted median of its committee's ``(value, weight)``
    votes (``verifiedRewardSum`` and vote weight; None for none, or no weight).

    The smallest value at which the cumulative weight passes half the total; when it reaches
    exactly half, the mean of that value and the next one, floored (with equal weights this is
    the plain median: an even count averages the middle two). Votes holding less than half the
    weight cannot move it. Shared by ``swarm status`` and the indexer (docs/PROTOCOL.md,
    "Verified reward")."""
    ordered = sorted((value, weight) for value, weight in votes if weight > 0)
    total = sum(weight for _, weight in ordered)
    if not ordered:
        return None
    cumulative = 0
    for index, (value, weight) in enumerate(ordered):
        cumulative += weight
        if 2 * cumulative > total:
            return value
        if 2 * cumulative == total:
            return (value + ordered[index + 1][0]) // 2
    raise AssertionError("unreachable: the weights add up to the total")


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

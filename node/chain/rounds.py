"""Round arithmetic from chain time (docs/PROTOCOL.md, "Rounds and seeds").

Round r covers ``[genesis + r*duration, genesis + (r+1)*duration)``; the contract computes
``currentRound() = (block.timestamp - genesis) / roundDuration`` and ``roundSeed(r) =
keccak256(abi.encode(genesisSeed, uint64 r))``. Everything here is pure: give it the chain's time
(latest block timestamp), not the wall clock, when the two may differ.
"""

from __future__ import annotations

from dataclasses import dataclass

from eth_abi import encode
from eth_utils import keccak


@dataclass(frozen=True)
class RoundClock:
    """Rounds of one deployment: ``genesis`` (Unix seconds) and ``duration`` (seconds per round)."""

    genesis: int
    duration: int

    def __post_init__(self) -> None:
        if self.duration <= 0:
            raise ValueError(f"round duration must be positive, got {self.duration}")
        if self.genesis < 0:
            raise ValueError(f"genesis must be a Unix time, got {self.genesis}")

    def round_at(self, timestamp: int) -> int:
        """The round a block with this timestamp belongs to (the contract's ``currentRound``)."""
        if timestamp < self.genesis:
            raise ValueError(f"time {timestamp} is before genesis {self.genesis}")
        return (timestamp - self.genesis) // self.duration

    def start_of(self, round: int) -> int:
        """First second of ``round``."""
        _check_round(round)
        return self.genesis + round * self.duration

    def end_of(self, round: int) -> int:
        """First second after ``round`` (= start of the next one)."""
        return self.start_of(round + 1)

    def seconds_until_next(self, timestamp: int) -> int:
        """Seconds from ``timestamp`` until the next round starts (1..duration)."""
        return self.end_of(self.round_at(timestamp)) - timestamp

    def elapsed_in_round(self, timestamp: int) -> int:
        """Seconds since the start of the round at ``timestamp``."""
        return (timestamp - self.genesis) % self.duration


def round_seed(genesis_seed: bytes, round: int) -> bytes:
    """``keccak256(abi.encode(genesisSeed, uint64(round)))``, as the contract's ``roundSeed``."""
    _check_round(round)
    if len(genesis_seed) != 32:
        raise ValueError(f"genesis seed must be 32 bytes, got {len(genesis_seed)}")
    return keccak(encode(["bytes32", "uint64"], [genesis_seed, round]))


def _check_round(round: int) -> None:
    if not 0 <= round < 2**64:
        raise ValueError(f"round must be a uint64, got {round}")

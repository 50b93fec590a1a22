"""Response models of the HTTP API (they are also its OpenAPI schema).

Rewards are in reward units (the protocol's milli-units divided by 1000); wei amounts are decimal
strings (they exceed what a JSON number holds exactly), with an ``_eth`` float twin for display.
"""

from __future__ import annotations

from typing import Literal

from pydantic import BaseModel, Field

#: The one definition of a verified batch (coordinator_indexer.derive.is_verified), for the schema.
VERIFIED = (
    "at least one attester agreed, agreements are at least the flags, and the batch was not "
    "slashed"
)


class LeaderboardEntry(BaseModel):
    rank: int = Field(description="Position by verified reward (1 = highest), on every page.")
    address: str = Field(description="The peer's address (EIP-55).")
    name: str
    status: Literal["active", "exiting", "withdrawn"]
    verified_reward: float = Field(
        description="Sum over the peer's batches of the median reward other peers attested."
    )
    claimed_reward: float = Field(description="Sum of the rewards the peer itself claimed.")
    rounds: int = Field(description="Rounds in which the peer published a batch.")
    verified_batches: int = Field(description=f"Of those, batches that are verified: {VERIFIED}.")
    stake_wei: str
    stake_eth: float
    slashes: int
    slashed_wei: str
    flags_received: int = Field(description="Attestations that flagged the peer's batches.")
    attestations_given: int
    last_round: int | None


class Leaderboard(BaseModel):
    total: int = Field(description="Peers in all.")
    limit: int
    offset: int
    sort: str
    order: Literal["asc", "desc"]
    indexed_block: int | None
    entries: list[LeaderboardEntry]


class Batch(BaseModel):
    round: int
    peer: str
    name: str | None = None
    digest: str = Field(description="SHA-256 of the stored batch (the on-chain commitment).")
    groups: int
    completions: int
    claimed_reward: float
    verified_reward: float | None = Field(description="None until another peer attests it.")
    attestations: int
    agreements: int
    flags: int
    settled: bool
    slashed: bool
    relayer: str | None
    block_number: int
    tx_hash: str


class StakeChange(BaseModel):
    kind: Literal["register", "add", "slash", "exit", "withdraw"]
    amount_wei: str
    stake_after_wei: str
    withdrawable_at: int | None
    block_number: int
    tx_hash: str


class Endpoint(BaseModel):
    """A peer's latest store endpoint as announced (docs/PROTOCOL.md, "Store endpoints"); not
    validated here: a node may refuse it (bad encoding, private addresses, another's peer id)."""

    data: str = Field(description="The announced bytes, 0x + lower-case hex.")
    text: str | None = Field(description="The bytes as UTF-8 text; null when they are not UTF-8.")
    block_number: int
    tx_hash: str


class PeerDetail(LeaderboardEntry):
    registered_block: int
    withdrawable_at: int | None
    endpoint: Endpoint | None = Field(
        description="The latest store endpoint the peer announced; null if none or withdrawn."
    )
    batches: list[Batch]
    stake_history: list[StakeChange]


class RoundEntry(BaseModel):
    round: int
    publications: int
    groups: int
    completions: int
    claimed_reward: float
    verified_reward: float
    attested_batches: int
    attestations: int
    flags: int
    disputes: int
    slashes: int


class RoundDetail(RoundEntry):
    batches: list[Batch]


class RoundsPage(BaseModel):
    total: int
    limit: int
    offset: int
    order: Literal["asc", "desc"]
    entries: list[RoundEntry]


class Stats(BaseModel):
    peers: int
    active_peers: int
    slashes: int
    total_stake_wei: str
    rounds: int = Field(description="Rounds with at least one batch.")
    latest_round: int | None = Field(description="Highest round with a batch.")
    current_round: int | None = Field(description="The chain's round at the indexed block.")
    batches: int
    attested_batches: int = Field(description="Batches at least one other peer attested.")
    verified_batches: int = Field(description=f"Batches that are verified: {VERIFIED}.")
    verified_share: float = Field(description="verified_batches / batches (0 when none).")
    attestations: int
    claimed_reward: float
    verified_reward: float
    indexed_block: int | None
    chain_id: int
    coordinator: str


class Health(BaseModel):
    status: Literal["ok", "catching_up", "starting", "error"]
    indexed_block: int | None
    chain_head: int | None
    lag_blocks: int | None = Field(description="chain_head - indexed_block at the last poll.")
    final_block: int | None = Field(description="Indexed rows up to this block are final.")
    confirmations: int | None
    last_update: int | None = Field(description="Unix time of the indexer's last write.")
    error: str | None = None


class Problem(BaseModel):
    detail: str

"""Response models of the HTTP API (they are also its OpenAPI schema; docs/API.md describes it).

Rewards are in reward units (the protocol's milli-units divided by 1000); wei amounts are decimal
strings (they exceed what a JSON number holds exactly), with an ``_eth`` float twin for display.
A batch's reward is a sum over its completions (``PER_BATCH``); a peer's or a round's is a sum of
batch rewards. A batch's rewards are shown as claimed and revealed; totals count them only in range
(``RANGE``).

Fields named with protocol v1's words (``attestations``, ``attester``, ...) are deprecated
aliases: each answer carries them beside their new name, with the same value, until the next
release removes them (``DeprecatedNames``; docs/API.md, "Deprecated names").
"""

from __future__ import annotations

from typing import Any, ClassVar, Literal

from pydantic import BaseModel, Field, model_validator

#: The one definition of a verified batch (coordinator_indexer.derive.batch_is_verified).
VERIFIED = (
    "at least one committee vote agreed, its agreeing vote weight is at least its flagging "
    "weight, it was neither upheld (slashed) nor inconclusive, and its verified reward is not out "
    "of range"
)
#: When a reward counts (coordinator_indexer.round_rules.batch_reward_max_milli).
RANGE = (
    "a batch's claim and verified reward count only within [0, its batch maximum] (n x G x 1000 "
    "milli-units of its round's rules: 2,048 reward at most); one outside is shown as it is and "
    "counts 0"
)
#: What a batch's reward is (docs/PROTOCOL.md, "Rewards in milli-units").
PER_BATCH = "a batch's reward is the sum of the rewards of its n x G completions, not a mean"
#: The one definition of a pending batch (coordinator_indexer.derive.batch_is_pending).
PENDING = (
    "not settled, and either its round's reveal phase is not over (its committee may still "
    "reveal) or a counted flag waits for the dispute to be settled: its outcome can still change"
)
#: When the deprecated names go away.
REMOVAL = "removed in the next release"
#: Committee duty (coordinator_indexer.derive, "Committee duty").
DUTY = (
    "seats held on the committees of other peers' batches (the seat rule over the round's seal, "
    "committee size and the peer's weightAt at the seal)"
)


def deprecated(new: str) -> Any:
    """The field of a deprecated name: the same value as ``new``, flagged deprecated in OpenAPI."""
    return Field(
        description=f"Deprecated name of {new} (a protocol v1 word), {REMOVAL}.",
        deprecated=f"use {new}; {REMOVAL}",
    )


class DeprecatedNames(BaseModel):
    """A model that answers each deprecated name (``renamed``: old -> new) with its new field's
    value; the query functions produce only the new names."""

    renamed: ClassVar[dict[str, str]] = {}

    @model_validator(mode="before")
    @classmethod
    def _fill_deprecated_names(cls, data: Any) -> Any:
        if not isinstance(data, dict):
            return data
        missing = {old: data[new] for old, new in cls.renamed.items() if new in data}
        return {**data, **{old: value for old, value in missing.items() if old not in data}}


class LeaderboardEntry(DeprecatedNames):
    renamed: ClassVar[dict[str, str]] = {"attestations_given": "verdicts_counted"}

    rank: int = Field(description="Position by verified reward (1 = highest), on every page.")
    address: str = Field(description="The peer's address (EIP-55).")
    name: str
    status: Literal["active", "exiting", "withdrawn"]
    verified_reward: float = Field(
        description="Sum over the peer's batches of their verified reward (stake-weighted median "
        "of the committee's revealed sums; 0 for an upheld or inconclusive batch), pending batches "
        f"with what their committee revealed so far; {PER_BATCH}; {RANGE}."
    )
    claimed_reward: float = Field(
        description=f"Sum of the batch rewards the peer itself claimed; {PER_BATCH}; {RANGE}."
    )
    rounds: int = Field(description="Rounds in which the peer published a batch.")
    verified_batches: int = Field(description=f"Of those, batches that are verified: {VERIFIED}.")
    stake_wei: str
    stake_eth: float
    slashes: int
    slashed_wei: str
    flags_received: int = Field(description="Committee votes that flagged the peer's batches.")
    verdicts_counted: int = Field(
        description="The peer's revealed verdicts that counted (VerdictRevealed: it held the seat)."
    )
    pending_batches: int = Field(0, description=f"The peer's batches that are pending: {PENDING}.")
    last_round: int | None
    duty_seats: int = Field(description=f"Committee duty: {DUTY}, in all sealed rounds.")
    duty_done: int = Field(description="Of those seats, the ones the peer revealed a verdict on.")
    duty_missed: int = Field(
        description="Seats without a revealed verdict in rounds whose reveal phase is over."
    )
    out_of_range_batches: int = Field(
        0, description="The peer's batches whose claim or verified reward is out of range."
    )
    attestations_given: int = deprecated("verdicts_counted")


class Leaderboard(BaseModel):
    """One page; ``entries`` stays the last field (``api.leaderboard_body`` splices them in)."""

    total: int = Field(description="Peers in all.")
    limit: int
    offset: int
    sort: str
    order: Literal["asc", "desc"]
    indexed_block: int | None
    entries: list[LeaderboardEntry]


class Vote(DeprecatedNames):
    """One committee member's revealed verdict on a batch."""

    renamed: ClassVar[dict[str, str]] = {"attester": "voter"}

    voter: str = Field(description="The committee member who revealed the verdict (EIP-55).")
    checked: int
    agreed: int
    verified_reward: float = Field(
        description=f"The voter's own reward sum for the batch ({PER_BATCH})."
    )
    in_range: bool = Field(description="Whether it lies within [0, the batch maximum].")
    is_flag: bool = Field(description="agreed < checked.")
    counted: bool = Field(
        description="VerdictRevealed (true) or VerdictIgnored (false: no seat when revealed)."
    )
    weight_wei: str | None = Field(description="Vote weight (wei of stake); null when ignored.")
    block_number: int
    tx_hash: str
    attester: str = deprecated("voter")


class Evidence(BaseModel):
    """One ProvenanceEvidence: where a recomputing seat found the batch not sampled from the
    model it names."""

    poster: str
    group: int = Field(description="The failing group's index in the batch.")
    completion: int = Field(description="The failing completion's index in its group.")
    token: int = Field(description="Its first token below the hard tolerance.")
    block_number: int
    tx_hash: str


class Batch(DeprecatedNames):
    renamed: ClassVar[dict[str, str]] = {"attestations": "verdicts_counted"}

    round: int
    peer: str
    name: str | None = None
    digest: str = Field(description="SHA-256 of the stored batch (the on-chain commitment).")
    groups: int
    completions: int
    claimed_reward: float = Field(
        description=f"The publisher's rewardSum, as claimed ({PER_BATCH})."
    )
    verified_reward: float | None = Field(
        description="Stake-weighted median of the committee's revealed reward sums (0 once "
        "upheld or inconclusive), as it came out; null until a committee vote counts. While the "
        "batch is pending it is what the committee revealed so far."
    )
    reward_max: float = Field(
        description="The batch maximum, the most the batch can be worth: n x G x 1000 "
        "milli-units of its round's rules (tasksPerRound, groupSize), or 2,048 where the indexer "
        "does not know them."
    )
    claimed_in_range: bool = Field(
        description="Whether the claim lies within [0, reward_max] (only then does it count)."
    )
    verified_in_range: bool | None = Field(
        description="Whether the verified reward lies within [0, reward_max] (only then does it "
        "count); null without one."
    )
    verdicts_counted: int = Field(
        description="Committee verdicts that counted (VerdictRevealed): agreements + flags."
    )
    agreements: int
    flags: int
    agree_weight_wei: str = Field(description="Vote weight of the agreeing committee votes.")
    flag_weight_wei: str = Field(description="Vote weight of the flagging committee votes.")
    ignored: int = Field(description="Revealed items that did not count (VerdictIgnored).")
    evidence: int = Field(
        0,
        description="Recomputing seats that posted provenance evidence against the batch "
        "(ProvenanceEvidence: a completion its publisher's model did not sample).",
    )
    outcome: Literal["upheld", "rejected", "inconclusive"] | None = Field(
        description="Settlement (DisputeSettled.outcome): upheld (the flags won: slashed, no "
        "verified reward), rejected (the agreements outweighed the flags), inconclusive (neither "
        "side won: nobody slashed, the flags' bonds returned, no verified reward); null while not "
        "settled (a batch nobody flagged is never settled, and an outcome that is no such state "
        "settles nothing)."
    )
    verified: bool = Field(description=f"Whether the batch is verified: {VERIFIED}.")
    pending: bool = Field(description=f"Whether the batch is pending: {PENDING}.")
    settled: bool
    slashed: bool
    relayer: str | None
    block_number: int
    tx_hash: str
    votes: list[Vote] | None = Field(
        None, description="The committee's revealed votes (in /api/rounds/{round} only)."
    )
    evidence_posted: list[Evidence] | None = Field(
        None, description="The provenance evidence posted on it (in /api/rounds/{round} only)."
    )
    attestations: int = deprecated("verdicts_counted")


class StakeChange(BaseModel):
    kind: Literal["register", "add", "slash", "forfeit", "penalty", "exit", "withdraw"] = Field(
        description="forfeit: a lost flag's bond (FlagResolved); penalty: an agreement with an "
        "upheld batch (AgreementPenalized)."
    )
    amount_wei: str
    stake_after_wei: str
    withdrawable_at: int | None = Field(
        description="exit: the first round in which withdraw can succeed."
    )
    counts_from_round: int | None = Field(
        description="add: the first round in which the added stake is voting weight."
    )
    block_number: int
    tx_hash: str


class Endpoint(BaseModel):
    """A peer's latest store endpoint as announced (docs/PROTOCOL.md, "Store endpoints"); not
    validated here: a node may refuse it (bad encoding, private addresses, another's peer id)."""

    data: str = Field(description="The announced bytes, 0x + lower-case hex.")
    text: str | None = Field(description="The bytes as UTF-8 text; null when they are not UTF-8.")
    block_number: int
    tx_hash: str


class Duty(BaseModel):
    """A peer's committee duty in one sealed round."""

    round: int
    seats: int = Field(description=f"Seats held: {DUTY}.")
    done: int = Field(description="Seats the peer revealed a verdict on.")
    missed: int = Field(description="seats - done once the reveal phase is over, else 0.")
    closed: bool = Field(description="Whether the round's reveal phase is over.")


class PeerDuty(Duty):
    peer: str
    name: str | None = None


class PeerDetail(LeaderboardEntry):
    registered_block: int
    withdrawable_at: int | None = Field(
        description="Exiting: the first round in which withdraw can succeed."
    )
    endpoint: Endpoint | None = Field(
        description="The latest store endpoint the peer announced; null if none or withdrawn."
    )
    batches: list[Batch]
    stake_history: list[StakeChange]
    duties: list[Duty] = Field(description="Committee duty per sealed round, oldest first.")


class RoundEntry(DeprecatedNames):
    renamed: ClassVar[dict[str, str]] = {
        "attested_batches": "batches_with_verdicts",
        "attestations": "verdicts_counted",
    }

    round: int
    publications: int = Field(description="Batches published for the round.")
    groups: int
    completions: int
    claimed_reward: float = Field(description=f"Sum of the batches' claims; {PER_BATCH}; {RANGE}.")
    verified_reward: float = Field(
        description="Sum of the batches' verified rewards (pending ones with what their committee "
        f"revealed so far: see pending); {PER_BATCH}; {RANGE}."
    )
    batches_with_verdicts: int = Field(
        description="Batches at least one committee verdict counted on."
    )
    verdicts_counted: int = Field(description="Committee verdicts that counted (VerdictRevealed).")
    flags: int
    disputes: int = Field(description="Settled disputes: upheld, rejected or inconclusive.")
    slashes: int = Field(description="Of those, upheld ones.")
    sealed: bool = Field(description="Whether the round's committees were drawn (RoundSealed).")
    seats: int = Field(description="Committee seats held on the round's batches, all peers.")
    seats_done: int = Field(description="Of those, seats with a revealed verdict.")
    out_of_range_batches: int = Field(
        0, description="Batches whose claim or verified reward is out of range."
    )
    closed: bool = Field(description="Whether the round's reveal phase is over.")
    pending_batches: int = Field(description=f"The round's batches that are pending: {PENDING}.")
    pending: bool = Field(
        description="Whether the round's outcome can still change: its reveal phase is not over "
        "or one of its batches is pending. Its verified_reward is no verdict yet."
    )
    attested_batches: int = deprecated("batches_with_verdicts")
    attestations: int = deprecated("verdicts_counted")


class RoundDetail(RoundEntry):
    batches: list[Batch]
    duties: list[PeerDuty] = Field(description="Committee duty of each seated peer.")


class RoundsPage(BaseModel):
    total: int
    limit: int
    offset: int
    order: Literal["asc", "desc"]
    entries: list[RoundEntry]


class Stats(DeprecatedNames):
    renamed: ClassVar[dict[str, str]] = {
        "attested_batches": "batches_with_verdicts",
        "attestations": "verdicts_counted",
    }

    peers: int
    active_peers: int
    slashes: int
    total_stake_wei: str
    rounds: int = Field(description="Rounds with at least one batch.")
    latest_round: int | None = Field(description="Highest round with a batch.")
    current_round: int | None = Field(description="The chain's round at the indexed block.")
    batches: int
    batches_with_verdicts: int = Field(
        description="Batches at least one committee verdict counted on."
    )
    verified_batches: int = Field(description=f"Batches that are verified: {VERIFIED}.")
    verified_share: float = Field(description="verified_batches / batches (0 when none).")
    pending_batches: int = Field(description=f"Batches that are pending: {PENDING}.")
    verdicts_counted: int = Field(description="Committee verdicts that counted (VerdictRevealed).")
    claimed_reward: float = Field(description=f"Sum of all claims; {PER_BATCH}; {RANGE}.")
    verified_reward: float = Field(
        description=f"Sum of all verified rewards; {PER_BATCH}; {RANGE}."
    )
    out_of_range_batches: int = Field(
        0, description="Batches whose claim or verified reward is out of range."
    )
    unapplied_events: int = Field(
        0,
        description="Logs kept as they are and applied to nothing: a round above 2^63 - 1, or "
        "values the event decoder refuses (no coordinator emits them).",
    )
    indexed_block: int | None
    chain_id: int
    coordinator: str
    attested_batches: int = deprecated("batches_with_verdicts")
    attestations: int = deprecated("verdicts_counted")


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


class ApiRoute(BaseModel):
    """One endpoint of the API."""

    name: str = Field(description="The endpoint's name.")
    path: str = Field(description="Its path; {braces} mark a path parameter.")
    description: str = Field(description="What it answers, in one line.")
    deprecated: bool = Field(False, description=f"Whether it is deprecated ({REMOVAL}).")


class ApiIndex(BaseModel):
    title: str
    version: str
    docs: str = Field(description="Where the fields are described (docs/API.md, /openapi.json).")
    endpoints: list[ApiRoute]

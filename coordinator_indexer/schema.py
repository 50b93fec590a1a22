"""The indexer's tables (SQLAlchemy Core), the same on SQLite and Postgres.

Two kinds of tables:

- **event tables** hold what the chain said, one row per log, keyed by ``(block_number,
  log_index)`` or by the event's natural key: ``registrations``, ``stake_changes``,
  ``publications``, ``seals`` (+ ``seal_weights``, the peers' ``weightAt`` read at the seal's block),
  ``commits``, ``votes``, ``settlements``, ``flag_resolutions``, ``agreement_penalties``, ``rules``,
  ``claims``, ``endpoints``, ``other_events``, ``unapplied_events``. A reorg deletes the rows
  above the common ancestor, nothing else;
- **derived tables** are functions of the event tables, recomputed for the keys an applied range or a
  rollback touched (``coordinator_indexer.derive``): the verdict and range columns of
  ``publications``, ``peers``, ``duties`` and ``rounds`` (the peers' pending and missed totals
  also of the cursor's round, ``indexer_state.totals_closed_before``). Deleting and recomputing is
  what makes a rollback exact: no derived value is ever patched by a delta that a reorg could
  leave behind.

Bookkeeping: ``indexer_state`` (one row: which deployment, the cursor and its block hash, the last
seen head) and ``blocks`` (hashes of the blocks inside the unconfirmed window, for reorg detection).

Values as the chain gave them, whatever they are (docs/PROTOCOL.md, "Verified reward"; the indexer
never stops on a chain's data):

- wei amounts and weights are ``uint256`` and do not fit a 64-bit integer column, so they are stored
  exactly as decimal text (78 digits at most); a sum of them (a batch's vote weights, a peer's
  slashes) is capped at 2^256 - 1, which no on-chain amount reaches. A ``*_gwei`` integer twin, for
  sorting, is capped at 2^63 - 1;
- rewards are the protocol's int64 milli-units (docs/PROTOCOL.md, "Rewards in milli-units"), stored
  exactly as claimed or revealed. A batch's claim and verified reward count towards totals only
  within [0, its batch maximum] (``publications.reward_max_milli``: n x G x 1000 of the round's
  rules, ``round_rules``), so every total is a sum of values of at most 2,048,000 and cannot
  overflow int64 (that would take 4.5 * 10^12 batches);
- rounds are ``uint64``; the tables hold int64. An event whose round (a key) is above 2^63 - 1 is
  kept as it is in ``unapplied_events`` and applied to nothing; a round that is no key (when stake
  counts, when an exit may withdraw, when rules apply) is capped at 2^63 - 1 ("never");
- a log the event decoder refuses (rules outside the contract's bounds) is kept as raw topics and data in ``unapplied_events`` too (a refused ``ParametersScheduled``
  still tells that its rounds' rules are unknown, ``round_rules``);
- ``DisputeSettled.outcome`` is kept as emitted (any ``uint8``); a value that is no settled
  ``VerdictState`` (2 upheld, 3 rejected, 4 inconclusive) leaves its batch unsettled;
- counts are ``uint32`` and fit a 64-bit column; names have NUL replaced (Postgres text cannot hold
  it) and are cut to 128 characters.

Column names: the event tables name a committee member ``attester``, as the contract's events do
(``VerdictRevealed.attester``). A few derived columns keep names from protocol v1, since renaming
them would take a migration that users would gain nothing from: the HTTP API (``queries``,
``models``, docs/API.md) names them in the protocol's words instead:

    publications.attestations    -> a batch's ``verdicts_counted``
    peers.attestations_given     -> a peer's ``verdicts_counted``
    rounds.attested_batches      -> a round's ``batches_with_verdicts``
    rounds.attestations          -> a round's ``verdicts_counted``
    votes.attester               -> a vote's ``voter``
"""

from __future__ import annotations

from sqlalchemy import (
    BigInteger,
    Boolean,
    Column,
    Index,
    Integer,
    MetaData,
    PrimaryKeyConstraint,
    String,
    Table,
    Text,
)

metadata = MetaData()

#: Largest value of an integer column on both databases (SQLite INTEGER, Postgres bigint).
INT64_MAX = 2**63 - 1
UINT256_MAX = 2**256 - 1

ADDRESS = String(42)
HASH = String(66)
WEI = String(80)


def _position_columns() -> list[Column]:
    """Where a log sits: every event table has these, and rollbacks delete by block_number."""
    return [
        Column("block_number", BigInteger, nullable=False),
        Column("log_index", Integer, nullable=False),
        Column("tx_hash", HASH, nullable=False),
    ]


indexer_state = Table(
    "indexer_state",
    metadata,
    Column("id", Integer, primary_key=True),  # always 1
    Column("chain_id", BigInteger, nullable=False),
    Column("coordinator", ADDRESS, nullable=False),
    Column("deployment_block", BigInteger, nullable=False),
    Column("cursor_block", BigInteger, nullable=False),  # last block fully applied
    Column("cursor_hash", HASH, nullable=False),
    Column("cursor_timestamp", BigInteger, nullable=False),
    Column("chain_head", BigInteger, nullable=False),  # head seen at the last poll
    Column("confirmations", Integer, nullable=False),
    Column("judging_rounds", Integer, nullable=True),  # J = grace + commit + reveal rounds
    Column("genesis", BigInteger, nullable=True),  # the deployment's round 0 start (unix time)
    Column("round_duration", Integer, nullable=True),  # seconds per round
    # the closed_before the peers' pending and missed totals are kept for (-1: none yet; NULL:
    # not kept, recompute every peer's totals: a database migrated to version 8)
    Column("totals_closed_before", BigInteger, nullable=True),
    # one more at every write of indexed data (what a server keeps per state expires: queries)
    Column("state_version", BigInteger, nullable=False, default=0),
    Column("updated_at", BigInteger, nullable=False),  # unix time of the last write
)

blocks = Table(
    "blocks",
    metadata,
    Column("number", BigInteger, primary_key=True),
    Column("hash", HASH, nullable=False),
    Column("parent_hash", HASH, nullable=False),
)

registrations = Table(
    "registrations",
    metadata,
    Column("peer", ADDRESS, primary_key=True),
    Column("name", String(128), nullable=False),
    Column("stake_wei", WEI, nullable=False),
    *_position_columns(),
    Index("ix_registrations_block", "block_number"),
)

# kind: register | add | slash | forfeit | penalty | exit | withdraw. amount_wei: the stake
# registered, added, slashed, forfeited (a lost flag's bond, FlagResolved), taken by an agreement
# penalty or withdrawn ("0" for exit); total_wei: the contract's total after a StakeAdded, else
# NULL; withdrawable_at: v2's withdrawableFromRound (a round); counts_from_round: StakeAdded's;
# exit_round: ExitRequested's.
stake_changes = Table(
    "stake_changes",
    metadata,
    *_position_columns(),
    Column("peer", ADDRESS, nullable=False),
    Column("kind", String(16), nullable=False),
    Column("amount_wei", WEI, nullable=False),
    Column("total_wei", WEI, nullable=True),
    Column("withdrawable_at", BigInteger, nullable=True),
    Column("counts_from_round", BigInteger, nullable=True),
    Column("exit_round", BigInteger, nullable=True),
    PrimaryKeyConstraint("block_number", "log_index"),
    Index("ix_stake_changes_peer", "peer"),
)

publications = Table(
    "publications",
    metadata,
    Column("round", BigInteger, primary_key=True),
    Column("peer", ADDRESS, primary_key=True),
    Column("digest", HASH, nullable=False),
    Column("groups", BigInteger, nullable=False),
    Column("completions", BigInteger, nullable=False),
    Column("claimed_milli", BigInteger, nullable=False),  # the event's rewardSum, as claimed
    Column("relayer", ADDRESS, nullable=True),
    *_position_columns(),
    # derived from votes and settlements (derive.recompute_verdicts); v2 counts only the votes
    # that counted (VerdictRevealed), "ignored" the VerdictIgnored items
    Column("attestations", Integer, nullable=False, default=0),
    Column("agreements", Integer, nullable=False, default=0),
    Column("flags", Integer, nullable=False, default=0),
    Column("verified_milli", BigInteger, nullable=True),  # NULL: no vote counted yet
    Column("settled", Boolean, nullable=False, default=False),
    Column("slashed", Boolean, nullable=False, default=False),
    Column("agree_weight_wei", WEI, nullable=False, default="0"),
    Column("flag_weight_wei", WEI, nullable=False, default="0"),
    Column("ignored", Integer, nullable=False, default=0),
    # upheld | rejected | inconclusive | NULL (not settled: derive.settlement_outcome)
    Column("outcome", String(16), nullable=True),
    Column("verified", Boolean, nullable=False, default=False),  # derive.batch_is_verified
    # the batch maximum (round_rules: n x G x 1000 of the round's rules) and whether the claim
    # and the verified reward lie in [0, maximum] (only then do they count; NULL: none)
    Column("reward_max_milli", BigInteger, nullable=False, default=0),
    Column("claimed_in_range", Boolean, nullable=False, default=False),
    Column("verified_in_range", Boolean, nullable=True),
    Column("evidence", Integer, nullable=False, default=0),  # ProvenanceEvidence events on it
    Index("ix_publications_peer", "peer"),
    Index("ix_publications_block", "block_number"),
)

# RoundSealed, with what the seat rule needs besides the event: the round's committee size
# (rulesAt(round) read at the seal's block).
seals = Table(
    "seals",
    metadata,
    Column("round", BigInteger, primary_key=True),
    Column("beacon", String(42), nullable=False),  # 0x + 40 hex
    Column("total_weight_wei", WEI, nullable=False),
    Column("committee_size", Integer, nullable=False),
    *_position_columns(),
    Index("ix_seals_block", "block_number"),
)

# weightAt(peer, round) of every registered peer with weight > 0, read from the chain at the
# block of the round's seal (keyed by that block, so a rollback of the seal removes them).
seal_weights = Table(
    "seal_weights",
    metadata,
    Column("round", BigInteger, primary_key=True),
    Column("peer", ADDRESS, primary_key=True),
    Column("weight_wei", WEI, nullable=False),
    Column("block_number", BigInteger, nullable=False),
    Index("ix_seal_weights_block", "block_number"),
)

commits = Table(
    "commits",
    metadata,
    Column("round", BigInteger, primary_key=True),
    Column("attester", ADDRESS, primary_key=True),
    *_position_columns(),
    Index("ix_commits_block", "block_number"),
)

# ProvenanceEvidence: a recomputing seat's evidence that a batch was not sampled from its model.
evidence = Table(
    "evidence",
    metadata,
    Column("round", BigInteger, primary_key=True),
    Column("subject", ADDRESS, primary_key=True),
    Column("poster", ADDRESS, primary_key=True),
    Column("group_index", BigInteger, nullable=False),
    Column("completion_index", BigInteger, nullable=False),
    Column("token_index", BigInteger, nullable=False),
    *_position_columns(),
    Index("ix_evidence_block", "block_number"),
)

# VerdictRevealed (counted, with its vote weight) and VerdictIgnored (not counted, weight NULL).
votes = Table(
    "votes",
    metadata,
    Column("round", BigInteger, primary_key=True),
    Column("subject", ADDRESS, primary_key=True),
    Column("attester", ADDRESS, primary_key=True),
    Column("checked", BigInteger, nullable=False),
    Column("agreed", BigInteger, nullable=False),
    Column("verified_milli", BigInteger, nullable=False),  # the event's verifiedRewardSum
    Column("is_flag", Boolean, nullable=False),
    Column("counted", Boolean, nullable=False),
    Column("weight_wei", WEI, nullable=True),
    *_position_columns(),
    Index("ix_votes_attester", "attester"),
    Index("ix_votes_block", "block_number"),
)

# DisputeSettled (v2): the outcome as emitted (VerdictState, uint8: 2 upheld, 3 rejected,
# 4 inconclusive; another value settles nothing), the weights it was decided on, who settled it and
# the tip. slashed: outcome 2.
settlements = Table(
    "settlements",
    metadata,
    Column("round", BigInteger, primary_key=True),
    Column("subject", ADDRESS, primary_key=True),
    Column("outcome", Integer, nullable=False),
    Column("slashed", Boolean, nullable=False),
    Column("amount_wei", WEI, nullable=False),
    Column("flag_weight_wei", WEI, nullable=False),
    Column("agree_weight_wei", WEI, nullable=False),
    Column("settler", ADDRESS, nullable=False),
    Column("tip_wei", WEI, nullable=False),
    *_position_columns(),
    Index("ix_settlements_block", "block_number"),
)

flag_resolutions = Table(
    "flag_resolutions",
    metadata,
    Column("round", BigInteger, primary_key=True),
    Column("subject", ADDRESS, primary_key=True),
    Column("flagger", ADDRESS, primary_key=True),
    Column("upheld", Boolean, nullable=False),
    Column("amount_wei", WEI, nullable=False),
    *_position_columns(),
    Index("ix_flag_resolutions_block", "block_number"),
)

agreement_penalties = Table(
    "agreement_penalties",
    metadata,
    Column("round", BigInteger, primary_key=True),
    Column("subject", ADDRESS, primary_key=True),
    Column("attester", ADDRESS, primary_key=True),
    Column("reporter", ADDRESS, nullable=False),
    Column("amount_wei", WEI, nullable=False),
    Column("reporter_share_wei", WEI, nullable=False),
    *_position_columns(),
    Index("ix_agreement_penalties_block", "block_number"),
)

# ParametersScheduled: one row per event (a later one may replace a pending one on-chain;
# round_rules rebuilds the contract's history). tasks_per_round and group_size: n and G, NULL in a
# row indexed before migration 6 until Indexer.prepare reads its event again.
rules = Table(
    "rules",
    metadata,
    *_position_columns(),
    Column("from_round", BigInteger, nullable=False),
    Column("min_stake_wei", WEI, nullable=False),
    Column("flag_bond_wei", WEI, nullable=False),
    Column("committee_size", Integer, nullable=False),
    Column("quorum_bps", Integer, nullable=False),
    Column("floor_bps", Integer, nullable=False),
    Column("slash_bps", Integer, nullable=False),
    Column("reward_bps", Integer, nullable=False),
    Column("tip_bps", Integer, nullable=False),
    Column("tasks_per_round", Integer, nullable=True),
    Column("group_size", Integer, nullable=True),
    PrimaryKeyConstraint("block_number", "log_index"),
)

claims = Table(
    "claims",
    metadata,
    *_position_columns(),
    Column("account", ADDRESS, nullable=False),
    Column("amount_wei", WEI, nullable=False),
    PrimaryKeyConstraint("block_number", "log_index"),
    Index("ix_claims_account", "account"),
)

# EndpointAnnounced: the bytes as announced, 0x-hex (not validated here: nodes do, docs/PROTOCOL.md,
# "Store endpoints"); /api/peers/{address} shows a peer's latest.
endpoints = Table(
    "endpoints",
    metadata,
    *_position_columns(),
    Column("peer", ADDRESS, nullable=False),
    Column("endpoint", Text, nullable=False),
    PrimaryKeyConstraint("block_number", "log_index"),
    Index("ix_endpoints_peer", "peer"),
)

# Paused, Unpaused, RoundArmed and ownership events: kept as JSON, shown nowhere yet.
other_events = Table(
    "other_events",
    metadata,
    *_position_columns(),
    Column("event", String(64), nullable=False),
    Column("data", Text, nullable=False),
    PrimaryKeyConstraint("block_number", "log_index"),
)

# Logs kept as they are and applied to nothing (schema docstring): a decoded event whose round
# the tables cannot hold (data: the event as JSON, exact integers), or a log the decoder refused
# (data: {"topics": [...], "data": "0x..."}). reason: why, one line.
unapplied_events = Table(
    "unapplied_events",
    metadata,
    *_position_columns(),
    Column("event", String(64), nullable=False),
    Column("reason", Text, nullable=False),
    Column("data", Text, nullable=False),
    PrimaryKeyConstraint("block_number", "log_index"),
)

peers = Table(
    "peers",
    metadata,
    Column("address", ADDRESS, primary_key=True),
    Column("name", String(128), nullable=False),
    Column("registered_block", BigInteger, nullable=False),
    Column("status", String(16), nullable=False),  # active | exiting | withdrawn
    Column("stake_wei", WEI, nullable=False),
    Column("stake_gwei", BigInteger, nullable=False),  # for sorting; capped at INT64_MAX
    Column("withdrawable_at", BigInteger, nullable=True),  # v2: withdrawableFromRound
    Column("rounds", Integer, nullable=False),  # batches published
    Column("verified_batches", Integer, nullable=False),  # of those, verified (derive.is_verified)
    Column("claimed_milli", BigInteger, nullable=False),  # sum of the claims in range
    Column("verified_milli", BigInteger, nullable=False),  # sum of the verified rewards in range
    Column("flags_received", Integer, nullable=False),
    Column("attestations_given", Integer, nullable=False),  # v2: votes that counted
    Column("slashes", Integer, nullable=False),
    Column("slashed_wei", WEI, nullable=False),
    Column("last_round", BigInteger, nullable=True),
    # batches whose claim or verified reward lies outside [0, batch maximum] (counted as 0)
    Column("out_of_range_batches", Integer, nullable=False, default=0),
    # kept up to date as rows are applied and rolled back (derive, "Leaderboard totals"):
    Column("rank", Integer, nullable=True),  # by verified, claimed, address; NULL until ranked
    Column("duty_seats", Integer, nullable=False, default=0),
    Column("duty_done", Integer, nullable=False, default=0),
    Column("duty_missed", Integer, nullable=False, default=0),  # as of totals_closed_before
    Column("pending_batches", Integer, nullable=False, default=0),  # as of totals_closed_before
    Index("ix_peers_verified", "verified_milli"),
    Index("ix_peers_rank", "rank"),
)

# Committee duty per (round, peer): the seats the peer held on the committees of the round's
# published batches (seat rule over the seal and seal_weights), and how many it revealed a verdict
# on. Missed = seats - done once the round's reveal phase is over (computed when read).
duties = Table(
    "duties",
    metadata,
    Column("round", BigInteger, primary_key=True),
    Column("peer", ADDRESS, primary_key=True),
    Column("seats", Integer, nullable=False),
    Column("done", Integer, nullable=False),
    Index("ix_duties_peer", "peer"),
)

rounds = Table(
    "rounds",
    metadata,
    Column("round", BigInteger, primary_key=True),
    Column("publications", Integer, nullable=False),
    Column("groups", BigInteger, nullable=False),
    Column("completions", BigInteger, nullable=False),
    Column("claimed_milli", BigInteger, nullable=False),
    Column("verified_milli", BigInteger, nullable=False),
    Column("attested_batches", Integer, nullable=False),
    Column("attestations", Integer, nullable=False),
    Column("flags", Integer, nullable=False),
    Column("disputes", Integer, nullable=False),
    Column("slashes", Integer, nullable=False),
    Column("sealed", Boolean, nullable=False, default=False),
    Column("seats", Integer, nullable=False, default=0),
    Column("seats_done", Integer, nullable=False, default=0),
    Column("out_of_range_batches", Integer, nullable=False, default=0),
)

#: Tables whose rows a reorg deletes above the common ancestor.
EVENT_TABLES = (
    registrations,
    stake_changes,
    publications,
    seals,
    seal_weights,
    commits,
    evidence,
    votes,
    settlements,
    flag_resolutions,
    agreement_penalties,
    rules,
    claims,
    endpoints,
    other_events,
    unapplied_events,
)
#: Tables compared by the kill-and-resume test and dumped by ``Store.dump`` (all data tables).
DATA_TABLES = (*EVENT_TABLES, peers, duties, rounds, blocks, indexer_state)
#: Tables of protocol v1 that a database upgraded from it keeps (read by nothing; a v2 indexer
#: cannot decode their events): the v1 rows stay for reference.
LEGACY_TABLES = ("attestations", "disputes", "parameter_changes")

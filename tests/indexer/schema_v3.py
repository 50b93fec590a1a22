"""The indexer's tables at schema version 3 (the last release before protocol v2), frozen for the
migration tests: a database made by that release is built from these definitions."""

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

# kind: register | add | slash | exit | withdraw. amount_wei: the stake registered, added, slashed or
# withdrawn ("0" for exit); total_wei: the contract's total after a StakeAdded, else NULL.
stake_changes = Table(
    "stake_changes",
    metadata,
    *_position_columns(),
    Column("peer", ADDRESS, nullable=False),
    Column("kind", String(16), nullable=False),
    Column("amount_wei", WEI, nullable=False),
    Column("total_wei", WEI, nullable=True),
    Column("withdrawable_at", BigInteger, nullable=True),
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
    Column("claimed_milli", BigInteger, nullable=False),  # the event's rewardSum
    Column("relayer", ADDRESS, nullable=True),
    *_position_columns(),
    # derived from attestations and disputes (derive.recompute_verdicts)
    Column("attestations", Integer, nullable=False, default=0),
    Column("agreements", Integer, nullable=False, default=0),
    Column("flags", Integer, nullable=False, default=0),
    Column("verified_milli", BigInteger, nullable=True),  # NULL: nobody attested yet
    Column("settled", Boolean, nullable=False, default=False),
    Column("slashed", Boolean, nullable=False, default=False),
    Index("ix_publications_peer", "peer"),
    Index("ix_publications_block", "block_number"),
)

attestations = Table(
    "attestations",
    metadata,
    Column("round", BigInteger, primary_key=True),
    Column("subject", ADDRESS, primary_key=True),
    Column("attester", ADDRESS, primary_key=True),
    Column("digest", HASH, nullable=False),
    Column("checked", BigInteger, nullable=False),
    Column("agreed", BigInteger, nullable=False),
    Column("verified_milli", BigInteger, nullable=False),  # the event's verifiedRewardSum
    Column("is_flag", Boolean, nullable=False),
    *_position_columns(),
    Index("ix_attestations_attester", "attester"),
    Index("ix_attestations_block", "block_number"),
)

disputes = Table(
    "disputes",
    metadata,
    Column("round", BigInteger, primary_key=True),
    Column("subject", ADDRESS, primary_key=True),
    Column("slashed", Boolean, nullable=False),
    Column("amount_wei", WEI, nullable=False),
    Column("flags", BigInteger, nullable=False),
    Column("agreements", BigInteger, nullable=False),
    *_position_columns(),
    Index("ix_disputes_block", "block_number"),
)

parameter_changes = Table(
    "parameter_changes",
    metadata,
    *_position_columns(),
    Column("name", String(64), nullable=False),
    Column("value", WEI, nullable=False),
    PrimaryKeyConstraint("block_number", "log_index"),
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

# Paused, Unpaused, ownership and treasury events: kept as JSON, shown nowhere yet.
other_events = Table(
    "other_events",
    metadata,
    *_position_columns(),
    Column("event", String(64), nullable=False),
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
    Column("stake_gwei", BigInteger, nullable=False),  # for sorting
    Column("withdrawable_at", BigInteger, nullable=True),
    Column("rounds", Integer, nullable=False),  # batches published
    Column("verified_batches", Integer, nullable=False),  # of those, verified (derive.is_verified)
    Column("claimed_milli", BigInteger, nullable=False),
    Column("verified_milli", BigInteger, nullable=False),
    Column("flags_received", Integer, nullable=False),
    Column("attestations_given", Integer, nullable=False),
    Column("slashes", Integer, nullable=False),
    Column("slashed_wei", WEI, nullable=False),
    Column("last_round", BigInteger, nullable=True),
    Index("ix_peers_verified", "verified_milli"),
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
)

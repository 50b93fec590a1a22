"""Deploying a SwarmCoordinator from the forge artifact and recording the deployment.

``deploy_coordinator`` is the one deploy path: the ``swarm-deploy`` command (``node.chain.deploy``)
and the test fixtures both call it. Defaults (``DeployConfig``) suit a testnet of CPU nodes:

- ``round_duration`` 120 s: one round generates, scores, publishes, fetches peers' batches and
  trains; ~1 minute of that on two CPU cores with the shipped model, the rest is slack;
- phases (immutable): ``grace_rounds`` 1 (a batch of round r is still accepted during r+1),
  ``commit_rounds`` 2 (r is sealed and its committees commit during r+2 and r+3),
  ``reveal_rounds`` 2 (they reveal during r+4 and r+5); r can be settled from r+6, and an exiting
  peer withdraws 2J + 1 = 11 rounds after its exit;
- ``min_stake`` 0.01 ETH; rules of round 0 on: ``flag_bond`` 0.001 ETH per flag,
  ``committee_size`` 64 expected seats per batch, ``quorum_bps`` 5000 (flags must outweigh
  agreements), ``floor_bps`` 3334 (and reach a third of the other peers' weight),
  ``slash_bps`` 1000 (10 % of the stake), ``reward_bps`` 5000 (half the slash to the flaggers),
  ``tip_bps`` 500 (5 % to whoever settles); the rest of a slash is burned;
- ``seed_input`` random: the deployer's contribution to the genesis seed, kept in the record.

The constructor's arguments are matched by name against the artifact's ABI (``roundDuration``,
``seedInput``, the ``Phases`` and ``Rules`` tuples' fields, ``minStake``...), so the encoding
follows the contract's declaration.
"""

from __future__ import annotations

import secrets
from collections.abc import Callable
from pathlib import Path
from typing import Any

from eth_abi import encode
from eth_account.signers.local import LocalAccount
from pydantic import BaseModel, ConfigDict, Field, model_validator
from web3 import Web3

from node.chain.abi import (
    abi_sha256,
    abi_type_string,
    artifact_bytecode,
    combined_abi,
    load_artifact,
    snake_case,
)
from node.chain.client import CoordinatorClient
from node.chain.deployment import Deployment
from node.chain.errors import ArtifactMissing, InsufficientFunds
from node.chain.models import Bytes32, Phases, Rules, TxReceipt
from node.chain.rpc import DEFAULT_RETRY, RetryPolicy, call_with_retry, endpoint_of
from node.chain.transactions import TransactionSender
from node.chain.units import format_duration, format_eth

Progress = Callable[[str], None]
_BPS = 10_000
#: The contract's MAX_PHASE_ROUNDS: the most rounds of one phase.
MAX_PHASE_ROUNDS = 64


class DeployConfig(BaseModel):
    """Constructor arguments of a coordinator (defaults explained in the module docstring)."""

    model_config = ConfigDict(frozen=True, extra="forbid")

    round_duration: int = Field(
        120, gt=0, lt=2**64, description="Seconds per round; fixed for good."
    )
    seed_input: Bytes32 = Field(
        default_factory=lambda: secrets.token_bytes(32),
        description="Deployer's 32-byte contribution to the genesis seed [default: random].",
    )
    grace_rounds: int = Field(
        1,
        ge=0,
        le=MAX_PHASE_ROUNDS,
        description="Rounds after round r during which a batch of r is taken.",
    )
    commit_rounds: int = Field(
        2,
        ge=1,
        le=MAX_PHASE_ROUNDS,
        description="Rounds in which r is sealed and verdicts on it committed.",
    )
    reveal_rounds: int = Field(
        2,
        ge=1,
        le=MAX_PHASE_ROUNDS,
        description="Rounds in which committed verdicts on r are revealed.",
    )
    min_stake: int = Field(
        10**16,
        gt=0,
        lt=2**96,
        description="Minimum stake to register: wei here, ETH (or 'N wei') on the command line.",
    )
    flag_bond: int = Field(
        10**15,
        gt=0,
        lt=2**96,
        description="Bond locked per flag, lost to the subject if the flag loses; also what an "
        "agreement with an upheld batch costs (wei here, ETH on the command line).",
    )
    committee_size: int = Field(
        64, ge=1, lt=2**16, description="Expected committee seats per batch."
    )
    quorum_bps: int = Field(
        5000,
        ge=5000,
        lt=_BPS,
        description="Flags win above this share of the weight that voted (below 10000).",
    )
    floor_bps: int = Field(
        3334,
        ge=0,
        le=_BPS,
        description="...and when they reach this share of all judging weight but the subject's.",
    )
    slash_bps: int = Field(
        1000, ge=1, le=_BPS, description="Share of the subject's stake slashed when flags win."
    )
    reward_bps: int = Field(
        5000, ge=0, le=_BPS, description="Share of a slash paid to the winning flaggers."
    )
    tip_bps: int = Field(
        500,
        ge=0,
        le=_BPS,
        description="Share of a slash paid to its settler (and of an agreement penalty to its "
        "reporter); the rest of a slash is burned.",
    )
    commit_deposit: int = Field(
        10**14,
        gt=0,
        lt=2**96,
        description="Wei every commitment carries; its reveal sends it back, a ballot never "
        "revealed loses it (wei here, ETH on the command line).",
    )
    tasks_per_round: int = Field(
        8,
        ge=1,
        le=64,
        description="Groups in every batch, one per task of the round (the task preset must "
        "derive at least this many).",
    )
    group_size: int = Field(8, ge=2, le=32, description="Completions in every group (G).")

    @model_validator(mode="after")
    def _cross_checks(self) -> DeployConfig:
        self.rules()  # raises on reward_bps + tip_bps > 10000
        return self

    def phases(self) -> Phases:
        return Phases(
            grace_rounds=self.grace_rounds,
            commit_rounds=self.commit_rounds,
            reveal_rounds=self.reveal_rounds,
        )

    def rules(self) -> Rules:
        """The rules of round 0 on (``from_round`` 0)."""
        return Rules(
            from_round=0,
            flag_bond=self.flag_bond,
            committee_size=self.committee_size,
            quorum_bps=self.quorum_bps,
            floor_bps=self.floor_bps,
            slash_bps=self.slash_bps,
            reward_bps=self.reward_bps,
            tip_bps=self.tip_bps,
            tasks_per_round=self.tasks_per_round,
            group_size=self.group_size,
        )

    def with_batch_shape(self, shape: tuple[int, int]) -> DeployConfig:
        """This deployment with the batch shape ``(n, G)`` (a swarm's nodes produce exactly it)."""
        tasks_per_round, group_size = shape
        shape = {"tasks_per_round": tasks_per_round, "group_size": group_size}
        return self.model_copy(update=shape)

    def constructor_values(self) -> dict[str, Any]:
        """Every value a constructor may ask for, by snake_case name."""
        values: dict[str, Any] = {name: getattr(self, name) for name in type(self).model_fields}
        values |= {"from_round": 0, "phases": self.phases(), "rules": self.rules()}
        return values


def _argument(item: dict[str, Any], values: dict[str, Any]) -> Any:
    """The value of one constructor input (a tuple is built from its components' names)."""
    if item["type"] == "tuple":
        return tuple(_argument(component, values) for component in item["components"])
    name = snake_case(str(item["name"]).strip("_"))
    if name not in values:
        raise ArtifactMissing(
            f"the contract's constructor takes {item['name']!r}, which DeployConfig does not "
            "know: this software does not match the contract build"
        )
    return values[name]


def constructor_data(artifact: dict[str, Any], config: DeployConfig) -> bytes:
    """Creation code followed by the ABI-encoded constructor arguments, matched by name."""
    inputs = next((item["inputs"] for item in artifact["abi"] if item["type"] == "constructor"), [])
    values = config.constructor_values()
    args = encode(
        [abi_type_string(item) for item in inputs], [_argument(item, values) for item in inputs]
    )
    return artifact_bytecode(artifact) + args


def deploy_coordinator(
    w3: Web3,
    account: LocalAccount,
    config: DeployConfig,
    *,
    artifact_path: Path | None = None,
    out: Path | None = None,
    progress: Progress = lambda message: None,
    retry: RetryPolicy = DEFAULT_RETRY,
    receipt_timeout: float = 300.0,
) -> Deployment:
    """Deploys with ``config`` from ``account``; returns its record (saved to ``out``)."""
    artifact = load_artifact(artifact_path)
    if abi_sha256(combined_abi(artifact_path)) != abi_sha256():
        raise ArtifactMissing(
            "the forge artifact's ABI differs from the committed ABI: run "
            "`python -m node.chain.abi --write` (and commit it) or rebuild the contracts"
        )
    chain_id = _describe_chain(w3, account, progress, retry)
    sender = TransactionSender(w3, account, retry=retry, receipt_timeout=receipt_timeout)
    progress(
        f"deploying SwarmCoordinator: rounds of {format_duration(config.round_duration)}, "
        f"min stake {format_eth(config.min_stake)}"
    )
    try:
        receipt = sender.send(
            to=None, data=constructor_data(artifact, config), what="deploying SwarmCoordinator"
        )
    except InsufficientFunds as exc:
        raise InsufficientFunds(f"{exc} (deployer {account.address} on chain {chain_id})") from None
    address = receipt.contract_address
    progress(f"deployed at {address} in block {receipt.block_number} (gas used {receipt.gas_used})")
    deployment = _record(w3, account, config, receipt, chain_id, retry)
    if out is not None:
        deployment.save(out)
        progress(f"wrote {out}")
    return deployment


def _describe_chain(w3: Web3, account: LocalAccount, progress: Progress, retry: RetryPolicy) -> int:
    where = endpoint_of(w3)
    chain_id = int(
        call_with_retry(lambda: w3.eth.chain_id, what="connecting", endpoint=where, policy=retry)
    )
    balance = int(
        call_with_retry(
            lambda: w3.eth.get_balance(account.address),
            what="reading the balance",
            endpoint=where,
            policy=retry,
        )
    )
    progress(
        f"connected to {where}: chain {chain_id}; deployer {account.address} holds "
        f"{format_eth(balance)}"
    )
    if balance == 0:
        raise InsufficientFunds(
            f"the deployer {account.address} has no ether on chain {chain_id}: "
            "fund it first (deployment costs gas)"
        )
    return chain_id


def _record(
    w3: Web3,
    account: LocalAccount,
    config: DeployConfig,
    receipt: TxReceipt,
    chain_id: int,
    retry: RetryPolicy,
) -> Deployment:
    address = receipt.contract_address
    if address is None:
        raise ArtifactMissing(
            f"transaction {receipt.tx_hash} created no contract: is the artifact creation code?"
        )
    client = CoordinatorClient(w3, address, retry=retry)
    return Deployment(
        chain_id=chain_id,
        coordinator=address,
        deployment_block=receipt.block_number,
        block_hash=receipt.block_hash,
        tx_hash=receipt.tx_hash,
        deployer=account.address,
        abi_sha256=abi_sha256(),
        genesis=client.genesis(),
        round_duration=client.round_duration(),
        genesis_seed="0x" + client.genesis_seed().hex(),
        seed_input="0x" + config.seed_input.hex(),
        phases=client.phases(),
        min_stake=client.min_stake(),
        rules=client.rules_at(0),
    )

"""Deploying a SwarmCoordinator from the forge artifact and recording the deployment.

``deploy_coordinator`` is the one deploy path: the ``swarm-deploy`` command (``node.chain.deploy``)
and the test fixtures both call it. Defaults (``DeployConfig``) suit a testnet of CPU nodes:

- ``round_duration`` 120 s: one round generates, scores, publishes, fetches peers' batches and
  trains; ~1 minute of that on two CPU cores with the shipped model, the rest is slack;
- ``grace_rounds`` 1: a batch of round r is still accepted during round r+1 (slow nodes);
- ``attestation_window_rounds`` 2: receivers verify during r+1 and attest by the end of r+2;
- ``unbonding_period`` 3600 s, and never less than (window + 1) rounds, so a flagged peer cannot
  leave before its dispute can be settled;
- ``min_stake`` 0.01 ETH; ``slash_bps`` 1000 (10 % of the stake per lost dispute);
- ``dispute_quorum`` 2: one flagger alone never slashes anyone;
- ``seed_input`` random: the deployer's contribution to the genesis seed, kept in the record.
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

from node.chain.abi import abi_sha256, artifact_bytecode, load_artifact
from node.chain.client import CoordinatorClient
from node.chain.deployment import Deployment
from node.chain.errors import ArtifactMissing, InsufficientFunds
from node.chain.models import Bytes32, Parameters, TxReceipt
from node.chain.rpc import DEFAULT_RETRY, RetryPolicy, call_with_retry, endpoint_of
from node.chain.transactions import TransactionSender
from node.chain.units import format_duration, format_eth

_PARAMS_TUPLE = "(uint96,uint32,uint16,uint16,uint16,uint16,bool)"

Progress = Callable[[str], None]


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
    min_stake: int = Field(
        10**16,
        gt=0,
        lt=2**96,
        description="Minimum stake to register: wei here, ETH (or 'N wei') on the command line.",
    )
    unbonding_period: int | None = Field(
        None,
        description="Seconds between request-exit and withdraw "
        "[default: max(3600, (window + 1) rounds)].",
    )
    grace_rounds: int = Field(
        1,
        ge=0,
        lt=2**16,
        description="Rounds after round r during which a batch for r is still accepted.",
    )
    attestation_window_rounds: int = Field(
        2,
        gt=0,
        lt=2**16,
        description="Rounds after round r during which r may be attested; settling comes after.",
    )
    slash_bps: int = Field(
        1000,
        ge=0,
        le=10_000,
        description="Share of stake slashed by a lost dispute, in basis points.",
    )
    dispute_quorum: int = Field(
        2,
        gt=0,
        lt=2**16,
        description="Flags needed (and more flags than agreements) to slash.",
    )

    @model_validator(mode="after")
    def _cross_checks(self) -> DeployConfig:
        problems = self.parameters().problems(self.round_duration)
        if problems:
            raise ValueError("; ".join(problems))
        return self

    def resolved_unbonding_period(self) -> int:
        if self.unbonding_period is not None:
            return self.unbonding_period
        return max(3600, (self.attestation_window_rounds + 1) * self.round_duration)

    def parameters(self) -> Parameters:
        return Parameters(
            min_stake=self.min_stake,
            unbonding_period=self.resolved_unbonding_period(),
            grace_rounds=self.grace_rounds,
            attestation_window_rounds=self.attestation_window_rounds,
            slash_bps=self.slash_bps,
            dispute_quorum=self.dispute_quorum,
        )


def constructor_data(artifact: dict[str, Any], config: DeployConfig) -> bytes:
    """Creation code followed by the ABI-encoded ``(roundDuration_, seedInput, params)``."""
    args = encode(
        ["uint64", "bytes32", _PARAMS_TUPLE],
        [config.round_duration, config.seed_input, config.parameters().to_abi()],
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
    if abi_sha256(artifact["abi"]) != abi_sha256():
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
        parameters=client.parameters(),
    )

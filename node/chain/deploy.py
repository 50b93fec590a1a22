"""Deploying a SwarmCoordinator from the forge artifact and writing its deployment record.

``deploy_coordinator`` is the one deploy path: the ``swarm-deploy`` command and the test fixtures
both call it. Defaults (``DeployConfig``) suit a testnet of CPU nodes:

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

import os
import secrets
import sys
from collections.abc import Callable
from pathlib import Path
from typing import Any

import click
from eth_abi import encode
from eth_account import Account
from eth_account.signers.local import LocalAccount
from pydantic import BaseModel, ConfigDict, Field, ValidationError, model_validator
from web3 import Web3

from node.chain.abi import abi_sha256, artifact_bytecode, load_artifact
from node.chain.client import CoordinatorClient
from node.chain.deployment import Deployment
from node.chain.errors import ArtifactMissing, ChainError, InsufficientFunds
from node.chain.models import Bytes32, Parameters, TxReceipt
from node.chain.rpc import RetryPolicy, call_with_retry, connect, endpoint_of
from node.chain.transactions import TransactionSender
from node.chain.units import format_duration, format_eth, parse_eth

DEFAULT_RPC_URL = "http://127.0.0.1:8545"
DEFAULT_KEY_ENV = "SWARM_DEPLOYER_KEY"
LOCAL_CHAIN_IDS = (31337, 1337)
_PARAMS_TUPLE = "(uint96,uint32,uint16,uint16,uint16,uint16,bool)"

Progress = Callable[[str], None]


class DeployConfig(BaseModel):
    """Constructor arguments of a coordinator (see the module docstring for the defaults' reasons)."""

    model_config = ConfigDict(frozen=True, extra="forbid")

    round_duration: int = Field(120, gt=0, lt=2**64, description="Seconds per round (fixed for good).")
    seed_input: Bytes32 = Field(default_factory=lambda: secrets.token_bytes(32),
                                description="Deployer's contribution to the genesis seed.")
    min_stake: int = Field(10**16, gt=0, lt=2**96, description="Wei needed to register.")
    unbonding_period: int | None = Field(None, description="Seconds from requestExit to withdraw; "
                                                           "default max(3600, (window + 1) rounds).")
    grace_rounds: int = Field(1, ge=0, lt=2**16, description="Rounds a late batch is still accepted.")
    attestation_window_rounds: int = Field(2, gt=0, lt=2**16, description="Rounds to attest a round.")
    slash_bps: int = Field(1000, ge=0, le=10_000, description="Stake share slashed per lost dispute (bps).")
    dispute_quorum: int = Field(2, gt=0, lt=2**16, description="Flags needed to slash.")

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
        return Parameters(min_stake=self.min_stake, unbonding_period=self.resolved_unbonding_period(),
                          grace_rounds=self.grace_rounds, attestation_window_rounds=self.attestation_window_rounds,
                          slash_bps=self.slash_bps, dispute_quorum=self.dispute_quorum)


def constructor_data(artifact: dict[str, Any], config: DeployConfig) -> bytes:
    """Creation code followed by the ABI-encoded ``(roundDuration_, seedInput, params)``."""
    args = encode(["uint64", "bytes32", _PARAMS_TUPLE],
                  [config.round_duration, config.seed_input, config.parameters().to_abi()])
    return artifact_bytecode(artifact) + args


def deploy_coordinator(
    w3: Web3,
    account: LocalAccount,
    config: DeployConfig,
    *,
    artifact_path: Path | None = None,
    out: Path | None = None,
    progress: Progress = lambda message: None,
    retry: RetryPolicy = RetryPolicy(),
    receipt_timeout: float = 300.0,
) -> Deployment:
    """Deploys a coordinator with ``config`` from ``account``; returns (and saves to ``out``) its record."""
    artifact = load_artifact(artifact_path)
    if abi_sha256(artifact["abi"]) != abi_sha256():
        raise ArtifactMissing("the forge artifact's ABI differs from the committed ABI: run "
                              "`python -m node.chain.abi --write` (and commit it) or rebuild the contracts")
    chain_id = _describe_chain(w3, account, progress, retry)
    sender = TransactionSender(w3, account, retry=retry, receipt_timeout=receipt_timeout)
    progress(f"deploying SwarmCoordinator: rounds of {format_duration(config.round_duration)}, "
             f"min stake {format_eth(config.min_stake)}")
    try:
        receipt = sender.send(to=None, data=constructor_data(artifact, config), what="deploying SwarmCoordinator")
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
    chain_id = int(call_with_retry(lambda: w3.eth.chain_id, what="connecting", endpoint=where, policy=retry))
    balance = int(call_with_retry(lambda: w3.eth.get_balance(account.address), what="reading the balance",
                                  endpoint=where, policy=retry))
    progress(f"connected to {where}: chain {chain_id}; deployer {account.address} holds {format_eth(balance)}")
    if balance == 0:
        raise InsufficientFunds(f"the deployer {account.address} has no ether on chain {chain_id}: "
                                "fund it first (deployment costs gas)")
    return chain_id


def _record(w3: Web3, account: LocalAccount, config: DeployConfig, receipt: TxReceipt, chain_id: int,
            retry: RetryPolicy) -> Deployment:
    client = CoordinatorClient(w3, receipt.contract_address, retry=retry)
    return Deployment(
        chain_id=chain_id, coordinator=receipt.contract_address, deployment_block=receipt.block_number,
        block_hash=receipt.block_hash, tx_hash=receipt.tx_hash, deployer=account.address,
        abi_sha256=abi_sha256(), genesis=client.genesis(), round_duration=client.round_duration(),
        genesis_seed=client.genesis_seed(), seed_input=config.seed_input, parameters=client.parameters(),
    )


def default_out_path(chain_id: int) -> Path:
    """``deployments/local.json`` for a local dev chain, ``deployments/<chain id>.json`` otherwise."""
    return Path("deployments") / ("local.json" if chain_id in LOCAL_CHAIN_IDS else f"{chain_id}.json")


def account_from_env(name: str) -> LocalAccount:
    """The account whose hex private key is in environment variable ``name`` (never echoed)."""
    key = os.environ.get(name, "").strip()
    if not key:
        raise click.ClickException(f"set the environment variable {name} to the deployer's private key "
                                   "(hex); keys are never taken on the command line")
    try:
        return Account.from_key(key)
    except (ValueError, TypeError):
        raise click.ClickException(f"{name} does not hold a valid private key (64 hex digits)") from None


# ------------------------------------------------------------------------------------------ CLI


def _eth_amount(ctx: click.Context, param: click.Parameter, value: str) -> int:
    try:
        return parse_eth(value)
    except ValueError as exc:
        raise click.BadParameter(str(exc)) from None


@click.command(context_settings={"help_option_names": ["-h", "--help"], "max_content_width": 100})
@click.option("--rpc-url", envvar="SWARM_RPC_URL", default=DEFAULT_RPC_URL, show_default=True,
              help="JSON-RPC URL of the chain [env SWARM_RPC_URL].")
@click.option("--key-env", default=DEFAULT_KEY_ENV, show_default=True, metavar="NAME",
              help="Name of the environment variable holding the deployer's hex private key.")
@click.option("--out", type=click.Path(dir_okay=False, path_type=Path), default=None,
              help="Deployment file to write [default: deployments/local.json on a dev chain, "
                   "deployments/<chain id>.json otherwise].")
@click.option("--force", is_flag=True, help="Overwrite an existing deployment file.")
@click.option("--artifact", type=click.Path(dir_okay=False, path_type=Path), default=None,
              help="forge artifact to deploy [default: contracts/out/SwarmCoordinator.sol/SwarmCoordinator.json].")
@click.option("--round-duration", type=click.IntRange(min=1), default=120, show_default=True,
              help="Seconds per round; fixed for good.")
@click.option("--seed-input", default=None, metavar="HEX32",
              help="Deployer's 32-byte contribution to the genesis seed [default: random].")
@click.option("--min-stake", default="0.01", show_default=True, callback=_eth_amount,
              help="Minimum stake to register, in ETH (or '1000 wei').")
@click.option("--unbonding-period", type=click.IntRange(min=1), default=None,
              help="Seconds between request-exit and withdraw [default: max(3600, (window + 1) rounds)].")
@click.option("--grace-rounds", type=click.IntRange(min=0), default=1, show_default=True,
              help="Rounds after round r during which a batch for r is still accepted.")
@click.option("--attestation-window-rounds", type=click.IntRange(min=1), default=2, show_default=True,
              help="Rounds after round r during which r may be attested; settling comes after.")
@click.option("--slash-bps", type=click.IntRange(0, 10_000), default=1000, show_default=True,
              help="Share of stake slashed by a lost dispute, in basis points.")
@click.option("--dispute-quorum", type=click.IntRange(min=1), default=2, show_default=True,
              help="Flags needed (and more flags than agreements) to slash.")
@click.option("--timeout", type=click.FloatRange(min=1), default=300, show_default=True,
              help="Seconds to wait for the deployment to be mined.")
def main(rpc_url: str, key_env: str, out: Path | None, force: bool, artifact: Path | None, round_duration: int,
         seed_input: str | None, min_stake: int, unbonding_period: int | None, grace_rounds: int,
         attestation_window_rounds: int, slash_bps: int, dispute_quorum: int, timeout: float) -> None:
    """Deploy a SwarmCoordinator and write its deployment file (what nodes and the indexer load).

    The deployer's private key is read from the environment variable named by --key-env; it is never
    accepted on the command line and never printed. The contract comes from the forge build
    (scripts/bootstrap builds it). The deployer becomes the owner and the treasury.

    \b
    Examples:
      # a local Anvil chain (anvil's first dev key), defaults for everything else
      export SWARM_DEPLOYER_KEY=0xac0974bec39a17e36ba4a6b4d238ff944bacb478cbed5efcae784d7bf4f2ff80
      swarm-deploy
      # a public testnet: ten-minute rounds, 0.05 ETH stake, 30 % slashing
      SWARM_RPC_URL=https://sepolia.example.org swarm-deploy --round-duration 600 \\
          --min-stake 0.05 --slash-bps 3000 --out deployments/sepolia.json
    """
    try:
        config = DeployConfig(
            round_duration=round_duration, min_stake=min_stake, unbonding_period=unbonding_period,
            grace_rounds=grace_rounds, attestation_window_rounds=attestation_window_rounds,
            slash_bps=slash_bps, dispute_quorum=dispute_quorum,
            **({"seed_input": seed_input} if seed_input else {}),
        )
    except ValidationError as exc:
        raise click.UsageError("; ".join(e["msg"].removeprefix("Value error, ") for e in exc.errors())) from None
    account = account_from_env(key_env)
    _run(rpc_url, account, config, out=out, force=force, artifact=artifact, timeout=timeout)


def _run(rpc_url: str, account: LocalAccount, config: DeployConfig, *, out: Path | None, force: bool,
         artifact: Path | None, timeout: float) -> None:
    def progress(message: str) -> None:
        click.echo(message, err=True)

    w3 = connect(rpc_url)
    retry = RetryPolicy(attempts=3, initial_delay=0.5)
    try:
        if out is None:
            chain_id = call_with_retry(lambda: w3.eth.chain_id, what="connecting", endpoint=rpc_url, policy=retry)
            out = default_out_path(int(chain_id))
        if out.exists() and not force:
            raise click.ClickException(f"{out} exists (a live deployment?): pass --force to overwrite it, "
                                       "or choose another --out")
        deployment = deploy_coordinator(w3, account, config, artifact_path=artifact, out=out, progress=progress,
                                        retry=retry, receipt_timeout=timeout)
    except ChainError as exc:
        raise click.ClickException(str(exc)) from None
    click.echo(deployment.coordinator)


if __name__ == "__main__":
    sys.exit(main())

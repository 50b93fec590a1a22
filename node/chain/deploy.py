"""``swarm-deploy``: deploy a SwarmCoordinator from the command line and write its deployment file.

The work is done by :func:`node.chain.deployer.deploy_coordinator` (re-exported here with
:class:`~node.chain.deployer.DeployConfig`); this module reads the key from the environment, turns
options into a ``DeployConfig``, prints progress to stderr and the new address to stdout, and turns
chain errors into one-line messages.
"""

from __future__ import annotations

import os
import sys
from collections.abc import Callable
from pathlib import Path
from typing import Any

import click
from eth_account import Account
from eth_account.signers.local import LocalAccount
from pydantic import ValidationError

from node.chain.deployer import MAX_PHASE_ROUNDS, DeployConfig, deploy_coordinator
from node.chain.errors import ChainError
from node.chain.rpc import RetryPolicy, call_with_retry, connect
from node.chain.units import format_eth, parse_eth

__all__ = ["DeployConfig", "account_from_env", "default_out_path", "deploy_coordinator", "main"]

DEFAULT_RPC_URL = "http://127.0.0.1:8545"
DEFAULT_KEY_ENV = "SWARM_DEPLOYER_KEY"
LOCAL_CHAIN_IDS = (31337, 1337)
_ETH_OPTIONS = ("min_stake", "flag_bond", "commit_deposit")


def default_out_path(chain_id: int) -> Path:
    """``deployments/local.json`` on a local dev chain, else ``deployments/<chain id>.json``."""
    return Path("deployments") / (
        "local.json" if chain_id in LOCAL_CHAIN_IDS else f"{chain_id}.json"
    )


def account_from_env(name: str) -> LocalAccount:
    """The account whose hex private key is in environment variable ``name`` (never echoed)."""
    key = os.environ.get(name, "").strip()
    if not key:
        raise click.ClickException(
            f"set the environment variable {name} to the deployer's private key "
            "(hex); keys are never taken on the command line"
        )
    try:
        return Account.from_key(key)
    except (ValueError, TypeError):
        raise click.ClickException(
            f"{name} does not hold a valid private key (64 hex digits)"
        ) from None


def _eth_amount(ctx: click.Context, param: click.Parameter, value: str) -> int:
    try:
        return parse_eth(value)
    except ValueError as exc:
        raise click.BadParameter(str(exc)) from None


def _bytes32(ctx: click.Context, param: click.Parameter, value: str | None) -> bytes | None:
    if value is None:
        return None
    try:
        raw = bytes.fromhex(value.removeprefix("0x"))
    except ValueError:
        raw = b""
    if len(raw) != 32:
        raise click.BadParameter("expected 32 bytes as 64 hex digits (0x optional)")
    return raw


def _config_option(name: str, value_type: Any, **kwargs: Any) -> Callable[[Any], Any]:
    """A click option for ``DeployConfig.<name>``: its default and help come from the model."""
    field = DeployConfig.model_fields[name]
    default = field.default if field.default_factory is None else None
    if name in _ETH_OPTIONS:  # the CLI takes ETH, the model holds wei
        default = format_eth(default).removesuffix(" ETH")
    return click.option(
        f"--{name.replace('_', '-')}",
        type=value_type,
        default=default,
        show_default=default is not None,
        help=field.description,
        **kwargs,
    )


@click.command(context_settings={"help_option_names": ["-h", "--help"], "max_content_width": 100})
@click.option(
    "--rpc-url",
    envvar="SWARM_RPC_URL",
    default=DEFAULT_RPC_URL,
    show_default=True,
    help="JSON-RPC URL of the chain [env SWARM_RPC_URL].",
)
@click.option(
    "--key-env",
    default=DEFAULT_KEY_ENV,
    show_default=True,
    metavar="NAME",
    help="Name of the environment variable holding the deployer's hex private key.",
)
@click.option(
    "--out",
    type=click.Path(dir_okay=False, path_type=Path),
    default=None,
    help="Deployment file to write [default: deployments/local.json on a dev chain, "
    "deployments/<chain id>.json otherwise].",
)
@click.option("--force", is_flag=True, help="Overwrite an existing deployment file.")
@click.option(
    "--artifact",
    type=click.Path(dir_okay=False, path_type=Path),
    default=None,
    help="forge artifact to deploy "
    "[default: contracts/out/SwarmCoordinator.sol/SwarmCoordinator.json].",
)
@_config_option("round_duration", click.IntRange(min=1))
@_config_option("seed_input", str, callback=_bytes32, metavar="HEX32")
@_config_option("grace_rounds", click.IntRange(0, MAX_PHASE_ROUNDS))
@_config_option("commit_rounds", click.IntRange(1, MAX_PHASE_ROUNDS))
@_config_option("reveal_rounds", click.IntRange(1, MAX_PHASE_ROUNDS))
@_config_option("min_stake", str, callback=_eth_amount)
@_config_option("flag_bond", str, callback=_eth_amount)
@_config_option("commit_deposit", str, callback=_eth_amount)
@_config_option("committee_size", click.IntRange(1, 2**16 - 1))
@_config_option("quorum_bps", click.IntRange(5_000, 9_999))
@_config_option("floor_bps", click.IntRange(0, 10_000))
@_config_option("slash_bps", click.IntRange(1, 10_000))
@_config_option("reward_bps", click.IntRange(0, 10_000))
@_config_option("tip_bps", click.IntRange(0, 10_000))
@_config_option("tasks_per_round", click.IntRange(1, 64))
@_config_option("group_size", click.IntRange(2, 32))
@click.option(
    "--timeout",
    type=click.FloatRange(min=1),
    default=300,
    show_default=True,
    help="Seconds to wait for the deployment to be mined.",
)
def main(
    rpc_url: str,
    key_env: str,
    out: Path | None,
    force: bool,
    artifact: Path | None,
    seed_input: bytes | None,
    timeout: float,
    **settings: int,
) -> None:
    """Deploy a SwarmCoordinator and write its deployment file (what nodes and the indexer load).

    The deployer's private key is read from the environment variable named by --key-env; it is never
    accepted on the command line and never printed. The contract comes from the forge build
    (scripts/bootstrap builds it). The deployer becomes the owner: it may later schedule new rules
    (in force J + 1 rounds later) and pause registering and publishing; it never controls stake or
    slashed funds (the part of a slash not paid as reward or tip is burned).

    \b
    Phases of round r (fixed for good; stake and rules may change):
      r .. r+grace           peers publish their batches of r
      the next commit-rounds  r is sealed; its committee members commit verdicts
      the next reveal-rounds  they reveal them
      after that             anyone settles a flagged batch of r

    \b
    Examples:
      # a local Anvil chain (anvil's first dev key), defaults for everything else
      export SWARM_DEPLOYER_KEY=0xac0974bec39a17e36ba4a6b4d238ff944bacb478cbed5efcae784d7bf4f2ff80
      swarm-deploy
      # a public testnet: ten-minute rounds, 0.05 ETH stake, 30 % slashing, committees of 32
      SWARM_RPC_URL=https://sepolia.example.org swarm-deploy --round-duration 600 \\
          --min-stake 0.05 --slash-bps 3000 --committee-size 32 --out deployments/sepolia.json
    """
    try:
        config = DeployConfig(
            **settings, **({"seed_input": seed_input} if seed_input is not None else {})
        )
    except ValidationError as exc:
        raise click.UsageError(
            "; ".join(e["msg"].removeprefix("Value error, ") for e in exc.errors())
        ) from None
    account = account_from_env(key_env)
    _run(rpc_url, account, config, out=out, force=force, artifact=artifact, timeout=timeout)


def _run(
    rpc_url: str,
    account: LocalAccount,
    config: DeployConfig,
    *,
    out: Path | None,
    force: bool,
    artifact: Path | None,
    timeout: float,
) -> None:
    def progress(message: str) -> None:
        click.echo(message, err=True)

    w3 = connect(rpc_url)
    retry = RetryPolicy(attempts=3, initial_delay=0.5)
    try:
        if out is None:
            chain_id = call_with_retry(
                lambda: w3.eth.chain_id, what="connecting", endpoint=rpc_url, policy=retry
            )
            out = default_out_path(int(chain_id))
        if out.exists() and not force:
            raise click.ClickException(
                f"{out} exists (a live deployment?): pass --force to overwrite it, "
                "or choose another --out"
            )
        deployment = deploy_coordinator(
            w3,
            account,
            config,
            artifact_path=artifact,
            out=out,
            progress=progress,
            retry=retry,
            receipt_timeout=timeout,
        )
    except ChainError as exc:
        raise click.ClickException(str(exc)) from None
    click.echo(deployment.coordinator)


if __name__ == "__main__":
    sys.exit(main())

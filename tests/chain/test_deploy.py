"""Deploying (function and ``swarm-deploy``), the deployment record, what the contract reports."""

from __future__ import annotations

import json
from pathlib import Path

import pytest
from click.testing import CliRunner
from eth_account import Account
from pydantic import ValidationError

from node.chain.abi import abi_sha256
from node.chain.client import CoordinatorClient
from node.chain.deploy import DeployConfig, main
from node.chain.deployment import Deployment
from node.chain.eip712 import PUBLISH_TYPEHASH, Domain
from node.chain.errors import DeploymentFileError
from node.chain.rounds import round_seed
from node.local.anvil import DEV_KEYS, free_port
from tests.chain_fixtures import TEST_CONFIG

KEY = DEV_KEYS[9]


# ------------------------------------------------------------------------------- record (no chain)


def _record(deployment: Deployment, tmp_path: Path, **changes: object) -> Path:
    data = deployment.model_dump(mode="json", by_alias=True) | changes
    path = tmp_path / "deployment.json"
    path.write_text(json.dumps(data))
    return path


@pytest.mark.integration
def test_record_round_trips_and_checks_its_abi(deployment: Deployment, tmp_path: Path) -> None:
    path = deployment.save(tmp_path / "sub" / "d.json")
    assert Deployment.load(path) == deployment
    assert json.loads(path.read_text())["schema"] == "swarm.deployment/1"
    other_abi = _record(deployment, tmp_path, abi_sha256="0x" + "ab" * 32)
    with pytest.raises(DeploymentFileError, match="upgrade the software or use a deployment file"):
        Deployment.load(other_abi)
    assert Deployment.load(other_abi, check_abi=False).abi_sha256 == "0x" + "ab" * 32


def test_missing_and_malformed_records_are_explained(tmp_path: Path) -> None:
    with pytest.raises(
        DeploymentFileError, match="not found: deploy a coordinator with `swarm-deploy`"
    ):
        Deployment.load(tmp_path / "nope.json")
    broken = tmp_path / "broken.json"
    broken.write_text("{not json")
    with pytest.raises(DeploymentFileError, match="not a valid deployment record"):
        Deployment.load(broken)
    partial = tmp_path / "partial.json"
    partial.write_text(json.dumps({"schema": "swarm.deployment/1", "chain_id": 1}))
    with pytest.raises(DeploymentFileError, match="coordinator"):
        Deployment.load(partial)


def test_config_checks_the_contract_rules_before_deploying() -> None:
    with pytest.raises(ValidationError, match="grace rounds"):
        DeployConfig(grace_rounds=3, attestation_window_rounds=2)
    with pytest.raises(ValidationError, match="unbonding period"):
        DeployConfig(round_duration=600, unbonding_period=1000)
    assert DeployConfig(round_duration=3600).resolved_unbonding_period() == 3 * 3600
    assert DeployConfig().resolved_unbonding_period() == 3600


# ---------------------------------------------------------------------------------- on chain


@pytest.mark.integration
def test_deployment_matches_the_chain(chain, deployment: Deployment, client_for) -> None:
    client = client_for()
    block = chain.w3.eth.get_block(deployment.deployment_block)
    assert (
        deployment.block_hash == block["hash"].to_0x_hex()
        and deployment.genesis == block["timestamp"]
    )
    assert deployment.chain_id == 31337 and deployment.abi_sha256 == abi_sha256()
    assert client.parameters() == TEST_CONFIG.parameters() == deployment.parameters
    assert (client.owner(), client.treasury(), client.pending_owner()) == (
        deployment.deployer,
        deployment.deployer,
        None,
    )
    assert client.genesis_seed() == bytes.fromhex(deployment.genesis_seed[2:])
    client.check_deployment(deployment)
    with pytest.raises(DeploymentFileError, match="chain 5"):
        client.check_deployment(deployment.model_copy(update={"chain_id": 5}))


@pytest.mark.integration
def test_domain_separator_and_typehash_match_the_contract(
    deployment: Deployment, client_for
) -> None:
    client = client_for()
    domain = Domain(chain_id=deployment.chain_id, verifying_contract=deployment.coordinator)
    assert client.domain_separator() == domain.separator == client.domain.separator
    assert client.publish_typehash() == PUBLISH_TYPEHASH


@pytest.mark.integration
def test_round_seeds_and_clock_match_the_contract(
    chain, deployment: Deployment, client_for
) -> None:
    client = client_for()
    seed = bytes.fromhex(deployment.genesis_seed[2:])
    for round_ in (0, 1, 7, 2**64 - 1):
        assert client.round_seed(round_) == round_seed(seed, round_)
    chain.warp_to_round(5, offset=59)
    assert client.current_round() == client.clock.round_at(client.chain_time()) == 5
    assert client.clock.seconds_until_next(client.chain_time()) == 1
    chain.warp_to_round(6, offset=0)
    assert client.current_round() == 6


# ---------------------------------------------------------------------------------- the command


def _invoke(args: list[str], env: dict[str, str] | None = None):
    return CliRunner().invoke(main, args, env={"SWARM_DEPLOYER_KEY": KEY, **(env or {})})


def test_help_explains_the_key_and_examples() -> None:
    result = CliRunner().invoke(main, ["--help"])
    assert result.exit_code == 0
    assert "--key-env" in result.output and "never" in result.output and "Examples" in result.output


@pytest.mark.integration
def test_cli_deploys_and_writes_the_record(chain, anvil, tmp_path: Path) -> None:
    out = tmp_path / "local.json"
    result = _invoke(
        [
            "--rpc-url",
            anvil.url,
            "--out",
            str(out),
            "--round-duration",
            "30",
            "--min-stake",
            "0.5",
            "--slash-bps",
            "2000",
            "--seed-input",
            "0x" + "42" * 32,
        ]
    )
    assert result.exit_code == 0, result.output
    assert KEY[2:] not in result.output
    record = Deployment.load(out)
    assert result.output.strip().endswith(record.coordinator)
    assert "deployed at" in result.output and f"wrote {out}" in result.output
    assert record.deployer == Account.from_key(KEY).address and record.round_duration == 30
    assert record.parameters.min_stake == 5 * 10**17 and record.parameters.slash_bps == 2000
    assert record.seed_input == "0x" + "42" * 32
    client = CoordinatorClient(chain.w3, record.coordinator)
    assert client.round_duration() == 30 and client.parameters() == record.parameters
    again = _invoke(["--rpc-url", anvil.url, "--out", str(out)])
    assert again.exit_code == 1 and "--force" in again.output


def test_cli_without_key_says_which_variable(tmp_path: Path) -> None:
    result = CliRunner().invoke(
        main, ["--out", str(tmp_path / "d.json")], env={"SWARM_DEPLOYER_KEY": ""}
    )
    assert (
        result.exit_code == 1 and "set the environment variable SWARM_DEPLOYER_KEY" in result.output
    )
    bad = _invoke(
        ["--key-env", "MY_KEY", "--out", str(tmp_path / "d.json")], env={"MY_KEY": "0x1234"}
    )
    assert bad.exit_code == 1 and "MY_KEY does not hold a valid private key" in bad.output
    assert "0x1234" not in bad.output


def test_cli_rejects_inconsistent_parameters() -> None:
    result = _invoke(["--grace-rounds", "5", "--attestation-window-rounds", "2"])
    assert result.exit_code == 2 and "grace rounds (5)" in result.output


def test_cli_unreachable_rpc(tmp_path: Path) -> None:
    url = f"http://127.0.0.1:{free_port()}"
    result = _invoke(["--rpc-url", url, "--out", str(tmp_path / "d.json")])
    assert result.exit_code == 1 and url in result.output and "unreachable" in result.output
    assert "Traceback" not in result.output


@pytest.mark.integration
def test_cli_missing_artifact_points_to_bootstrap(anvil, tmp_path: Path) -> None:
    result = _invoke(
        [
            "--rpc-url",
            anvil.url,
            "--out",
            str(tmp_path / "d.json"),
            "--artifact",
            str(tmp_path / "missing.json"),
        ]
    )
    assert result.exit_code == 1 and "run scripts/bootstrap" in result.output


@pytest.mark.integration
def test_cli_unfunded_deployer(chain, anvil, tmp_path: Path) -> None:
    poor = Account.create()
    result = _invoke(
        ["--rpc-url", anvil.url, "--out", str(tmp_path / "d.json")],
        env={"SWARM_DEPLOYER_KEY": poor.key.hex()},
    )
    assert (
        result.exit_code == 1 and "has no ether" in result.output and poor.address in result.output
    )
    chain.fund(poor.address, 10**12)  # not enough for the gas
    result = _invoke(
        ["--rpc-url", anvil.url, "--out", str(tmp_path / "d.json")],
        env={"SWARM_DEPLOYER_KEY": poor.key.hex()},
    )
    assert result.exit_code == 1 and "fund it" in result.output, result.output

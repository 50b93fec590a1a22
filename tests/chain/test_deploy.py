"""Deploying (function and ``swarm-deploy``), the deployment record, what the contract reports."""

from __future__ import annotations

import json
from pathlib import Path

import pytest
from click.testing import CliRunner
from eth_abi import encode
from eth_account import Account
from pydantic import ValidationError

from node.chain.abi import abi_sha256
from node.chain.client import CoordinatorClient
from node.chain.deploy import DeployConfig, main
from node.chain.deployer import MAX_PHASE_ROUNDS, constructor_data
from node.chain.deployment import Deployment
from node.chain.eip712 import PUBLISH_TYPEHASH, Domain
from node.chain.errors import ArtifactMissing, DeploymentFileError
from node.chain.models import Phases, Rules
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
    assert json.loads(path.read_text())["schema"] == "swarm.deployment/2"
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
    partial.write_text(json.dumps({"schema": "swarm.deployment/2", "chain_id": 1}))
    with pytest.raises(DeploymentFileError, match="coordinator"):
        Deployment.load(partial)


def test_deploy_defaults_are_the_protocols() -> None:
    config = DeployConfig()
    assert config.round_duration == 120
    assert config.phases() == Phases(grace_rounds=1, commit_rounds=2, reveal_rounds=2)
    assert config.phases().judging_rounds == 5 and config.min_stake == 10**16
    assert config.rules() == Rules(
        from_round=0,
        flag_bond=10**15,
        committee_size=64,
        quorum_bps=5000,
        floor_bps=3334,
        slash_bps=1000,
        reward_bps=5000,
        tip_bps=500,
    )
    assert DeployConfig().seed_input != config.seed_input  # random unless given


def test_config_checks_the_contract_rules_before_deploying() -> None:
    for bad in (
        {"commit_rounds": 0},
        {"reveal_rounds": 65},
        {"quorum_bps": 4999},
        {"committee_size": 0},
        {"flag_bond": 0},
        {"min_stake": 2**96},
    ):
        with pytest.raises(ValidationError):
            DeployConfig(**bad)
    with pytest.raises(ValidationError, match="reward_bps \\+ tip_bps"):
        DeployConfig(reward_bps=9_600, tip_bps=500)


def test_constructor_arguments_follow_the_abi_by_name() -> None:
    artifact = {
        "abi": [
            {
                "type": "constructor",
                "inputs": [
                    {
                        "name": "rules",
                        "type": "tuple",
                        "components": [
                            {"name": "tipBps", "type": "uint16"},
                            {"name": "flagBond", "type": "uint96"},
                        ],
                    },
                    {"name": "roundDuration_", "type": "uint64"},
                ],
            }
        ],
        "bytecode": {"object": "0x6001"},
    }
    config = DeployConfig(round_duration=77, tip_bps=9, flag_bond=5)
    expected = encode(["(uint16,uint96)", "uint64"], [(9, 5), 77])
    assert constructor_data(artifact, config) == bytes.fromhex("6001") + expected
    artifact["abi"][0]["inputs"].append({"name": "mystery", "type": "uint8"})
    with pytest.raises(ArtifactMissing, match="mystery"):
        constructor_data(artifact, config)


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
    assert client.phases() == TEST_CONFIG.phases() == deployment.phases
    assert client.rules_at(0) == TEST_CONFIG.rules() == deployment.rules
    assert client.min_stake() == TEST_CONFIG.min_stake == deployment.min_stake
    assert client.max_phase_rounds() == MAX_PHASE_ROUNDS
    assert (client.owner(), client.pending_owner(), client.burned()) == (
        deployment.deployer,
        None,
        0,
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
    domain = Domain.of_deployment(deployment)
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
            "--flag-bond",
            "0.02",
            "--slash-bps",
            "2000",
            "--committee-size",
            "8",
            "--commit-rounds",
            "3",
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
    assert record.min_stake == 5 * 10**17 and record.rules.slash_bps == 2000
    assert (record.rules.flag_bond, record.rules.committee_size) == (2 * 10**16, 8)
    assert record.phases == Phases(grace_rounds=1, commit_rounds=3, reveal_rounds=2)
    assert record.rules.tip_bps == 500  # defaults for the rest
    assert record.seed_input == "0x" + "42" * 32
    client = CoordinatorClient(chain.w3, record.coordinator)
    assert client.round_duration() == 30 and client.rules_at(0) == record.rules
    assert client.phases() == record.phases
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


def test_help_explains_every_option() -> None:
    result = CliRunner().invoke(main, ["--help"])
    for name in DeployConfig.model_fields:
        assert f"--{name.replace('_', '-')}" in result.output, name
    assert "Phases of round r" in result.output and "burned" in result.output


def test_cli_rejects_inconsistent_parameters() -> None:
    result = _invoke(["--reward-bps", "9600", "--tip-bps", "500"])
    assert result.exit_code == 2 and "reward_bps + tip_bps (9600 + 500)" in result.output
    result = _invoke(["--quorum-bps", "4000"])
    assert result.exit_code == 2 and "--quorum-bps" in result.output


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

"""The ``swarm`` CLI through click's runner, against the test Anvil, with a temporary home."""

from __future__ import annotations

import re
from pathlib import Path

import pytest
from click.testing import CliRunner, Result

from node.chain.deployment import Deployment
from node.chain.models import VerdictItem
from node.cli import main
from node.config import NodeConfig
from node.identity import unlock_keystore
from tests.chain.helpers import Ballot, judge, to_settle_phase
from tests.chain_fixtures import AnvilNode, ChainControl

pytestmark = pytest.mark.integration

PASSWORD = "volunteer-password"


@pytest.fixture
def home(tmp_path: Path, anvil: AnvilNode, deployment: Deployment, chain: ChainControl) -> Path:
    """A volunteer's folder: node.toml pointing at the test chain, keystore and store inside it."""
    deployment_file = deployment.save(tmp_path / "deployment.json")
    (tmp_path / "node.toml").write_text(
        f'[chain]\nrpc_url = "{anvil.url}"\ndeployment = "{deployment_file}"\n\n'
        f'[identity]\nkeystore = "{tmp_path / "keystore.json"}"\npassword_env = "TEST_SWARM_PW"\n'
    )
    return tmp_path


def swarm(home: Path, *args: str, password: str = PASSWORD) -> Result:
    runner = CliRunner()
    return runner.invoke(
        main, ["--config", str(home / "node.toml"), *args], env={"TEST_SWARM_PW": password}
    )


def created_address(home: Path, chain: ChainControl) -> str:
    result = swarm(home, "init")
    assert result.exit_code == 0, result.output
    address = re.search(r"address (0x[0-9a-fA-F]{40})", result.output).group(1)
    chain.fund(address, 10**19)
    return address


def test_init_prints_the_address_never_the_key(home: Path, chain: ChainControl) -> None:
    result = swarm(home, "init")
    assert result.exit_code == 0, result.output
    assert (home / "keystore.json").exists()
    assert not re.search(r"[0-9a-f]{64}", result.output)  # no private key, in any form
    again = swarm(home, "init")
    assert again.exit_code == 1 and "already holds a keystore" in again.output


def test_init_without_a_password_or_a_terminal_says_what_to_set(tmp_path: Path) -> None:
    config = tmp_path / "node.toml"
    config.write_text(f'[identity]\nkeystore = "{tmp_path / "keystore.json"}"\n')
    result = CliRunner().invoke(
        main, ["--config", str(config), "init"], env={"SWARM_KEYSTORE_PASSWORD": None}
    )
    assert result.exit_code == 1 and not (tmp_path / "keystore.json").exists()
    (line,) = result.output.strip().splitlines()
    assert "no terminal" in line and "SWARM_KEYSTORE_PASSWORD" in line and "password_file" in line


def test_register_then_status(home: Path, chain: ChainControl) -> None:
    address = created_address(home, chain)
    result = swarm(home, "register", "--name", "alice", "--stake", "2")
    assert result.exit_code == 0, result.output
    assert "registered" in result.output and address in result.output
    status = swarm(home, "status")
    assert status.exit_code == 0, status.output
    assert "status   active" in status.output and "stake    2 ETH" in status.output
    assert "no publications yet" in status.output


def test_volunteer_mistakes_are_one_line_errors(home: Path, chain: ChainControl) -> None:
    created_address(home, chain)
    low = swarm(home, "register", "--name", "alice", "--stake", "0.001")
    assert low.exit_code == 1 and "below the minimum" in low.output
    assert "Traceback" not in low.output
    bad_amount = swarm(home, "register", "--name", "alice", "--stake", "lots")
    assert bad_amount.exit_code == 2 and "--stake" in bad_amount.output
    wrong = swarm(home, "status", password="not-the-password")  # status needs no password
    assert wrong.exit_code == 0
    wrong = swarm(home, "register", "--name", "a", "--stake", "1", password="not-the-password")
    assert wrong.exit_code == 1 and "wrong password" in wrong.output


def test_exit_and_withdraw_once_the_last_rounds_are_judged(
    home: Path, chain: ChainControl, deployment: Deployment
) -> None:
    address = created_address(home, chain)
    assert swarm(home, "register", "--name", "bob", "--stake", "2").exit_code == 0
    exited = swarm(home, "exit")
    exit_round = chain.current_round()
    withdrawable = deployment.phases.withdrawable_from(exit_round)
    assert exited.exit_code == 0 and f"withdrawable from round {withdrawable}" in exited.output
    early = swarm(home, "withdraw")
    assert early.exit_code == 1 and f"round {withdrawable}" in early.output
    chain.warp_to_round(withdrawable)
    before = chain.balance(address)
    done = swarm(home, "withdraw")
    assert done.exit_code == 0 and "withdrew 2 ETH" in done.output
    assert chain.balance(address) > before + 199 * 10**16  # stake back, minus the fee


def test_config_example_and_check(tmp_path: Path) -> None:
    runner = CliRunner()
    example = runner.invoke(main, ["config", "example"])
    assert example.exit_code == 0 and "[sampling]" in example.output
    path = tmp_path / "node.toml"
    path.write_text(example.output)
    assert runner.invoke(main, ["config", "check", str(path)]).exit_code == 0
    path.write_text("[sampling]\ngroup_size = 1\n")
    bad = runner.invoke(main, ["config", "check", str(path)])
    assert bad.exit_code == 1 and "sampling.group_size" in bad.output
    assert NodeConfig().sampling.group_size == 8
    assert "fetch_peers = 8" in example.output  # documented in the example TOML


def test_missing_deployment_file_says_what_to_do(home: Path, chain: ChainControl) -> None:
    (home / "deployment.json").unlink()
    result = swarm(home, "status", "--address", "0x" + "11" * 20)
    assert result.exit_code == 1 and "swarm-deploy" in result.output


def test_status_shows_the_median_of_the_committee_verdicts(
    home: Path, chain: ChainControl, client_for, dev_accounts
) -> None:
    address = created_address(home, chain)
    assert swarm(home, "register", "--name", "alice", "--stake", "2").exit_code == 0
    judges = [client_for(account) for account in dev_accounts[1:4]]
    for client in judges:
        client.register("judge", 10**18)
    round_, digest = chain.current_round() + 1, b"\x42" * 32
    chain.warp_to_round(round_)  # the judges' stake counts from here
    account = unlock_keystore(home / "keystore.json", PASSWORD)
    client_for(account).publish_rollouts(round_, digest, 2, 8, 4000)
    ballots = [
        Ballot(client, round_, [VerdictItem(subject=address, checked=8, agreed=8,
                                            verified_reward_sum=value)])
        for client, value in zip(judges, (1000, 3000, 2000))
    ]  # fmt: skip
    judge(chain, round_, ballots)
    status = swarm(home, "status")
    assert status.exit_code == 0, status.output
    assert "verified reward 2.000 over 1 judged batches" in status.output  # not 6.000, the sum
    assert "claimed reward 4.000" in status.output


def test_claim_pays_the_share_of_a_slash_a_flag_won(
    home: Path, chain: ChainControl, client_for, dev_accounts
) -> None:
    address = created_address(home, chain)
    assert swarm(home, "register", "--name", "carol", "--stake", "2").exit_code == 0
    nothing = swarm(home, "claim")
    assert nothing.exit_code == 0 and "nothing to claim" in nothing.output
    cheater, other = client_for(dev_accounts[1]), client_for(dev_accounts[2])
    cheater.register("cheater", 10**18)
    other.register("judge", 10**18)
    round_ = chain.current_round() + 1
    chain.warp_to_round(round_)  # every stake counts from here
    cheater.publish_rollouts(round_, b"\x24" * 32, 2, 8, 8000)
    me = client_for(unlock_keystore(home / "keystore.json", PASSWORD))
    flag = VerdictItem(subject=cheater.account_address, checked=8, agreed=5, verified_reward_sum=10)
    judge(chain, round_, [Ballot(me, round_, [flag]), Ballot(other, round_, [flag])])
    to_settle_phase(chain, me, round_)
    other.settle(round_, cheater.account_address)
    me.resolve_flag(round_, cheater.account_address, address)
    owed = me.claimable(address)
    assert owed > 0
    assert "claimable (swarm claim)" in swarm(home, "status").output
    before = chain.balance(address)
    paid = swarm(home, "claim")
    assert paid.exit_code == 0 and "claimed" in paid.output, paid.output
    assert me.claimable(address) == 0
    assert chain.balance(address) > before + owed - 10**15  # the share, minus the fee

"""``swarm status``'s per-round "why" against the test Anvil, with real publications,
attestations, disputes and settlements by dev accounts."""

from __future__ import annotations

import re
from collections.abc import Callable
from pathlib import Path

import pytest
from click.testing import CliRunner, Result
from eth_account.signers.local import LocalAccount

from node.chain.client import CoordinatorClient
from node.chain.deployment import Deployment
from node.chain.models import Attestation
from node.cli import main
from node.identity import unlock_keystore
from tests.chain_fixtures import ETHER, AnvilNode, ChainControl

pytestmark = pytest.mark.integration

PASSWORD = "volunteer-password"
DIGEST = b"\x42" * 32


@pytest.fixture
def home(tmp_path: Path, anvil: AnvilNode, deployment: Deployment, chain: ChainControl) -> Path:
    deployment_file = deployment.save(tmp_path / "deployment.json")
    (tmp_path / "node.toml").write_text(
        f'[chain]\nrpc_url = "{anvil.url}"\ndeployment = "{deployment_file}"\n\n'
        f'[identity]\nkeystore = "{tmp_path / "keystore.json"}"\npassword_env = "TEST_SWARM_PW"\n'
    )
    return tmp_path


def swarm(home: Path, *args: str) -> Result:
    return CliRunner().invoke(
        main, ["--config", str(home / "node.toml"), *args], env={"TEST_SWARM_PW": PASSWORD}
    )


def status(home: Path, rounds: int) -> dict[int, str]:
    """``swarm status --rounds N``: each round's line by round number."""
    result = swarm(home, "status", "--rounds", str(rounds))
    assert result.exit_code == 0, result.output
    found = re.findall(r"^  round (\d+): (.*)$", result.output, flags=re.MULTILINE)
    assert len(found) == rounds, result.output
    return {int(number): text for number, text in found}


@pytest.fixture
def peer(
    home: Path, chain: ChainControl, client_for: Callable[..., CoordinatorClient]
) -> CoordinatorClient:
    """This node's peer, registered with 2 ETH one second into a fresh round."""
    chain.warp_to_round(chain.current_round() + 1)
    result = swarm(home, "init")
    assert result.exit_code == 0, result.output
    account = unlock_keystore(home / "keystore.json", PASSWORD)
    chain.fund(account.address, 10 * ETHER)
    assert swarm(home, "register", "--name", "alice", "--stake", "2").exit_code == 0
    return client_for(account)


def attest(
    client_for: Callable[..., CoordinatorClient],
    attesters: list[LocalAccount],
    subject: str,
    round_: int,
    verdicts: list[tuple[int, int]],
) -> None:
    """Each attester registers and attests (agreed of 8 checked, verified reward) the batch."""
    for account, (agreed, verified) in zip(attesters, verdicts, strict=True):
        client = client_for(account)
        client.register("attester", ETHER)
        client.attest(
            [Attestation(round=round_, subject=subject, digest=DIGEST, checked=8, agreed=agreed,
                         verified_reward_sum=verified)]
        )  # fmt: skip


def test_a_published_round_shows_attesters_flags_rewards_and_the_settled_dispute(
    home: Path,
    chain: ChainControl,
    peer: CoordinatorClient,
    client_for: Callable[..., CoordinatorClient],
    dev_accounts: list[LocalAccount],
) -> None:
    r = chain.current_round()
    peer.publish_rollouts(r, DIGEST, 2, 8, 4000)
    verdicts = [(8, 1000), (8, 3000), (7, 2000)]  # two agree, one flags
    attest(client_for, dev_accounts[1:4], peer.account_address, r, verdicts)
    lines = status(home, rounds=2)
    assert lines[r] == (
        "published 2 groups, 8 completions, claimed reward 4.000; verified reward 2.000 "
        f"(median of 3 attesters: 2 agreed, 1 flagged); dispute open (settleable after round "
        f"{r + 2})"
    )
    assert lines[r - 1] == "not published: not registered yet"

    chain.warp_to_round(r + 3)  # the attestation window (2 rounds) has closed
    client_for(dev_accounts[3]).settle(r, peer.account_address)
    lines = status(home, rounds=4)
    assert lines[r].endswith("dispute settled: not slashed (flags 1, agreements 2)")
    assert lines[r + 3] == "not published: not yet (the round is open)"
    assert lines[r + 2] == f"not published: not yet (accepted until the end of round {r + 3})"
    assert lines[r + 1].startswith("not published: no batch on the chain (the node was not")


def test_a_slashed_batch_then_a_stake_below_the_raised_minimum(
    home: Path,
    chain: ChainControl,
    peer: CoordinatorClient,
    client_for: Callable[..., CoordinatorClient],
    dev_accounts: list[LocalAccount],
) -> None:
    r = chain.current_round()
    peer.publish_rollouts(r, DIGEST, 2, 8, 8000)
    attest(client_for, dev_accounts[1:4], peer.account_address, r, [(2, 500), (3, 700), (8, 8000)])
    chain.warp_to_round(r + 3)
    client_for(dev_accounts[1]).settle(r, peer.account_address)  # half of 2 ETH slashed
    client_for(dev_accounts[0]).set_min_stake(2 * ETHER)
    lines = status(home, rounds=4)
    assert "verified reward 0.700 (median of 3 attesters: 1 agreed, 2 flagged)" in lines[r]
    assert lines[r].endswith("dispute settled: slashed 1 ETH (flags 2, agreements 1)")
    assert lines[r + 3] == (
        "not published: stake 1 ETH below the minimum 2 ETH (swarm add-stake)"
    )
    assert lines[r + 1].startswith("not published: no batch on the chain")  # min was 1 ETH then


def test_an_unattested_batch_a_pause_and_an_exit(
    home: Path,
    chain: ChainControl,
    peer: CoordinatorClient,
    client_for: Callable[..., CoordinatorClient],
    dev_accounts: list[LocalAccount],
) -> None:
    r = chain.current_round()
    peer.publish_rollouts(r, DIGEST, 1, 4, 1000)
    owner = client_for(dev_accounts[0])
    chain.warp_to_round(r + 1)
    owner.pause()
    chain.warp_to_round(r + 2)
    owner.unpause()
    lines = status(home, rounds=3)
    assert lines[r].endswith(f"not attested yet (open until round {r + 2})")
    assert lines[r + 1] == "not published: the contract was paused"
    assert lines[r + 2] == "not published: not yet (the round is open)"

    chain.warp_to_round(r + 4)
    assert swarm(home, "exit").exit_code == 0
    result = swarm(home, "status", "--rounds", "5")
    assert "status   exiting" in result.output and "withdrawable" in result.output
    lines = status(home, rounds=5)
    unattested = "attested by no peer (could they fetch it? swarm doctor checks the store)"
    assert lines[r].endswith(unattested)
    assert lines[r + 4] == "not published: the peer had requested its exit"
    assert lines[r + 3] == "not published: the peer had requested its exit"  # grace: too late
    assert lines[r + 2].startswith("not published: no batch on the chain")

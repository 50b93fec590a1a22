"""``swarm status``'s per-round "why" against the test Anvil, with real publications,
committee verdicts (sealed, committed, revealed), disputes and settlements by dev accounts."""

from __future__ import annotations

import re
from collections.abc import Callable
from pathlib import Path

import pytest
from click.testing import CliRunner, Result
from eth_account.signers.local import LocalAccount

from node.chain.client import CoordinatorClient
from node.chain.deployment import Deployment
from node.chain.models import VerdictItem
from node.cli import main
from node.identity import unlock_keystore
from tests.chain.helpers import Ballot, judge, to_settle_phase
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


def judges(
    client_for: Callable[..., CoordinatorClient], accounts: list[LocalAccount]
) -> list[CoordinatorClient]:
    """Committee members registered with 1 ETH each; their weight counts from the next round,
    to which the chain moves."""
    clients = [client_for(account) for account in accounts]
    for client in clients:
        client.register("judge", ETHER)
    return clients


def vote(
    chain: ChainControl,
    clients: list[CoordinatorClient],
    subject: str,
    round_: int,
    verdicts: list[tuple[int, int]],
) -> None:
    """Each client seals (the first), commits and reveals its verdict on ``subject``'s batch:
    agreed of 8 checked, verified reward; leaves the chain in the reveal phase."""
    ballots = [
        Ballot(client, round_, [VerdictItem(subject=subject, checked=8, agreed=agreed,
                                            verified_reward_sum=verified)])
        for client, (agreed, verified) in zip(clients, verdicts, strict=True)
    ]  # fmt: skip
    judge(chain, round_, ballots)


def test_a_published_round_shows_its_judging_verdicts_rewards_and_the_settled_dispute(
    home: Path,
    chain: ChainControl,
    peer: CoordinatorClient,
    client_for: Callable[..., CoordinatorClient],
    dev_accounts: list[LocalAccount],
) -> None:
    committee = judges(client_for, dev_accounts[1:4])
    r = chain.current_round() + 1
    chain.warp_to_round(r)
    peer.publish_rollouts(r, DIGEST, 2, 8, 4000)
    lines = status(home, rounds=2)
    assert lines[r] == (
        "published 2 groups, 8 completions, claimed reward 4.000; "
        f"judging: committees commit in rounds {r + 2}-{r + 3}"
    )
    assert lines[r - 1] == f"not published: not yet (accepted until the end of round {r})"

    vote(chain, committee, peer.account_address, r, [(8, 1000), (8, 3000), (7, 2000)])
    lines = status(home, rounds=5)
    assert lines[r] == (
        "published 2 groups, 8 completions, claimed reward 4.000; verified reward 2.000 "
        "(weighted median of 3 committee members: 2 agreed, 1 flagged); dispute open "
        f"(settleable from round {r + 6})"
    )
    to_settle_phase(chain, committee[0], r)
    committee[2].settle(r, peer.account_address)
    lines = status(home, rounds=7)
    assert lines[r].endswith("dispute settled: not slashed (flag weight 1 ETH, agree weight 2 ETH)")
    assert lines[r + 6] == "not published: not yet (the round is open)"
    assert lines[r + 5] == f"not published: not yet (accepted until the end of round {r + 6})"
    assert lines[r + 1].startswith("not published: no batch on the chain (the node was not")


def test_a_slashed_batch_then_a_stake_below_the_raised_minimum(
    home: Path,
    chain: ChainControl,
    peer: CoordinatorClient,
    client_for: Callable[..., CoordinatorClient],
    dev_accounts: list[LocalAccount],
) -> None:
    committee = judges(client_for, dev_accounts[1:4])
    r = chain.current_round() + 1
    chain.warp_to_round(r)
    peer.publish_rollouts(r, DIGEST, 2, 8, 8000)
    vote(chain, committee, peer.account_address, r, [(2, 500), (3, 700), (8, 8000)])
    to_settle_phase(chain, committee[0], r)
    committee[0].settle(r, peer.account_address)  # half of 2 ETH slashed
    owner = client_for(dev_accounts[0])
    stricter = owner.rules_at(r).model_copy(update={"committee_size": 8, "slash_bps": 2500})
    owner.schedule_parameters(2 * ETHER, stricter)
    start = owner.rules_by_index(owner.rules_count() - 1).from_round
    header = swarm(home, "status").output
    assert "rules    committees of 64, flag bond 0.1 ETH, slash 50 %" in header, header
    assert f"from round {start}: committees of 8, flag bond 0.1 ETH, slash 25 %" in header
    chain.warp_to_round(start)
    assert f"from round {start}" not in swarm(home, "status").output  # in force now
    lines = status(home, rounds=start - r + 1)
    # upheld: the batch verifies nothing, as on the leaderboard (the committee's median was 0.700)
    assert (
        "verified reward 0.000 (weighted median of 3 committee members: 1 agreed, 2 flagged)"
        in (lines[r])
    )
    assert lines[r].endswith(
        "dispute settled: slashed 1 ETH (flag weight 2 ETH, agree weight 1 ETH)"
    )
    assert lines[start] == "not published: stake 1 ETH below the minimum 2 ETH (swarm add-stake)"
    assert lines[start - 2].startswith("not published: no batch on the chain")  # min was 1 ETH


def test_an_unjudged_batch_a_pause_and_an_exit(
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
    assert lines[r].endswith(
        f"judging: committees commit until round {r + 3}, reveal until {r + 5}"
    )
    assert lines[r + 1] == "not published: the contract was paused"
    assert lines[r + 2] == "not published: not yet (the round is open)"

    chain.warp_to_round(r + 6)
    assert swarm(home, "exit").exit_code == 0
    result = swarm(home, "status", "--rounds", "7")
    assert "status   exiting" in result.output and "withdrawable from round" in result.output
    lines = status(home, rounds=7)
    assert lines[r].endswith(
        "no committee verdict revealed (could they fetch it? swarm doctor checks the store)"
    )
    assert lines[r + 6] == "not published: the peer had requested its exit"
    assert lines[r + 5] == "not published: the peer had requested its exit"  # grace: too late
    assert lines[r + 4].startswith("not published: no batch on the chain")


def test_a_one_round_phase_is_named_as_one_round() -> None:
    """The lockstep demo commits in one round: 'in round 3', not 'in rounds 3-3'."""
    from node.status_report import _rounds

    assert _rounds(range(3, 4)) == "in round 3"
    assert _rounds(range(3, 5)) == "in rounds 3-4"

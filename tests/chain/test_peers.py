"""Registration, stake, exit and withdrawal through the Python client, against a real Anvil."""

from __future__ import annotations

import pytest
from eth_utils import keccak

from node.chain.errors import ContractRevert
from node.chain.models import PeerStatus, VerdictState
from node.chain.reverts import (
    SwarmCoordinatorAlreadyRegistered,
    SwarmCoordinatorInsufficientStake,
    SwarmCoordinatorInvalidName,
    SwarmCoordinatorNotActive,
    SwarmCoordinatorNotExiting,
    SwarmCoordinatorOpenDisputes,
    SwarmCoordinatorOpenFlags,
    SwarmCoordinatorStillBonded,
)
from tests.chain.helpers import (
    ETHER,
    Ballot,
    item_on,
    judge,
    publish,
    register_all,
    to_settle_phase,
)

pytestmark = pytest.mark.integration


def test_register_records_an_active_peer_and_returns_a_receipt(
    chain, client_for, dev_accounts
) -> None:
    client = client_for(dev_accounts[1])
    receipt = client.register("alice", 2 * ETHER)
    assert receipt.block_number == chain.w3.eth.block_number and receipt.gas_used > 21_000
    assert receipt.tx_hash.startswith("0x") and len(receipt.tx_hash) == 66
    info = client.peer_info(dev_accounts[1].address)
    assert info.status is PeerStatus.ACTIVE and info.stake == 2 * ETHER and info.is_active
    assert client.peer_info(dev_accounts[2].address).status is PeerStatus.NONE


def test_register_below_min_stake_explains_the_minimum(client_for, dev_accounts) -> None:
    client = client_for(dev_accounts[1])
    with pytest.raises(SwarmCoordinatorInsufficientStake) as caught:
        client.register("alice", ETHER // 2)
    assert (caught.value.stake, caught.value.min_stake) == (ETHER // 2, ETHER)
    assert (
        "stake 0.5 ETH is below the minimum 1 ETH: register with --stake of at least 1 ETH"
        in str(caught.value)
    )


@pytest.mark.parametrize("name", ["", "x" * 33, "é" * 17])
def test_register_rejects_bad_names(client_for, dev_accounts, name) -> None:
    with pytest.raises(SwarmCoordinatorInvalidName) as caught:
        client_for(dev_accounts[1]).register(name, ETHER)
    assert caught.value.length == len(name.encode())
    assert "1 to 32 bytes" in str(caught.value)


def test_double_registration_is_refused(client_for, dev_accounts) -> None:
    client = client_for(dev_accounts[1])
    client.register("alice", ETHER)
    with pytest.raises(SwarmCoordinatorAlreadyRegistered) as caught:
        client.register("alice-again", ETHER)
    assert caught.value.peer == dev_accounts[1].address
    assert "already registered" in str(caught.value)


def test_add_stake(client_for, dev_accounts) -> None:
    client = client_for(dev_accounts[1])
    with pytest.raises(SwarmCoordinatorNotActive):
        client.add_stake(ETHER)
    client.register("alice", ETHER)
    client.add_stake(ETHER // 4)
    assert client.peer_info(dev_accounts[1].address).stake == ETHER + ETHER // 4
    with pytest.raises(SwarmCoordinatorInsufficientStake, match="no ether was sent"):
        client.add_stake(0)


def test_deposits_count_as_weight_from_the_next_round(chain, client_for, dev_accounts) -> None:
    client = client_for(dev_accounts[1])
    address = dev_accounts[1].address
    client.register("alice", ETHER)
    now = chain.current_round()
    info = client.peer_info(address)
    assert (info.pending_stake, info.pending_from) == (ETHER, now + 1)
    assert client.weight_at(address, now) == 0 == info.counted_stake(now)
    assert client.weight_at(address, now + 1) == ETHER == info.counted_stake(now + 1)
    chain.warp_to_round(now + 1)
    client.add_stake(ETHER // 2)
    info = client.peer_info(address)
    assert (info.stake, info.pending_from) == (3 * ETHER // 2, now + 2)
    for round_ in range(now, now + 4):
        assert client.weight_at(address, round_) == info.counted_stake(round_)
    assert client.weight_at(address, now + 2) == 3 * ETHER // 2 and info.free_stake == info.stake


def test_exit_then_withdraw_when_no_round_can_be_judged(chain, client_for, dev_accounts) -> None:
    account = dev_accounts[1]
    client = client_for(account)
    client.register("alice", 3 * ETHER)
    with pytest.raises(SwarmCoordinatorNotExiting):
        client.withdraw()
    client.request_exit()
    info = client.peer_info(account.address)
    exit_round = chain.current_round()
    assert info.status is PeerStatus.EXITING and info.exit_round == exit_round
    assert client.weight_at(account.address, exit_round + 1) == 0
    withdrawable = client.cached_phases.withdrawable_from(exit_round)
    with pytest.raises(SwarmCoordinatorStillBonded) as caught:
        client.withdraw()
    assert caught.value.withdrawable_from_round == withdrawable
    assert f"withdraw works from round {withdrawable}" in str(caught.value)
    chain.warp_to_round(withdrawable - 1)
    with pytest.raises(SwarmCoordinatorStillBonded):
        client.withdraw()
    chain.warp_to_round(withdrawable)
    before = chain.balance(account.address)
    receipt = client.withdraw()
    assert chain.balance(account.address) == before + 3 * ETHER - receipt.fee_wei
    assert client.peer_info(account.address).status is PeerStatus.WITHDRAWN
    with pytest.raises(SwarmCoordinatorAlreadyRegistered):
        client.register("alice", ETHER)


def test_withdraw_waits_for_open_disputes_and_flags(chain, client_for, dev_accounts) -> None:
    subject, flagger, agreer = register_all(client_for, dev_accounts[1:4])
    round_ = chain.current_round() + 1
    chain.warp_to_round(round_)
    publish(subject, round_)
    subject.request_exit()
    flagger.request_exit()  # exiting peers still judge the rounds up to their exit round
    ballots = [
        Ballot(flagger, round_, [item_on(subject, flag=True)]),
        Ballot(agreer, round_, [item_on(subject, flag=False)]),
    ]
    judge(chain, round_, ballots)
    chain.warp_to_round(subject.cached_phases.withdrawable_from(round_))
    with pytest.raises(SwarmCoordinatorOpenDisputes) as caught:
        subject.withdraw()
    assert caught.value.open_disputes == 1 and "settle" in str(caught.value)
    with pytest.raises(SwarmCoordinatorOpenFlags) as flags:
        flagger.withdraw()
    assert flags.value.open_flags == 1 and "resolve" in str(flags.value)
    agreer.settle(round_, subject.account_address)  # one flag against one agreement: a tie
    assert subject.verdict(round_, subject.account_address).state is VerdictState.INCONCLUSIVE
    subject.withdraw()
    with pytest.raises(SwarmCoordinatorOpenFlags):
        flagger.withdraw()
    agreer.resolve_flag(round_, subject.account_address, flagger.account_address)
    before = chain.balance(flagger.account_address)
    receipt = flagger.withdraw()  # its whole stake: an inconclusive flag costs no bond
    assert chain.balance(flagger.account_address) == before + ETHER - receipt.fee_wei
    assert subject.claimable(subject.account_address) == 0


def test_revert_is_a_contract_revert_and_not_retried(client_for, dev_accounts) -> None:
    client = client_for(dev_accounts[1])
    with pytest.raises(ContractRevert) as caught:
        client.withdraw()
    assert (
        type(caught.value).__name__ == "SwarmCoordinatorNotExiting" and not caught.value.retryable
    )
    assert caught.value.data[:4] == keccak(text="SwarmCoordinatorNotExiting(address)")[:4]

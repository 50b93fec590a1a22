"""Registration, stake, exit and withdrawal through the Python client, against a real Anvil."""

from __future__ import annotations

import pytest
from eth_utils import keccak

from node.chain.errors import ContractRevert
from node.chain.models import PeerStatus
from node.chain.reverts import (
    SwarmCoordinatorAlreadyRegistered,
    SwarmCoordinatorInsufficientStake,
    SwarmCoordinatorInvalidName,
    SwarmCoordinatorNotActive,
    SwarmCoordinatorNotExiting,
    SwarmCoordinatorOpenDisputes,
    SwarmCoordinatorStillUnbonding,
)
from tests.chain.helpers import ETHER, publish, register_all, verdict_on

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


def test_exit_then_withdraw_after_unbonding(chain, client_for, dev_accounts) -> None:
    account = dev_accounts[1]
    client = client_for(account)
    client.register("alice", 3 * ETHER)
    with pytest.raises(SwarmCoordinatorNotExiting):
        client.withdraw()
    client.request_exit()
    info = client.peer_info(account.address)
    assert info.status is PeerStatus.EXITING
    assert info.withdrawable_at == chain.now() + chain.deployment.parameters.unbonding_period
    with pytest.raises(SwarmCoordinatorStillUnbonding) as caught:
        client.withdraw()
    assert caught.value.withdrawable_at == info.withdrawable_at
    assert "withdraw works from" in str(caught.value) and "(in " in str(caught.value)
    chain.warp_to(info.withdrawable_at)
    before = chain.balance(account.address)
    receipt = client.withdraw()
    assert chain.balance(account.address) == before + 3 * ETHER - receipt.fee_wei
    assert client.peer_info(account.address).status is PeerStatus.WITHDRAWN
    with pytest.raises(SwarmCoordinatorAlreadyRegistered):
        client.register("alice", ETHER)


def test_withdraw_is_blocked_while_a_dispute_is_open(chain, client_for, dev_accounts) -> None:
    subject, flagger, agreer = register_all(client_for, dev_accounts[1:4])
    round_ = chain.current_round()
    digest = publish(subject, round_)
    subject.request_exit()
    chain.warp_to_round(round_ + 1)
    flagger.attest([verdict_on(subject, round_, digest, flag=True)])
    chain.warp_to(subject.peer_info(subject.account_address).withdrawable_at)
    with pytest.raises(SwarmCoordinatorOpenDisputes) as caught:
        subject.withdraw()
    assert caught.value.open_disputes == 1 and "settle" in str(caught.value)
    chain.warp_to_round(max(chain.current_round(), round_ + 3))
    agreer.settle(round_, subject.account_address)  # one flag is below the quorum of 2: no slash
    subject.withdraw()
    assert subject.peer_info(subject.account_address).stake == 0


def test_revert_is_a_contract_revert_and_not_retried(client_for, dev_accounts) -> None:
    client = client_for(dev_accounts[1])
    with pytest.raises(ContractRevert) as caught:
        client.withdraw()
    assert (
        type(caught.value).__name__ == "SwarmCoordinatorNotExiting" and not caught.value.retryable
    )
    assert caught.value.data[:4] == keccak(text="SwarmCoordinatorNotExiting(address)")[:4]

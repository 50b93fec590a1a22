"""Owner-only functions: parameters, pause, treasury, two-step ownership transfer."""

from __future__ import annotations

import pytest

from node.chain.events import EventReader, OwnershipTransferred, ParametersChanged, TreasuryChanged
from node.chain.models import ZERO_ADDRESS
from node.chain.reverts import (
    SwarmCoordinatorInvalidParameter,
    SwarmCoordinatorNotOwner,
    SwarmCoordinatorNotPaused,
    SwarmCoordinatorNotPendingOwner,
    SwarmCoordinatorPaused,
    SwarmCoordinatorZeroAddress,
)
from tests.chain.helpers import ETHER, register_all

pytestmark = pytest.mark.integration


def _events(chain, receipt, kind):
    return EventReader(chain.w3, chain.deployment.coordinator).read(
        receipt.block_number, receipt.block_number, events=[kind]
    )


def test_owner_sets_every_parameter(chain, client_for, dev_accounts) -> None:
    owner = client_for(dev_accounts[0])
    receipt = owner.set_min_stake(2 * ETHER)
    assert [(e.name, e.value) for e in _events(chain, receipt, ParametersChanged)] == [
        ("minStake", 2 * ETHER)
    ]
    owner.set_unbonding_period(600)
    owner.set_attestation_window_rounds(3)
    owner.set_grace_rounds(2)
    owner.set_slash_bps(10_000)
    owner.set_dispute_quorum(3)
    params = owner.parameters()
    assert (
        params.min_stake,
        params.unbonding_period,
        params.attestation_window_rounds,
        params.grace_rounds,
        params.slash_bps,
        params.dispute_quorum,
    ) == (2 * ETHER, 600, 3, 2, 10_000, 3)


def test_out_of_range_parameters_name_the_rule(client_for, dev_accounts) -> None:
    owner = client_for(dev_accounts[0])
    with pytest.raises(SwarmCoordinatorInvalidParameter) as caught:
        owner.set_slash_bps(10_001)
    assert caught.value.parameter_name == "slashBps" and caught.value.value == 10_001
    assert "at most 10000" in str(caught.value)
    with pytest.raises(SwarmCoordinatorInvalidParameter, match="graceRounds"):
        owner.set_grace_rounds(3)  # above the attestation window of 2
    with pytest.raises(SwarmCoordinatorInvalidParameter, match="unbondingPeriod"):
        owner.set_unbonding_period(60)


def test_only_the_owner_administers(client_for, dev_accounts) -> None:
    stranger = client_for(dev_accounts[3])
    for action in (
        lambda: stranger.set_min_stake(1),
        stranger.pause,
        lambda: stranger.set_treasury(dev_accounts[3].address),
        lambda: stranger.transfer_ownership(dev_accounts[3].address),
    ):
        with pytest.raises(SwarmCoordinatorNotOwner) as caught:
            action()
        assert caught.value.caller == dev_accounts[3].address and "owner's key" in str(caught.value)


def test_pause_stops_participation_but_not_exits(chain, client_for, dev_accounts) -> None:
    owner = client_for(dev_accounts[0])
    (peer,) = register_all(client_for, dev_accounts[1:2])
    owner.pause()
    assert owner.paused() and owner.parameters().paused
    with pytest.raises(SwarmCoordinatorPaused):
        owner.pause()
    with pytest.raises(SwarmCoordinatorPaused):
        client_for(dev_accounts[2]).register("bob", ETHER)
    peer.request_exit()  # exits stay open
    owner.unpause()
    assert not owner.paused()
    with pytest.raises(SwarmCoordinatorNotPaused):
        owner.unpause()


def test_treasury_change(chain, client_for, dev_accounts) -> None:
    owner = client_for(dev_accounts[0])
    with pytest.raises(SwarmCoordinatorZeroAddress):
        owner.set_treasury(ZERO_ADDRESS)
    receipt = owner.set_treasury(dev_accounts[7].address)
    assert [e.treasury for e in _events(chain, receipt, TreasuryChanged)] == [
        dev_accounts[7].address
    ]
    assert owner.treasury() == dev_accounts[7].address


def test_two_step_ownership_transfer(chain, client_for, dev_accounts) -> None:
    owner, heir, stranger = (client_for(dev_accounts[i]) for i in (0, 6, 7))
    owner.transfer_ownership(heir.account_address)
    assert owner.pending_owner() == heir.account_address and owner.owner() == owner.account_address
    with pytest.raises(SwarmCoordinatorNotPendingOwner) as caught:
        stranger.accept_ownership()
    assert f"transferOwnership({stranger.account_address})" in str(caught.value)
    receipt = heir.accept_ownership()
    (event,) = _events(chain, receipt, OwnershipTransferred)
    assert (event.previous_owner, event.new_owner) == (owner.account_address, heir.account_address)
    assert heir.owner() == heir.account_address and heir.pending_owner() is None
    with pytest.raises(SwarmCoordinatorNotOwner):
        owner.pause()
    heir.pause()

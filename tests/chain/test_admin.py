"""Owner-only functions: scheduled rules, pause (which locks no stake), two-step ownership."""

from __future__ import annotations

import pytest

from node.chain.events import EventReader, OwnershipTransferred, ParametersScheduled
from node.chain.models import Rules
from node.chain.reverts import (
    SwarmCoordinatorInvalidParameter,
    SwarmCoordinatorNotOwner,
    SwarmCoordinatorNotPaused,
    SwarmCoordinatorNotPendingOwner,
    SwarmCoordinatorPaused,
    SwarmCoordinatorWrongPhase,
)
from tests.chain.helpers import ETHER, digest_of, register_all, to_commit_phase

pytestmark = pytest.mark.integration


def _events(chain, receipt, kind):
    return EventReader(chain.w3, chain.deployment.coordinator).read(
        receipt.block_number, receipt.block_number, events=[kind]
    )


def _changed(rules: Rules, **changes: int) -> Rules:
    return Rules(**(rules.model_dump() | changes))


def test_scheduled_rules_govern_rounds_after_the_judging_window(
    chain, client_for, dev_accounts
) -> None:
    owner = client_for(dev_accounts[0])
    now = chain.current_round()
    initial = owner.rules_at(now)
    assert initial == chain.deployment.rules and owner.rules_count() == 1
    new = _changed(initial, slash_bps=2_500, committee_size=8, from_round=12_345)
    receipt = owner.schedule_parameters(2 * ETHER, new)
    starts = now + owner.cached_phases.judging_rounds + 1
    (event,) = _events(chain, receipt, ParametersScheduled)
    assert (event.from_round, event.min_stake) == (starts, 2 * ETHER)
    assert event.rules == _changed(new, from_round=starts)  # fromRound is the contract's
    assert owner.rules_at(starts - 1) == initial and owner.rules_at(starts).slash_bps == 2_500
    assert owner.rules_count() == 2 and owner.rules_history()[1].from_round == starts
    assert owner.min_stake() == ETHER
    owner.schedule_parameters(3 * ETHER, _changed(new, slash_bps=100))  # replaces the pending one
    assert owner.rules_count() == 2 and owner.rules_at(starts).slash_bps == 100
    chain.warp_to_round(starts)
    assert owner.min_stake() == 3 * ETHER
    # batches of starts - 1 are accepted in its grace round under the old minimum, which must stay
    with pytest.raises(SwarmCoordinatorWrongPhase):
        owner.schedule_parameters(3 * ETHER, new)
    chain.warp_to_round(starts + chain.deployment.phases.grace_rounds)
    owner.schedule_parameters(3 * ETHER, new)  # the last is in force now: appended
    assert owner.rules_count() == 3


@pytest.mark.parametrize(
    ("name", "value", "rule"),
    [
        ("quorumBps", 4_999, "5000 to 9999"),
        ("quorumBps", 10_000, "5000 to 9999"),
        ("slashBps", 0, "1 to 10000"),
        ("groupSize", 1, "2 to 32"),
        ("floorBps", 10_001, "at most 10000"),
        ("committeeSize", 0, "at least 1"),
        ("tipBps", 5_001, "rewardBps + tipBps"),
    ],
)
def test_out_of_range_rules_name_the_rule(client_for, dev_accounts, name, value, rule) -> None:
    owner = client_for(dev_accounts[0])
    fields = owner.rules_at(0).model_dump()
    field = {
        "quorumBps": "quorum_bps",
        "floorBps": "floor_bps",
        "committeeSize": "committee_size",
        "slashBps": "slash_bps",
        "groupSize": "group_size",
    }
    fields[field.get(name, "tip_bps")] = value
    bad = Rules.model_construct(**fields)  # past the Python checks, to see the contract's
    with pytest.raises(SwarmCoordinatorInvalidParameter) as caught:
        owner.schedule_parameters(ETHER, bad)
    assert caught.value.parameter_name in (name, "rewardBps") and rule in str(caught.value)
    with pytest.raises(ValueError):
        Rules(**fields)  # the model refuses the same values
    with pytest.raises(SwarmCoordinatorInvalidParameter, match="minStake"):
        owner.schedule_parameters(0, owner.rules_at(0))


def test_only_the_owner_administers(client_for, dev_accounts) -> None:
    stranger = client_for(dev_accounts[3])
    rules = stranger.rules_at(0)
    for action in (
        lambda: stranger.schedule_parameters(ETHER, rules),
        stranger.pause,
        lambda: stranger.transfer_ownership(dev_accounts[3].address),
    ):
        with pytest.raises(SwarmCoordinatorNotOwner) as caught:
            action()
        assert caught.value.caller == dev_accounts[3].address and "owner's key" in str(caught.value)


def test_pause_stops_joining_and_publishing_only(chain, client_for, dev_accounts) -> None:
    owner = client_for(dev_accounts[0])
    peer, other = register_all(client_for, dev_accounts[1:3])
    owner.pause()
    assert owner.paused()
    with pytest.raises(SwarmCoordinatorPaused):
        owner.pause()
    with pytest.raises(SwarmCoordinatorPaused, match="still work"):
        client_for(dev_accounts[4]).register("bob", ETHER)
    with pytest.raises(SwarmCoordinatorPaused):
        peer.add_stake(ETHER)
    with pytest.raises(SwarmCoordinatorPaused):
        peer.publish_rollouts(chain.current_round(), digest_of("x"), 1, 8, 0)
    round_ = chain.current_round()
    to_commit_phase(chain, peer, round_)
    peer.seal_round(round_)  # judging goes on
    other.request_exit()  # exits stay open
    owner.unpause()
    assert not owner.paused()
    with pytest.raises(SwarmCoordinatorNotPaused):
        owner.unpause()


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

"""Publishing rollout commitments, directly and relayed with an EIP-712 signature."""

from __future__ import annotations

import pytest
from eth_account import Account

from node.chain.eip712 import Domain, sign_publish
from node.chain.events import EventReader, RolloutsPublished
from node.chain.reverts import (
    SwarmCoordinatorAlreadyPublished,
    SwarmCoordinatorInvalidSignature,
    SwarmCoordinatorNotActive,
    SwarmCoordinatorPaused,
    SwarmCoordinatorWrongRound,
    SwarmCoordinatorZeroDigest,
)
from tests.chain.helpers import digest_of, register_all

pytestmark = pytest.mark.integration


def _published(chain, receipt) -> RolloutsPublished:
    reader = EventReader(chain.w3, chain.deployment.coordinator)
    (event,) = reader.read(receipt.block_number, receipt.block_number, events=[RolloutsPublished])
    return event


def test_publish_in_the_current_round(chain, client_for, dev_accounts) -> None:
    (peer,) = register_all(client_for, dev_accounts[1:2])
    round_ = peer.current_round()
    digest = digest_of("batch")
    receipt = peer.publish_rollouts(round_, digest, groups=4, completions=32, reward_sum=-7)
    assert peer.publication(round_, peer.account_address) == digest
    assert peer.publication(round_ + 1, peer.account_address) is None
    event = _published(chain, receipt)
    assert (
        event.round,
        event.peer,
        event.digest,
        event.groups,
        event.completions,
        event.reward_sum,
    ) == (round_, peer.account_address, digest, 4, 32, -7)
    assert event.relayer is None and event.tx_hash == receipt.tx_hash


def test_late_publish_within_the_grace_window_only(chain, client_for, dev_accounts) -> None:
    (peer,) = register_all(client_for, dev_accounts[1:2])
    round_ = chain.current_round()
    chain.warp_to_round(round_ + 1)  # grace 1 round: round_ still accepted
    peer.publish_rollouts(round_, digest_of("late"), 1, 8, 0)
    chain.warp_to_round(round_ + 3)
    with pytest.raises(SwarmCoordinatorWrongRound) as caught:
        peer.publish_rollouts(round_ + 1, digest_of("too late"), 1, 8, 0)
    assert (caught.value.round, caught.value.current_round) == (round_ + 1, round_ + 3)
    assert "too old" in str(caught.value)


def test_future_round_is_refused(chain, client_for, dev_accounts) -> None:
    (peer,) = register_all(client_for, dev_accounts[1:2])
    round_ = chain.current_round()
    with pytest.raises(SwarmCoordinatorWrongRound, match=f"round {round_ + 1} has not started"):
        peer.publish_rollouts(round_ + 1, digest_of("early"), 1, 8, 0)


def test_zero_digest_and_double_publish_are_refused(chain, client_for, dev_accounts) -> None:
    (peer,) = register_all(client_for, dev_accounts[1:2])
    round_ = chain.current_round()
    with pytest.raises(SwarmCoordinatorZeroDigest):
        peer.publish_rollouts(round_, bytes(32), 1, 8, 0)
    peer.publish_rollouts(round_, digest_of("one"), 1, 8, 0)
    with pytest.raises(SwarmCoordinatorAlreadyPublished) as caught:
        peer.publish_rollouts(round_, digest_of("two"), 1, 8, 0)
    assert (caught.value.round, caught.value.peer) == (round_, peer.account_address)


def test_unregistered_accounts_cannot_publish(chain, client_for, dev_accounts) -> None:
    with pytest.raises(SwarmCoordinatorNotActive):
        client_for(dev_accounts[1]).publish_rollouts(chain.current_round(), digest_of("x"), 1, 8, 0)


def test_relayed_publish_records_the_sponsor(chain, client_for, dev_accounts) -> None:
    (peer,) = register_all(client_for, dev_accounts[1:2])
    sponsor = client_for(dev_accounts[5])  # not a peer: it only pays the gas
    round_ = chain.current_round()
    digest = digest_of("relayed")
    signature = peer.sign_publish(round_, digest, 3, 24, 500)
    receipt = sponsor.publish_rollouts_for(
        peer.account_address, round_, digest, 3, 24, 500, signature
    )
    event = _published(chain, receipt)
    assert event.peer == peer.account_address and event.relayer == sponsor.account_address
    assert peer.publication(round_, peer.account_address) == digest


def test_forged_or_mismatched_signatures_are_refused(chain, client_for, dev_accounts) -> None:
    (peer,) = register_all(client_for, dev_accounts[1:2])
    sponsor = client_for(dev_accounts[5])
    round_ = chain.current_round()
    digest = digest_of("relayed")
    forger = Account.create()
    forged = sign_publish(
        forger,
        sponsor.domain,
        round=round_,
        digest=digest,
        groups=3,
        completions=24,
        reward_sum=500,
    )
    with pytest.raises(SwarmCoordinatorInvalidSignature, match="signature"):
        sponsor.publish_rollouts_for(peer.account_address, round_, digest, 3, 24, 500, forged)
    genuine = peer.sign_publish(round_, digest, 3, 24, 500)
    with pytest.raises(SwarmCoordinatorInvalidSignature):  # the sponsor inflates the reward
        sponsor.publish_rollouts_for(peer.account_address, round_, digest, 3, 24, 5_000, genuine)
    other_domain = Domain(chain_id=1, verifying_contract=sponsor.address)
    wrong_chain = sign_publish(
        dev_accounts[1],
        other_domain,
        round=round_,
        digest=digest,
        groups=3,
        completions=24,
        reward_sum=500,
    )
    with pytest.raises(SwarmCoordinatorInvalidSignature):
        sponsor.publish_rollouts_for(peer.account_address, round_, digest, 3, 24, 500, wrong_chain)
    with pytest.raises(SwarmCoordinatorInvalidSignature):
        sponsor.publish_rollouts_for(peer.account_address, round_, digest, 3, 24, 500, genuine[:64])


def test_publishing_stops_while_paused(chain, client_for, dev_accounts) -> None:
    (peer,) = register_all(client_for, dev_accounts[1:2])
    client_for(dev_accounts[0]).pause()
    with pytest.raises(SwarmCoordinatorPaused, match="paused"):
        peer.publish_rollouts(chain.current_round(), digest_of("x"), 1, 8, 0)

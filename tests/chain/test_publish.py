"""Publishing rollout commitments, directly and relayed with an EIP-712 signature."""

from __future__ import annotations

import pytest
from eth_account import Account
from eth_utils import keccak

from node.chain.eip712 import ZERO_ADDRESS, Domain, sign_publish
from node.chain.events import EventReader, RolloutsPublished
from node.chain.models import VerdictState
from node.chain.reverts import (
    SwarmCoordinatorAlreadyPublished,
    SwarmCoordinatorInvalidSignature,
    SwarmCoordinatorNotActive,
    SwarmCoordinatorPaused,
    SwarmCoordinatorSignatureExpired,
    SwarmCoordinatorWrongRelayer,
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
    assert peer.verdict(round_, peer.account_address).state is VerdictState.PUBLISHED
    assert peer.verdict(round_ + 1, peer.account_address).state is VerdictState.NONE
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
    deadline = chain.now() + 600
    signature = peer.sign_publish(round_, digest, 3, 24, 500, deadline=deadline)
    receipt = sponsor.publish_rollouts_for(
        peer.account_address, round_, digest, 3, 24, 500, ZERO_ADDRESS, deadline, signature
    )
    event = _published(chain, receipt)
    assert event.peer == peer.account_address and event.relayer == sponsor.account_address
    assert event.digest == digest
    assert peer.verdict(round_, peer.account_address).state is VerdictState.PUBLISHED


def test_a_named_relayer_and_the_deadline_bind(chain, client_for, dev_accounts) -> None:
    (peer,) = register_all(client_for, dev_accounts[1:2])
    sponsor, thief = client_for(dev_accounts[5]), client_for(dev_accounts[6])
    round_ = chain.current_round()
    digest = digest_of("bound")
    deadline = chain.now() + 30
    args = (peer.account_address, round_, digest, 3, 24, 500, sponsor.account_address, deadline)
    signature = peer.sign_publish(
        round_, digest, 3, 24, 500, relayer=sponsor.account_address, deadline=deadline
    )
    with pytest.raises(SwarmCoordinatorWrongRelayer) as caught:
        thief.publish_for(*args, signature)  # a front-runner cannot take the relay
    assert caught.value.relayer == sponsor.account_address and "only that address" in str(
        caught.value
    )
    chain.warp_to(deadline + 1)
    with pytest.raises(SwarmCoordinatorSignatureExpired) as expired:
        sponsor.publish_for(*args, signature)
    assert expired.value.deadline == deadline and "sign again" in str(expired.value)


def test_forged_or_mismatched_signatures_are_refused(chain, client_for, dev_accounts) -> None:
    (peer,) = register_all(client_for, dev_accounts[1:2])
    sponsor = client_for(dev_accounts[5])
    round_ = chain.current_round()
    digest = digest_of("relayed")
    deadline = chain.now() + 600
    values = {"round": round_, "digest": digest, "groups": 3, "completions": 24}
    relay = (peer.account_address, round_, digest, 3, 24, 500, ZERO_ADDRESS, deadline)
    forged = sign_publish(
        Account.create(), sponsor.domain, **values, reward_sum=500, deadline=deadline
    )
    with pytest.raises(SwarmCoordinatorInvalidSignature, match="signature"):
        sponsor.publish_rollouts_for(*relay, forged)
    genuine = peer.sign_publish(round_, digest, 3, 24, 500, deadline=deadline)
    with pytest.raises(SwarmCoordinatorInvalidSignature):  # the sponsor inflates the reward
        sponsor.publish_rollouts_for(*relay[:5], 5_000, *relay[6:], genuine)
    with pytest.raises(SwarmCoordinatorInvalidSignature):  # ...or extends the deadline
        sponsor.publish_rollouts_for(*relay[:7], deadline + 1, genuine)
    with pytest.raises(SwarmCoordinatorInvalidSignature):
        sponsor.publish_rollouts_for(*relay, genuine[:64])
    domain = sponsor.domain
    for other in (
        Domain(1, domain.verifying_contract, domain.salt),  # another chain
        Domain(domain.chain_id, domain.verifying_contract, keccak(text="another deployment")),
    ):
        foreign = sign_publish(dev_accounts[1], other, **values, reward_sum=500, deadline=deadline)
        with pytest.raises(SwarmCoordinatorInvalidSignature):
            sponsor.publish_rollouts_for(*relay, foreign)
    sponsor.publish_rollouts_for(*relay, genuine)


def test_the_domain_is_salted_with_the_genesis_seed(chain, client_for, deployment) -> None:
    client = client_for()
    assert client.domain.salt == client.genesis_seed()
    assert client.domain.separator == client.domain_separator()
    assert Domain.of_deployment(deployment) == client.domain


def test_publishing_stops_while_paused(chain, client_for, dev_accounts) -> None:
    (peer,) = register_all(client_for, dev_accounts[1:2])
    sponsor = client_for(dev_accounts[5])
    client_for(dev_accounts[0]).pause()
    round_, digest, deadline = chain.current_round(), digest_of("x"), chain.now() + 600
    with pytest.raises(SwarmCoordinatorPaused, match="paused"):
        peer.publish_rollouts(round_, digest, 1, 8, 0)
    signature = peer.sign_publish(round_, digest, 1, 8, 0, deadline=deadline)
    with pytest.raises(SwarmCoordinatorPaused):
        sponsor.publish_for(
            peer.account_address, round_, digest, 1, 8, 0, ZERO_ADDRESS, deadline, signature
        )

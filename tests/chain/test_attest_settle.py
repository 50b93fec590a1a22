"""Attestations, disputes, slashing and the treasury's claim."""

from __future__ import annotations

import threading
import time

import pytest

from node.chain.events import DisputeSettled, EventReader
from node.chain.models import Attestation, Verdict
from node.chain.reverts import (
    SwarmCoordinatorAlreadySettled,
    SwarmCoordinatorAttestationOutOfOrder,
    SwarmCoordinatorAttestationWindowClosed,
    SwarmCoordinatorAttestationWindowOpen,
    SwarmCoordinatorDigestMismatch,
    SwarmCoordinatorEmptyAttestation,
    SwarmCoordinatorInvalidCounts,
    SwarmCoordinatorNoDispute,
    SwarmCoordinatorNoPublication,
    SwarmCoordinatorNothingToClaim,
    SwarmCoordinatorNotTreasury,
    SwarmCoordinatorSelfAttestation,
)
from tests.chain.helpers import ETHER, digest_of, publish, register_all, verdict_on

pytestmark = pytest.mark.integration


@pytest.fixture
def swarm(chain, client_for, dev_accounts):
    """Four registered peers that all published for the current round: (round, clients, digests)."""
    clients = register_all(client_for, dev_accounts[1:5], stake=2 * ETHER)
    round_ = chain.current_round()
    digests = [publish(client, round_) for client in clients]
    return round_, clients, digests


def test_batched_attestation_records_every_item(chain, swarm) -> None:
    round_, (a, b, c, d), digests = swarm
    items = [
        verdict_on(b, round_, digests[1], flag=False),
        verdict_on(c, round_, digests[2], flag=True),
        verdict_on(d, round_, digests[3], flag=False),
    ]
    a.attest(list(reversed(items)))  # the client sorts into the contract's order
    assert a.verdict(round_, b.account_address) == Verdict(flags=0, agreements=1, settled=False)
    assert a.verdict(round_, c.account_address) == Verdict(flags=1, agreements=0, settled=False)
    assert a.peer_info(a.account_address).next_attest_round == round_ + 1
    assert a.peer_info(c.account_address).open_disputes == 1


def test_self_attestation_is_refused(swarm) -> None:
    round_, (a, *_), digests = swarm
    with pytest.raises(SwarmCoordinatorSelfAttestation, match="own batch"):
        a.attest([verdict_on(a, round_, digests[0], flag=False)])


def test_digest_mismatch_names_both_digests(swarm) -> None:
    round_, (a, b, *_), digests = swarm
    wrong = digest_of("something else")
    with pytest.raises(SwarmCoordinatorDigestMismatch) as caught:
        a.attest([verdict_on(b, round_, wrong, flag=False)])
    assert (caught.value.published, caught.value.attested) == (digests[1], wrong)
    assert digests[1].hex() in str(caught.value)


def test_out_of_order_and_repeated_attestations_are_refused(swarm) -> None:
    round_, (a, b, c, _), digests = swarm
    items = sorted(
        [
            verdict_on(b, round_, digests[1], flag=False),
            verdict_on(c, round_, digests[2], flag=False),
        ],
        key=Attestation.sort_key,
        reverse=True,
    )
    with pytest.raises(SwarmCoordinatorAttestationOutOfOrder) as caught:
        a.attest(items, sort=False)
    assert caught.value.round == round_ and caught.value.subject == items[1].subject
    a.attest([verdict_on(b, round_, digests[1], flag=False)])
    with pytest.raises(SwarmCoordinatorAttestationOutOfOrder, match="next_attest_round"):
        a.attest([verdict_on(c, round_, digests[2], flag=False)])


def test_invalid_items_are_refused(chain, swarm, client_for, dev_accounts) -> None:
    round_, (a, b, *_), digests = swarm
    with pytest.raises(SwarmCoordinatorEmptyAttestation):
        a.attest([])
    bad_counts = Attestation(
        round=round_,
        subject=b.account_address,
        digest=digests[1],
        checked=0,
        agreed=0,
        verified_reward_sum=0,
    )
    with pytest.raises(SwarmCoordinatorInvalidCounts):
        a.attest([bad_counts])
    (e,) = register_all(client_for, dev_accounts[5:6])
    with pytest.raises(SwarmCoordinatorNoPublication):
        a.attest(
            [
                Attestation(
                    round=round_,
                    subject=e.account_address,
                    digest=digests[0],
                    checked=1,
                    agreed=1,
                    verified_reward_sum=0,
                )
            ]
        )


def test_attestation_window_closes(chain, swarm) -> None:
    round_, (a, b, *_), digests = swarm
    chain.warp_to_round(round_ + 3)
    with pytest.raises(SwarmCoordinatorAttestationWindowClosed) as caught:
        a.attest([verdict_on(b, round_, digests[1], flag=True)])
    assert (caught.value.round, caught.value.current_round) == (round_, round_ + 3)


def test_dispute_with_quorum_slashes_half_the_stake(chain, swarm, client_for, dev_accounts) -> None:
    round_, (a, b, c, d), digests = swarm
    chain.warp_to_round(round_ + 1)
    b.attest([verdict_on(a, round_, digests[0], flag=True)])
    c.attest([verdict_on(a, round_, digests[0], flag=True)])
    d.attest([verdict_on(a, round_, digests[0], flag=False)])
    with pytest.raises(SwarmCoordinatorAttestationWindowOpen) as caught:
        d.settle(round_, a.account_address)
    assert caught.value.settleable_from_round == round_ + 3
    chain.warp_to_round(round_ + 3)
    d.settle(round_, a.account_address)
    assert a.peer_info(a.account_address).stake == ETHER  # 2 ETH, slashed 50 %
    assert a.peer_info(a.account_address).open_disputes == 0
    assert a.unclaimed_slashes() == ETHER
    assert a.verdict(round_, a.account_address) == Verdict(flags=2, agreements=1, settled=True)
    with pytest.raises(SwarmCoordinatorAlreadySettled):
        d.settle(round_, a.account_address)
    with pytest.raises(SwarmCoordinatorNotTreasury):
        b.claim_slashed_funds()
    treasury = client_for(dev_accounts[0])
    before = chain.balance(treasury.account_address)
    receipt = treasury.claim_slashed_funds()
    assert chain.balance(treasury.account_address) == before + ETHER - receipt.fee_wei
    with pytest.raises(SwarmCoordinatorNothingToClaim):
        treasury.claim_slashed_funds()


def test_dispute_below_quorum_does_not_slash(chain, swarm) -> None:
    round_, (a, b, c, _), digests = swarm
    b.attest([verdict_on(a, round_, digests[0], flag=True)])
    chain.warp_to_round(round_ + 3)
    with pytest.raises(SwarmCoordinatorNoDispute, match="nothing to settle"):
        c.settle(round_, b.account_address)  # nobody flagged b
    receipt = c.settle(round_, a.account_address)
    (settled,) = EventReader(chain.w3, chain.deployment.coordinator).read(
        receipt.block_number, receipt.block_number, events=[DisputeSettled]
    )
    assert (settled.slashed, settled.amount, settled.flags, settled.agreements) == (False, 0, 1, 0)
    assert a.peer_info(a.account_address).stake == 2 * ETHER
    assert a.unclaimed_slashes() == 0
    assert a.verdict(round_, a.account_address).settled


def test_a_settle_that_loses_a_race_in_the_same_block_names_the_reason(chain, swarm) -> None:
    """Two peers settle one dispute in one block: the second reverts, and replaying it on the
    state after the block tells why (AlreadySettled), not only that the state changed."""
    round_, (a, b, c, d), digests = swarm
    chain.warp_to_round(round_ + 1)
    b.attest([verdict_on(a, round_, digests[0], flag=True)])
    c.attest([verdict_on(a, round_, digests[0], flag=True)])
    chain.warp_to_round(round_ + 3)
    chain.rpc("evm_setAutomine", False)
    outcomes: dict[str, object] = {}

    def settle(client, name: str) -> None:  # type: ignore[no-untyped-def]
        try:
            outcomes[name] = client.settle(round_, a.account_address)
        except Exception as exc:  # noqa: BLE001 - the outcome is what is checked
            outcomes[name] = exc

    threads = [threading.Thread(target=settle, args=(x, n)) for x, n in ((c, "c"), (d, "d"))]
    try:
        for thread in threads:
            thread.start()
        deadline = time.monotonic() + 30
        while len(chain.rpc("eth_getBlockByNumber", "pending", False)["transactions"]) < 2:
            assert time.monotonic() < deadline, "the two settles never reached the pool"
            time.sleep(0.05)
        chain.mine()
    finally:
        chain.rpc("evm_setAutomine", True)
        for thread in threads:
            thread.join(timeout=60)
    errors = [o for o in outcomes.values() if isinstance(o, Exception)]
    assert len(outcomes) == 2 and len(errors) == 1, outcomes
    assert isinstance(errors[0], SwarmCoordinatorAlreadySettled), errors[0]

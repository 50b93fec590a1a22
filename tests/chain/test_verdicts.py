"""Sealing, committing, revealing, settling, resolving flags, reporting agreements and claiming,
through the Python client against the real contract; every revert decoded."""

from __future__ import annotations

import pytest

from node.chain.committee import ballot_commitment, reveal_receipt, sort_items
from node.chain.events import (
    AgreementPenalized,
    Claimed,
    DisputeSettled,
    EventReader,
    FlagResolved,
    RoundSealed,
    VerdictRevealed,
    VerdictsCommitted,
)
from node.chain.models import VerdictItem, VerdictState
from node.chain.reverts import (
    SwarmCoordinatorAlreadyCommitted,
    SwarmCoordinatorAlreadySealed,
    SwarmCoordinatorAlreadySettled,
    SwarmCoordinatorAttestationOutOfOrder,
    SwarmCoordinatorCommitmentMismatch,
    SwarmCoordinatorInvalidCounts,
    SwarmCoordinatorNoDispute,
    SwarmCoordinatorNoFlag,
    SwarmCoordinatorNoPublication,
    SwarmCoordinatorNothingToClaim,
    SwarmCoordinatorNotPenalizable,
    SwarmCoordinatorNotSettled,
    SwarmCoordinatorSelfAttestation,
    SwarmCoordinatorRewardOutOfRange,
    SwarmCoordinatorWrongDeposit,
    SwarmCoordinatorWrongPhase,
    SwarmCoordinatorZeroCommitment,
)
from tests.chain.helpers import (
    ETHER,
    Ballot,
    item_on,
    judge,
    publish,
    register_all,
    to_commit_phase,
    to_reveal_phase,
    to_settle_phase,
)

pytestmark = pytest.mark.integration
BOND = ETHER // 10  # TEST_CONFIG.flag_bond


@pytest.fixture
def peers(chain, client_for, dev_accounts):
    """Five 1-ETH peers whose stake counts from the round returned (the one they publish in)."""
    clients = register_all(client_for, dev_accounts[1:6])
    round_ = chain.current_round() + 1
    chain.warp_to_round(round_)
    return round_, clients


def _events(chain, receipt, kind):
    reader = EventReader(chain.w3, chain.deployment.coordinator)
    return reader.read(receipt.block_number, receipt.block_number, events=[kind])


def test_seal_draws_the_committee_once_in_the_commit_phase(chain, peers) -> None:
    round_, (a, b, *_) = peers
    publish(a, round_)
    assert a.seal(round_) is None
    with pytest.raises(SwarmCoordinatorWrongPhase) as caught:
        a.seal_round(round_)
    commit = a.cached_phases.commit_phase(round_)
    assert (caught.value.from_round, caught.value.to_round) == (commit.start, commit.stop - 1)
    to_commit_phase(chain, a, round_)
    receipt = b.seal_round(round_)
    seal = a.seal(round_)
    assert seal is not None and seal.total_weight == 5 * ETHER and len(seal.beacon) == 20
    (event,) = _events(chain, receipt, RoundSealed)
    assert (event.round, event.beacon, event.total_weight) == (round_, seal.beacon, 5 * ETHER)
    with pytest.raises(SwarmCoordinatorAlreadySealed, match=f"round {round_} is sealed"):
        a.seal_round(round_)
    # k = 64 and five equal peers: everyone but the subject sits with its own weight
    assert a.committee_seat(round_, a.account_address, b.account_address) == (True, ETHER)
    assert a.committee_seat(round_, a.account_address, a.account_address) == (False, 0)


def test_upheld_flags_slash_pay_and_penalize_agreement(
    chain, client_for, dev_accounts, peers
) -> None:
    round_, (subject, flagger1, flagger2, agreer, settler) = peers
    publish(subject, round_)
    flags = [Ballot(c, round_, [item_on(subject, flag=True)]) for c in (flagger1, flagger2)]
    agreement = Ballot(agreer, round_, [item_on(subject, flag=False)])
    judge(chain, round_, [*flags, agreement])
    verdict = subject.verdict(round_, subject.account_address)
    assert (verdict.flag_weight, verdict.agree_weight, verdict.flaggers, verdict.agreers) == (
        2 * ETHER,
        ETHER,
        2,
        1,
    )
    assert verdict.state is VerdictState.PUBLISHED and verdict.published and not verdict.settled
    assert flagger1.flag_weight(round_, subject.account_address, flagger1.account_address) == ETHER
    assert flagger1.peer_info(flagger1.account_address).locked_bonds == BOND
    assert subject.peer_info(subject.account_address).open_disputes == 1
    with pytest.raises(SwarmCoordinatorWrongPhase):
        settler.settle(round_, subject.account_address)
    to_settle_phase(chain, subject, round_)
    receipt = settler.settle(round_, subject.account_address)
    slash, tip, pool = ETHER // 2, ETHER // 40, ETHER // 4  # 50 % slash; 5 % tip; 50 % reward
    (settled,) = _events(chain, receipt, DisputeSettled)
    assert (settled.slashed, settled.amount, settled.tip, settled.settler) == (
        True,
        slash,
        tip,
        settler.account_address,
    )
    assert (settled.flag_weight, settled.agree_weight) == (2 * ETHER, ETHER)
    assert subject.verdict(round_, subject.account_address).state is VerdictState.UPHELD
    assert subject.peer_info(subject.account_address).stake == ETHER - slash
    assert settler.claimable(settler.account_address) == tip
    assert settler.reward_pool(round_, subject.account_address) == pool
    with pytest.raises(SwarmCoordinatorAlreadySettled):
        settler.settle(round_, subject.account_address)
    receipt = settler.resolve_flag(round_, subject.account_address, flagger1.account_address)
    (resolved,) = _events(chain, receipt, FlagResolved)
    assert (resolved.flagger, resolved.upheld, resolved.amount) == (
        flagger1.account_address,
        True,
        pool // 2,
    )
    info = flagger1.peer_info(flagger1.account_address)
    assert (info.locked_bonds, info.open_flags, info.stake) == (0, 0, ETHER)
    assert flagger1.claimable(flagger1.account_address) == pool // 2
    with pytest.raises(SwarmCoordinatorNoFlag):
        settler.resolve_flag(round_, subject.account_address, flagger1.account_address)
    receipt = settler.report_agreement(round_, agreer.account_address, agreement.items, 0)
    (penalty,) = _events(chain, receipt, AgreementPenalized)
    assert (penalty.attester, penalty.reporter, penalty.amount, penalty.reporter_share) == (
        agreer.account_address,
        settler.account_address,
        BOND,
        BOND // 20,
    )
    assert agreer.peer_info(agreer.account_address).stake == ETHER - BOND
    with pytest.raises(SwarmCoordinatorNotPenalizable):
        settler.report_agreement(round_, agreer.account_address, agreement.items, 0)
    with pytest.raises(SwarmCoordinatorNotPenalizable):  # a flag is no agreement
        settler.report_agreement(round_, flagger2.account_address, flags[1].items, 0)
    before = chain.balance(settler.account_address)
    receipt = settler.claim()
    (claimed,) = _events(chain, receipt, Claimed)
    assert claimed.amount == tip + BOND // 20 and settler.claimable(settler.account_address) == 0
    assert chain.balance(settler.account_address) == before + claimed.amount - receipt.fee_wei
    with pytest.raises(SwarmCoordinatorNothingToClaim):
        settler.claim()
    assert settler.burned() == (slash - tip - pool) + (BOND - BOND // 20)


def test_rejected_flags_forfeit_their_bonds_to_the_subject(chain, peers) -> None:
    round_, (subject, flagger, agreer1, agreer2, settler) = peers
    publish(subject, round_)
    judge(
        chain,
        round_,
        [
            Ballot(flagger, round_, [item_on(subject, flag=True)]),
            Ballot(agreer1, round_, [item_on(subject, flag=False)]),
            Ballot(agreer2, round_, [item_on(subject, flag=False)]),
        ],
    )
    with pytest.raises(SwarmCoordinatorNotSettled):
        settler.resolve_flag(round_, subject.account_address, flagger.account_address)
    to_settle_phase(chain, subject, round_)
    receipt = settler.settle(round_, subject.account_address)
    (settled,) = _events(chain, receipt, DisputeSettled)
    assert (settled.slashed, settled.amount, settled.tip) == (False, 0, 0)
    assert subject.verdict(round_, subject.account_address).state is VerdictState.REJECTED
    receipt = settler.resolve_flag(round_, subject.account_address, flagger.account_address)
    (resolved,) = _events(chain, receipt, FlagResolved)
    assert (resolved.upheld, resolved.amount) == (False, BOND)
    assert flagger.peer_info(flagger.account_address).stake == ETHER - BOND
    assert subject.claimable(subject.account_address) == BOND
    with pytest.raises(SwarmCoordinatorNotPenalizable):  # nothing upheld: agreeing was right
        settler.report_agreement(round_, agreer1.account_address, [item_on(subject, flag=False)], 0)


def test_commit_and_reveal_events_carry_the_ballot(chain, peers) -> None:
    round_, (subject, other, attester, *_) = peers
    publish(subject, round_)
    publish(other, round_)
    ballot = Ballot(attester, round_, [item_on(subject, flag=True), item_on(other, flag=False)])
    to_commit_phase(chain, attester, round_)
    attester.seal_round(round_)
    receipt = ballot.commit()
    (committed,) = _events(chain, receipt, VerdictsCommitted)
    assert (committed.round, committed.attester) == (round_, attester.account_address)
    to_reveal_phase(chain, attester, round_)
    receipt = ballot.reveal()
    revealed = _events(chain, receipt, VerdictRevealed)
    assert [e.item() for e in revealed] == ballot.items
    assert [e.weight for e in revealed] == [ETHER, ETHER]
    assert [e.is_flag for e in revealed] == [i.is_flag for i in ballot.items]
    assert attester.ballot(round_, attester.account_address) == reveal_receipt(ballot.items)


def test_commit_reverts_are_explained(chain, peers) -> None:
    round_, (subject, attester, *_) = peers
    publish(subject, round_)
    commitment = Ballot(attester, round_, [item_on(subject, flag=False)]).commitment
    with pytest.raises(SwarmCoordinatorWrongPhase):
        attester.commit_verdicts(round_, commitment)
    to_commit_phase(chain, attester, round_)
    attester.seal_round(round_)
    with pytest.raises(SwarmCoordinatorZeroCommitment):
        attester.commit_verdicts(round_, bytes(32))
    attester.commit_verdicts(round_, commitment)
    with pytest.raises(SwarmCoordinatorAlreadyCommitted) as caught:
        attester.commit_verdicts(round_, commitment)
    assert (caught.value.round, caught.value.attester) == (round_, attester.account_address)


def test_a_commitment_carries_the_deposit_and_the_reveal_sends_it_back(chain, peers) -> None:
    round_, (subject, attester, *_) = peers
    publish(subject, round_)
    ballot = Ballot(attester, round_, [item_on(subject, flag=False)])
    to_commit_phase(chain, attester, round_)
    attester.seal_round(round_)
    deposit = attester.commit_deposit()
    assert deposit > 0
    with pytest.raises(SwarmCoordinatorWrongDeposit) as caught:
        attester.commit_verdicts(round_, ballot.commitment, deposit - 1)
    assert (caught.value.sent, caught.value.required) == (deposit - 1, deposit)
    before = chain.balance(attester.account_address)
    committed = ballot.commit()
    held = chain.balance(chain.deployment.coordinator)
    to_reveal_phase(chain, attester, round_)
    revealed = ballot.reveal()
    after = chain.balance(attester.account_address)
    assert after == before - committed.fee_wei - revealed.fee_wei  # the deposit came back
    assert chain.balance(chain.deployment.coordinator) == held - deposit


def test_a_revealed_reward_sum_above_the_batch_maximum_is_refused(chain, peers) -> None:
    """The v2 review's freeze: a sole voter revealed 2^63 - 1 for a withheld batch."""
    round_, (subject, attester, *_) = peers
    publish(subject, round_)
    rules = attester.rules_at(round_)
    too_much = VerdictItem(
        subject=subject.account_address,
        checked=rules.completions_per_batch,
        agreed=rules.completions_per_batch,
        verified_reward_sum=2**63 - 1,
    )
    to_commit_phase(chain, attester, round_)
    attester.seal_round(round_)
    items, salt = _committed(chain, attester, round_, [too_much])
    to_reveal_phase(chain, attester, round_)
    with pytest.raises(SwarmCoordinatorRewardOutOfRange) as caught:
        attester.reveal_verdicts(round_, items, salt)
    assert caught.value.maximum == rules.max_reward_milli == 4 * 4 * 1000


def _committed(chain, attester, round_, items, *, sort=True):
    """Commits ``items`` (sorted unless ``sort=False``) with salt 0x01..; returns (items, salt)."""
    ordered = sort_items(items) if sort else list(items)
    salt = bytes([1]) * 32
    attester.commit_verdicts(
        round_, ballot_commitment(attester.account_address, round_, ordered, salt)
    )
    return ordered, salt


def test_reveal_reverts_are_explained(chain, peers) -> None:
    round_, (subject, other, attester, silent, fifth) = peers
    for publisher in (subject, other, fifth):
        publish(publisher, round_)
    to_commit_phase(chain, attester, round_)
    attester.seal_round(round_)
    good, salt = _committed(chain, attester, round_, [item_on(subject, flag=False)])
    descending = sort_items([item_on(subject, flag=False), item_on(fifth, flag=False)])[::-1]
    unsorted, _ = _committed(chain, other, round_, descending, sort=False)
    bad_counts = [
        VerdictItem(subject=subject.account_address, checked=0, agreed=0, verified_reward_sum=0)
    ]
    _committed(chain, fifth, round_, bad_counts)
    _committed(chain, silent, round_, [item_on(silent, flag=False)])
    with pytest.raises(SwarmCoordinatorWrongPhase):
        attester.reveal_verdicts(round_, good, salt)
    to_reveal_phase(chain, attester, round_)
    with pytest.raises(SwarmCoordinatorCommitmentMismatch) as caught:
        attester.reveal_verdicts(round_, good, bytes(32))
    assert "do not match its commitment" in str(caught.value)
    with pytest.raises(SwarmCoordinatorAttestationOutOfOrder) as order:
        other.reveal_verdicts(round_, unsorted, salt, sort=False)
    assert order.value.subject == unsorted[1].subject
    with pytest.raises(SwarmCoordinatorInvalidCounts):
        fifth.reveal_verdicts(round_, bad_counts, salt)
    with pytest.raises(SwarmCoordinatorSelfAttestation):
        silent.reveal_verdicts(round_, [item_on(silent, flag=False)], salt)
    attester.reveal_verdicts(round_, good, salt)
    with pytest.raises(SwarmCoordinatorCommitmentMismatch):  # a second reveal
        attester.reveal_verdicts(round_, good, salt)


def test_verdicts_on_unpublished_batches_are_refused(chain, peers) -> None:
    round_, (subject, attester, *_) = peers
    to_commit_phase(chain, attester, round_)
    attester.seal_round(round_)
    items, salt = _committed(chain, attester, round_, [item_on(subject, flag=True)])
    to_reveal_phase(chain, attester, round_)
    with pytest.raises(SwarmCoordinatorNoPublication) as caught:
        attester.reveal_verdicts(round_, items, salt)
    assert (caught.value.round, caught.value.subject) == (round_, subject.account_address)


def test_settle_needs_a_flag(chain, peers) -> None:
    round_, (subject, attester, *_) = peers
    publish(subject, round_)
    judge(chain, round_, [Ballot(attester, round_, [item_on(subject, flag=False)])])
    to_settle_phase(chain, subject, round_)
    with pytest.raises(SwarmCoordinatorNoDispute, match="nobody flagged"):
        attester.settle(round_, subject.account_address)


def test_judging_goes_on_while_paused(chain, client_for, dev_accounts, peers) -> None:
    round_, (subject, flagger1, flagger2, *_) = peers
    publish(subject, round_)
    client_for(dev_accounts[0]).pause()
    ballots = [Ballot(c, round_, [item_on(subject, flag=True)]) for c in (flagger1, flagger2)]
    judge(chain, round_, ballots)
    to_settle_phase(chain, subject, round_)
    flagger1.settle(round_, subject.account_address)
    flagger1.resolve_flag(round_, subject.account_address, flagger2.account_address)
    flagger2.claim()

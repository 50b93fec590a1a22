"""The seat rule, ballot commitments and reveal receipts: pure properties, then bit-for-bit parity
with the deployed contract (``committeeSeat``, ``revealVerdicts``, ``ballot``)."""

from __future__ import annotations

import random

import pytest
from eth_abi import encode
from eth_account import Account
from eth_utils import keccak
from hypothesis import given
from hypothesis import strategies as st

from node.chain.committee import (
    SEAT_RULE,
    RoundSeats,
    attester_point,
    ballot_commitment,
    encode_items,
    items_hash,
    reveal_receipt,
    seat_draw,
    sort_items,
    subject_point,
    vote_weight,
)
from node.chain.models import Rules
from tests.chain.helpers import ETHER, Ballot, item_on, publish, random_peers, to_commit_phase

ALICE = "0x70997970C51812dc3A010C7d01b50e0d17dc79C8"
BOB = "0x3C44CdDdB6a900fa2b585dd299e03d12FA4293BC"
addresses = st.binary(min_size=20, max_size=20).map(lambda b: Account.create(b.hex()).address)


# ------------------------------------------------------------------------------------ pure rules


def test_nobody_judges_itself_and_zero_weight_holds_no_seat() -> None:
    beacon = bytes(range(20))
    assert vote_weight(beacon, 10 * ETHER, 64, ALICE, ALICE, ETHER) == 0
    assert vote_weight(beacon, 10 * ETHER, 64, ALICE, ALICE.lower(), ETHER) == 0
    assert vote_weight(beacon, 10 * ETHER, 64, ALICE, BOB, 0) == 0
    assert vote_weight(beacon, 0, 64, ALICE, BOB, ETHER) == 0


def test_a_heavy_attester_always_sits_with_its_own_weight() -> None:
    beacon = bytes(20)
    assert vote_weight(beacon, 10 * ETHER, 10, ALICE, BOB, ETHER) == ETHER  # k * w == T
    assert vote_weight(beacon, 10 * ETHER, 64, ALICE, BOB, ETHER) == ETHER


@given(
    beacon=st.binary(min_size=20, max_size=20),
    subject=addresses,
    attester=addresses,
    total=st.integers(2, 2**96 - 1),
    k=st.integers(1, 2**16 - 1),
    weight=st.integers(1, 2**96 - 1),
)
def test_the_lottery_branch_pays_t_over_k_below_its_threshold(
    beacon, subject, attester, total, k, weight
) -> None:
    weight = min(weight, total)
    got = vote_weight(beacon, total, k, subject, attester, weight)
    if subject == attester:
        assert got == 0
    elif k * weight >= total:
        assert got == weight
    else:
        threshold = ((2**256 - 1) // total) * (k * weight)
        assert got == (total // k if seat_draw(beacon, subject, attester) < threshold else 0)


def test_the_draw_is_the_subjects_point_minus_the_attesters_on_the_ring() -> None:
    """A subject's point hashes abi.encode(beacon, subject), an attester's abi.encode(attester,
    beacon): the two orders make a's draw on b unrelated to b's on a."""
    beacon = bytes(range(20))
    point = subject_point(beacon, ALICE)
    assert point == int.from_bytes(keccak(encode(["bytes20", "address"], [beacon, ALICE])), "big")
    start = attester_point(beacon, BOB)
    assert start == int.from_bytes(keccak(encode(["address", "bytes20"], [BOB, beacon])), "big")
    assert seat_draw(beacon, ALICE, BOB) == (point - start) % 2**256
    assert (seat_draw(beacon, ALICE, BOB) + seat_draw(beacon, BOB, ALICE)) % 2**256 != 0


def test_a_seat_is_worth_its_stake_on_average() -> None:
    """Sybil neutrality: the expected vote weight of a seat is the attester's weight."""
    rng = random.Random(7)
    total, k, weight = 1_000 * ETHER, 16, 5 * ETHER
    draws = 4_000
    weights = [vote_weight(rng.randbytes(20), total, k, ALICE, BOB, weight) for _ in range(draws)]
    seated = sum(1 for w in weights if w)
    assert set(weights) == {0, total // k}
    expected_rate = k * weight / total  # 0.08
    assert abs(seated / draws - expected_rate) < 0.02
    assert abs(sum(weights) / draws - weight) < 0.25 * weight


def test_round_seats_are_vote_weight_over_every_pair() -> None:
    """The indexer's listing of a whole round (points sorted once, one arc per attester) gives
    exactly the seats vote_weight gives pair by pair, arcs that wrap past 2^256 included."""
    rng = random.Random(5)
    peers = ["0x" + rng.randbytes(20).hex() for _ in range(120)]
    beacon, total = rng.randbytes(20), 120 * 10**18
    for k in (1, 3, 64):
        ring = RoundSeats(beacon, total, k, peers)
        for attester in peers[:40]:
            weight = rng.choice([0, 10**17, 10**18, 5 * 10**18, 10**20])
            expected = [s for s in peers if vote_weight(beacon, total, k, s, attester, weight)]
            assert ring.of(attester, weight, peers) == expected
            assert sorted(ring.of(attester, weight)) == sorted(expected)


def test_an_arc_past_the_top_of_the_ring_wraps_to_its_bottom() -> None:
    """An attester whose point is near 2^256 sits on the subjects just after 0 too."""
    rng = random.Random(11)
    peers = ["0x" + rng.randbytes(20).hex() for _ in range(200)]
    beacon, total, k = bytes(20), 200 * 10**18, 50  # each arc is a quarter of the ring
    tops = [a for a in peers if attester_point(beacon, a) > 3 * 2**254]
    assert tops, "no attester near the top of the ring in this sample"
    ring = RoundSeats(beacon, total, k, peers)
    for attester in tops:
        expected = [s for s in peers if vote_weight(beacon, total, k, s, attester, 10**18)]
        low = [s for s in expected if subject_point(beacon, s) < 2**254]
        assert low  # seats past the wrap
        assert ring.of(attester, 10**18, peers) == expected


def test_items_sort_by_subject_number_and_refuse_duplicates() -> None:
    low, high = "0x00000000000000000000000000000000000000aa", "0x" + "ff" * 20
    items = [item_on(high, flag=True), item_on(low, flag=False)]
    assert [i.subject.lower() for i in sort_items(items)] == [low, "0x" + "ff" * 20]
    with pytest.raises(ValueError, match="one item per subject"):
        sort_items([item_on(low, flag=True), item_on(low, flag=False)])
    assert item_on(low, flag=True).is_flag and not item_on(low, flag=False).is_flag


def test_hashes_are_the_abi_encodings_the_contract_uses() -> None:
    items = sort_items([item_on(ALICE, flag=True), item_on(BOB, flag=False)])
    tuples = [(i.subject, i.checked, i.agreed, i.verified_reward_sum) for i in items]
    encoded = encode(["(address,uint32,uint32,int64)[]"], [tuples])
    assert encode_items(items) == encoded and items_hash(items) == keccak(encoded)
    assert encoded[:32] == (32).to_bytes(32, "big")  # abi.encode of one dynamic array: an offset
    salt = bytes(range(32))
    word = encode(["address", "uint64", "bytes32", "bytes32"], [BOB, 9, keccak(encoded), salt])
    assert ballot_commitment(BOB, 9, items, salt) == keccak(word)
    assert ballot_commitment(BOB, 9, items[::-1], salt) != keccak(word)  # order matters
    assert reveal_receipt(items) == keccak(
        encode(["bytes32", "string"], [keccak(encoded), "revealed"])
    )
    assert items_hash([]) == keccak(encode(["(address,uint32,uint32,int64)[]"], [[]]))
    with pytest.raises(ValueError, match="32 bytes"):
        ballot_commitment(BOB, 9, items, b"short")


# ------------------------------------------------------------------------------ contract parity


def _check_round(client, clients, round_: int) -> tuple[int, int, int]:
    """Compares committeeSeat with vote_weight for every ordered pair of ``round_``, and each
    attester's seats with RoundSeats' listing; returns the number of (sure seats, lottery wins,
    lottery losses)."""
    seal = client.seal(round_)
    assert seal is not None
    k = client.rules_at(round_).committee_size
    subjects = [c.account_address for c in clients]
    ring = RoundSeats(seal.beacon, seal.total_weight, k, subjects)  # the indexer's listing
    counts = [0, 0, 0]
    for attester in clients:
        a = attester.account_address
        weight = client.weight_at(a, round_)
        on_chain = set()
        for s in subjects:
            expected = vote_weight(seal.beacon, seal.total_weight, k, s, a, weight)
            assert client.committee_seat(round_, s, a) == (expected > 0, expected), (round_, s, a)
            if expected:
                on_chain.add(s)
            if s != a:
                branch = 0 if k * weight >= seal.total_weight else (1 if expected else 2)
                counts[branch] += 1
        assert set(ring.of(a, weight)) == on_chain, (round_, a)
    return counts[0], counts[1], counts[2]


@pytest.mark.integration
def test_vote_weight_equals_the_contracts_committee_seat(chain, client_for, dev_accounts) -> None:
    """Many beacons (one per sealed round), random stakes and pending deposits, and committee sizes
    from 64 (everyone seated) down to 1 (lotteries): bit-for-bit the contract's seat rule."""
    rng = random.Random(20_24)
    owner = client_for(dev_accounts[0])
    assert owner.seat_rule() == SEAT_RULE
    clients = random_peers(chain, client_for, rng, 10)
    start = chain.current_round() + 1
    phases = owner.cached_phases
    sizes = {start + phases.judging_rounds + 1: 3}
    owner.schedule_parameters(
        ETHER, Rules(**(owner.rules_at(start).model_dump() | {"committee_size": 3}))
    )
    totals = [0, 0, 0]
    for round_ in range(start, start + phases.judging_rounds + 5):
        if round_ == start + 3:
            rng.choice(clients).add_stake(rng.randrange(1, 3 * ETHER))  # pending, then counted
        to_commit_phase(chain, owner, round_)
        owner.seal_round(round_)
        counts = _check_round(owner, clients, round_)
        totals = [t + c for t, c in zip(totals, counts, strict=True)]
        if round_ in sizes:
            assert owner.rules_at(round_).committee_size == sizes[round_]
    sure, wins, losses = totals
    assert sure > 0 and wins > 0 and losses > 0, totals


@pytest.mark.integration
def test_ballot_commitment_is_accepted_and_leaves_the_reveal_receipt(
    chain, client_for, dev_accounts
) -> None:
    subject, attester = (client_for(a) for a in dev_accounts[1:3])
    subject.register("subject", ETHER)
    attester.register("attester", ETHER)
    round_ = chain.current_round() + 1
    chain.warp_to_round(round_)
    publish(subject, round_)
    ballot = Ballot(attester, round_, [item_on(subject, flag=False)])
    to_commit_phase(chain, attester, round_)
    attester.seal_round(round_)
    ballot.commit()
    assert attester.ballot(round_, attester.account_address) == ballot.commitment
    chain.warp_to_round(attester.cached_phases.reveal_phase(round_).start)
    ballot.reveal()
    assert attester.ballot(round_, attester.account_address) == reveal_receipt(ballot.items)
    verdict = attester.verdict(round_, subject.account_address)
    assert (verdict.agreers, verdict.agree_weight, verdict.flaggers) == (1, ETHER, 0)

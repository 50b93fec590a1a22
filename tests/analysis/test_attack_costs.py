"""scripts/attack_costs.py against the seat rule itself.

The script's figures are exact binomial sums that assume each seat is an independent draw with
probability min(1, k * w / T). These tests draw real committees with node.chain.committee (the
contract's rule, bit for bit) over many random beacons and check that the frequencies agree with
the script, and that its headline claims hold (sybil-neutral weight, the three-sybil case).
"""

from __future__ import annotations

import math
import random

import pytest

from node.chain.committee import vote_weight
from tests.scripts import load_script

ETH = 10**18

attack_costs = load_script("attack_costs")


def _address(rng: random.Random) -> str:
    return "0x" + rng.randbytes(20).hex()


def _committee_weight(beacon, total, k, subject, members) -> int:
    return sum(vote_weight(beacon, total, k, subject, address, w) for address, w in members)


def _simulated_win_rate(peers, attacker_wei, identities, rules, trials, seed=7):
    """Fraction of random beacons for which the attacker's seated flags win against an honest
    subject whose other honest peers (1 ETH each) all agree."""
    rng = random.Random(seed)
    victim = _address(rng)
    honest = [(_address(rng), ETH) for _ in range(peers - 1)]
    attacker = [(_address(rng), attacker_wei // identities) for _ in range(identities)]
    total = peers * ETH + sum(w for _, w in attacker)
    k = rules.committee_size
    wins = 0
    for _ in range(trials):
        beacon = rng.randbytes(20)
        flag = _committee_weight(beacon, total, k, victim, attacker)
        agree = _committee_weight(beacon, total, k, victim, honest)
        others = total - ETH
        wins += flag * (1 - rules.quorum) > rules.quorum * agree and flag >= rules.floor * others
    return wins / trials


@pytest.mark.parametrize(("peers", "share", "identities", "k"), [(5, 0.3, 3, 3), (8, 0.4, 1, 4)])
def test_exact_probability_matches_committees_drawn_with_the_seat_rule(peers, share, identities, k):
    rules = attack_costs.Rules(committee_size=k, quorum=0.5, floor=0.3334)
    exact = attack_costs.attack(peers, share, identities, rules)
    attacker_wei = round(share / (1 - share) * peers * ETH)
    trials = 3000
    observed = _simulated_win_rate(peers, attacker_wei, identities, rules, trials)
    tolerance = 4 * math.sqrt(max(exact * (1 - exact), 1e-4) / trials)
    assert 0.01 < exact < 0.99  # a case where the comparison means something
    assert abs(observed - exact) <= tolerance, (observed, exact)


def test_expected_vote_weight_equals_stake_however_it_is_split():
    """Sybil neutrality: E[vote weight] of a seat is its stake, for one identity or many (a rule
    that voted with the stake itself would average p * w, a quarter of it here)."""
    rng = random.Random(11)
    total, k, stake, trials = 100 * ETH, 8, 3 * ETH, 2000
    subject = _address(rng)
    for identities in (1, 10):
        members = [(_address(rng), stake // identities) for _ in range(identities)]
        p = k * (stake // identities) / total
        sd_of_mean = math.sqrt(identities * p * (1 - p)) * (total / k) / math.sqrt(trials)
        draws = [
            _committee_weight(rng.randbytes(20), total, k, subject, members) for _ in range(trials)
        ]
        assert abs(sum(draws) / trials - stake) <= 4 * sd_of_mean


def test_three_minimum_stake_sybils_never_beat_one_honest_agreer():
    """Issue 13's attack: 0.01-ETH sybils against a 1-ETH victim with one 1-ETH honest agreer."""
    rules = attack_costs.Rules()
    total_eth = 2 + 3 * attack_costs.MIN_STAKE
    sybils = attack_costs.seats(3, attack_costs.MIN_STAKE, total_eth, rules)
    honest = attack_costs.seats(1, 1.0, total_eth, rules)
    assert honest.p == 1.0 and honest.weight == 1.0
    assert attack_costs.win_probability(sybils, honest, total_eth - 1.0, rules) == 0.0


def test_attack_needs_about_half_the_stake_at_every_size():
    rules = attack_costs.Rules()
    for peers in (10, 100, 1000):
        assert attack_costs.attack(peers, 0.10, None, rules) < 1e-9
        assert attack_costs.attack(peers, 0.50, 1, rules) > 0.4

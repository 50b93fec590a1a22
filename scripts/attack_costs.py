#!/usr/bin/env python
"""What the v2 dispute game costs an attacker: exact probabilities under the contract's seat rule.

Protocol v2 (docs/PROTOCOL.md, "Seats") seats attester a on subject s's committee of a sealed
round when ``keccak(beacon, s, a) < 2^256 * k * w_a / T`` (always when ``k * w_a >= T``), with vote
weight ``max(w_a, T / k)``. The beacon is fixed after the round's publications close, from
``block.prevrandao``, so each seat is an independent draw with probability ``min(1, k * w_a / T)``
for anyone who registered before the round. A flag wins when its weight exceeds ``quorum`` of the
weight that voted, reaches ``floor`` of the judging weight other than the subject's, and reaches the
subject's own weight (1 ETH: every honest peer stakes 1 ETH here).

This script computes, exactly (binomial sums, no sampling), for a swarm of N honest peers of equal
stake and an attacker holding a share f of all stake:

- attack: the chance that the attacker wins one committee against an honest subject that the
  honest members judge correctly. The attacker sees every committee before committing, so it flags
  only the committees it wins and never loses a bond: the figure that matters is how often such a
  committee exists, and the expected wrongful slashes per round (N subjects are drawn each round);
- shield: the chance that a cheater escapes when its sock puppets (stake share g) agree and every
  honest seat flags it.

Both for the attacker's stake in one identity and split into minimum-stake identities (sybils):
the seat rule makes the expected vote weight equal to the stake either way.

Usage: .venv/bin/python scripts/attack_costs.py [--peers 10 100 1000] [--committee-size 64]
       [--quorum-bps 5000] [--floor-bps 3334] [--offline 0.0] [--json]
"""

from __future__ import annotations

import argparse
import json
import math
from dataclasses import asdict, dataclass

import numpy as np

MIN_STAKE = 0.01  # ETH; the honest stake is the unit (1 ETH)
SUBJECT_STAKE = 1.0  # ETH: the subject is an honest 1-ETH peer (attack) or a 1-ETH cheater (shield)
SHARES = (0.01, 0.05, 0.10, 0.20, 0.33, 0.50)


@dataclass(frozen=True)
class Rules:
    committee_size: int = 64
    quorum: float = 0.5
    floor: float = 0.3334
    offline: float = 0.0  # share of honest seats that do not reveal


@dataclass(frozen=True)
class Seats:
    """n identities of equal stake: each seated with probability p, voting with ``weight``."""

    n: int
    p: float
    weight: float

    def pmf(self) -> np.ndarray:
        return binomial_pmf(self.n, self.p)


def binomial_pmf(n: int, p: float) -> np.ndarray:
    """P(X = x) for x = 0..n, X ~ Binomial(n, p), computed in log space (n may be 10^5)."""
    x = np.arange(n + 1, dtype=float)
    if p <= 0.0:
        return (x == 0).astype(float)
    if p >= 1.0:
        return (x == n).astype(float)
    log_comb = (
        math.lgamma(n + 1) - np.vectorize(math.lgamma)(x + 1) - np.vectorize(math.lgamma)(n - x + 1)
    )
    return np.exp(log_comb + x * math.log(p) + (n - x) * math.log1p(-p))


def seats(identities: int, stake_each: float, total: float, rules: Rules) -> Seats:
    """The seat rule of the contract for ``identities`` peers staking ``stake_each``."""
    k = rules.committee_size
    if k * stake_each >= total:
        return Seats(identities, 1.0, stake_each)
    return Seats(identities, k * stake_each / total, total / k)


def _flags_win(flag: np.ndarray, agree: np.ndarray, others: float, rules: Rules) -> np.ndarray:
    floor = (flag >= rules.floor * others) & (flag >= SUBJECT_STAKE)
    return (flag * (1 - rules.quorum) > rules.quorum * agree) & floor


def win_probability(flaggers: Seats, agreers: Seats, others: float, rules: Rules) -> float:
    """P(the flaggers' seated weight beats the agreers' seated weight and the floor)."""
    flag = np.arange(flaggers.n + 1) * flaggers.weight
    agree = np.arange(agreers.n + 1) * agreers.weight
    wins = _flags_win(flag[:, None], agree[None, :], others, rules)
    return float(flaggers.pmf() @ wins.astype(float) @ agreers.pmf())


def _online(group: Seats, rules: Rules) -> Seats:
    return Seats(group.n, group.p * (1 - rules.offline), group.weight)


def attack(peers: int, share: float, identities: int | None, rules: Rules) -> float:
    """P(an attacker with ``share`` of all stake wins one honest subject's committee)."""
    attacker_stake = share / (1 - share) * peers
    total = peers + attacker_stake
    count = identities or max(1, round(attacker_stake / MIN_STAKE))
    attacker = seats(count, attacker_stake / count, total, rules)
    honest = _online(seats(peers - 1, 1.0, total, rules), rules)
    return win_probability(attacker, honest, total - 1.0, rules)


def shield(peers: int, share: float, identities: int | None, rules: Rules) -> float:
    """P(a cheater whose sock puppets hold ``share`` of all stake escapes honest flags)."""
    puppet_stake = share / (1 - share) * peers
    total = peers + puppet_stake
    count = identities or max(1, round(puppet_stake / MIN_STAKE))
    puppets = seats(count, puppet_stake / count, total, rules)
    honest = _online(seats(peers - 1, 1.0, total, rules), rules)
    return 1.0 - win_probability(honest, puppets, total - 1.0, rules)


@dataclass(frozen=True)
class Row:
    peers: int
    share: float
    attacker_eth: float
    attack_one_identity: float
    attack_sybils: float
    wrongful_slashes_per_round: float
    shield_one_identity: float
    shield_sybils: float


def table(peer_counts: list[int], rules: Rules) -> list[Row]:
    rows = []
    for peers in peer_counts:
        for share in SHARES:
            one = attack(peers, share, 1, rules)
            split = attack(peers, share, None, rules)
            rows.append(
                Row(
                    peers=peers,
                    share=share,
                    attacker_eth=share / (1 - share) * peers,
                    attack_one_identity=one,
                    attack_sybils=split,
                    wrongful_slashes_per_round=peers * max(one, split),
                    shield_one_identity=shield(peers, share, 1, rules),
                    shield_sybils=shield(peers, share, None, rules),
                )
            )
    return rows


def _fmt(p: float) -> str:
    return "<1e-12" if p < 1e-12 else f"{p:.1e}" if p < 0.01 else f"{p:.3f}"


def print_table(rows: list[Row], rules: Rules) -> None:
    print(
        f"committee size k={rules.committee_size}, flags win above {rules.quorum:.0%} of the "
        f"weight that voted and at {rules.floor:.2%} of the others' weight; honest offline "
        f"{rules.offline:.0%}; honest peers stake 1 ETH each, sybils {MIN_STAKE} ETH each"
    )
    print(
        f"{'peers':>5} {'share':>6} {'attacker ETH':>12} | {'P(win) 1 id':>11} {'P(win) sybils':>13}"
        f" {'wrongful/round':>14} | {'P(escape) 1 id':>14} {'P(escape) sybils':>16}"
    )
    for r in rows:
        print(
            f"{r.peers:>5} {r.share:>6.0%} {r.attacker_eth:>12.1f} | "
            f"{_fmt(r.attack_one_identity):>11} {_fmt(r.attack_sybils):>13} "
            f"{_fmt(r.wrongful_slashes_per_round):>14} | "
            f"{_fmt(r.shield_one_identity):>14} {_fmt(r.shield_sybils):>16}"
        )


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    parser.add_argument("--peers", type=int, nargs="+", default=[10, 100, 1000])
    parser.add_argument("--committee-size", type=int, default=64)
    parser.add_argument("--quorum-bps", type=int, default=5000)
    parser.add_argument("--floor-bps", type=int, default=3334)
    parser.add_argument("--offline", type=float, default=0.0, help="share of honest seats absent")
    parser.add_argument("--json", action="store_true", help="print the rows as JSON")
    args = parser.parse_args()
    rules = Rules(
        args.committee_size, args.quorum_bps / 10_000, args.floor_bps / 10_000, args.offline
    )
    rows = table(args.peers, rules)
    if args.json:
        print(json.dumps({"rules": asdict(rules), "rows": [asdict(r) for r in rows]}, indent=1))
    else:
        print_table(rows, rules)


if __name__ == "__main__":
    main()

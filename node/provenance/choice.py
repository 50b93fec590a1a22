"""Which seats recompute a batch, which of its groups, and the odds that a forger goes unseen
(docs/PROTOCOL.md, "Seeded sampler"). Torch-free.

A committee has k seats per batch on average (``rulesAt(r).committeeSize``, 64 by default), and a
node sits on about k committees a round, so if every seat recomputed, a node's cost would grow
with k. Instead about m = ``RECOMPUTING_SEATS`` seats per batch recompute, each c =
``CHECKED_GROUPS`` groups. Seat ``attester`` on ``subject``'s committee of the round sealed with
``beacon`` recomputes iff m >= k or::

    uint256(keccak256("swarm.provenance/seat/1" ‖ beacon ‖ subject ‖ attester)) < (2**256 - 1) // k * m

and then the c groups whose ranks are lowest::

    rank_i = keccak256("swarm.provenance/groups/1" ‖ beacon (20 bytes) ‖ subject ‖ attester ‖
                       uint32_be(i))                 for each group index i of the batch

The beacon is the hash of the block that sealed the round, after every batch was committed, so a
publisher cannot know which of its groups will be recomputed; each seat draws its own c.
"""

from __future__ import annotations

from math import comb

from eth_utils import keccak, to_canonical_address

CHOICE_DOMAIN = b"swarm.provenance/groups/1"
SEAT_DOMAIN = b"swarm.provenance/seat/1"
RECOMPUTING_SEATS = 3
"""m: seats per batch that recompute, on average."""
CHECKED_GROUPS = 2
"""c: groups each recomputing seat recomputes."""


def recomputes(beacon: bytes, subject: str, attester: str, committee_size: int) -> bool:
    """Whether seat ``attester`` recomputes ``subject``'s batch (about m seats per batch)."""
    if committee_size < 1:
        raise ValueError(f"committee size must be at least 1, got {committee_size}")
    if RECOMPUTING_SEATS >= committee_size:
        return True
    word = keccak(SEAT_DOMAIN + _beacon(beacon) + _pair(subject, attester))
    bound = (2**256 - 1) // committee_size * RECOMPUTING_SEATS
    return int.from_bytes(word, "big") < bound


def checked_groups(beacon: bytes, subject: str, attester: str, groups: int, count: int) -> list[int]:
    """The indexes (ascending) of the ``count`` groups of ``groups`` that the seat recomputes."""
    if groups < 0 or count < 0:
        raise ValueError("groups and count must be natural numbers")
    base = CHOICE_DOMAIN + _beacon(beacon) + _pair(subject, attester)
    ranks = sorted(range(groups), key=lambda i: keccak(base + i.to_bytes(4, "big")))
    return sorted(ranks[:count])


def escape_odds(groups: int, forged: int, checked: int, seats: int) -> float:
    """The chance that none of ``seats`` seats, each recomputing ``checked`` of ``groups``
    groups drawn independently, draws one of the ``forged`` groups in one round."""
    if not 0 <= forged <= groups or not 0 <= checked <= groups or seats < 0:
        raise ValueError("need 0 <= forged, checked <= groups and seats >= 0")
    per_seat = comb(groups - forged, checked) / comb(groups, checked)
    return per_seat**seats


def _beacon(beacon: bytes) -> bytes:
    if len(beacon) != 20:
        raise ValueError(f"a beacon is 20 bytes, got {len(beacon)}")
    return bytes(beacon)


def _pair(subject: str, attester: str) -> bytes:
    return to_canonical_address(subject) + to_canonical_address(attester)

"""Committees and ballots of protocol v2, computed exactly as the contract does (pure, no chain).

A sealed round r has a beacon and a total judging weight T (``seal(r)``). The seat rule
(``committeeSeat``): with k = ``rulesAt(r).committeeSize`` and w = the attester's ``weightAt(r)``,
an attester other than the subject with w > 0 is seated

- always when ``k * w >= T``, with vote weight w;
- else iff ``seat_draw(beacon, subject, attester) < (2**256 - 1) // T * (k * w)``, with vote weight
  ``T // k``. The draw is ``(point(subject) - point(attester)) mod 2**256``, where a subject's point
  is ``keccak256(abi.encode(beacon, subject))`` and an attester's ``keccak256(abi.encode(attester,
  beacon))`` (the two word orders keep a's draw on b unrelated to b's on a).

Each seat's expected vote weight is its stake, so splitting stake over identities gains nothing.
On the ring of 2**256 an attester's seats are the subjects whose points lie on the arc of length
``threshold`` after its own point, so every seat of a round is listed with one hash per peer and a
sort (``RoundSeats``), not one hash per (subject, attester) pair.

A ballot is committed as ``keccak256(abi.encode(attester, round, items_hash(items), salt))`` and
revealed with the same items (sorted by subject, strictly ascending) and salt; after the reveal
the contract keeps ``reveal_receipt(items)`` in its place.
"""

from __future__ import annotations

import secrets
from bisect import bisect_left
from collections.abc import Iterable, Sequence
from itertools import pairwise

from Crypto.Hash import keccak as _keccak
from eth_abi import encode
from eth_utils import keccak, to_checksum_address

from node.chain.models import Rules, VerdictItem, VerdictState

#: ABI type of ``VerdictItem[]``.
ITEMS_TYPE = "(address,uint32,uint32,int64)[]"
_UINT256_MAX = 2**256 - 1


def address_word(address: str) -> bytes:
    """An address as its ABI word (12 zero bytes, then the 20 address bytes)."""
    raw = bytes.fromhex(address[2:] if address[:2] in ("0x", "0X") else address)
    if len(raw) != 20:
        raise ValueError(f"not an address: {address!r}")
    return bytes(12) + raw


def _beacon_word(beacon: bytes) -> bytes:
    if len(beacon) != 20:
        raise ValueError(f"a beacon is 20 bytes, got {len(beacon)}")
    return beacon + bytes(12)


#: Version of the seat rule the contract reports (``seatRule()``).
SEAT_RULE = 2
_RING = 2**256


def _hash_point(data: bytes) -> int:
    """``uint256(keccak256(data))``, through pycryptodome directly (eth_utils' ``keccak`` checks
    its argument's type first: half again the time, for the 2N hashes of an N-peer round)."""
    return int.from_bytes(_keccak.new(data=data, digest_bits=256).digest(), "big")


def subject_point(beacon: bytes, subject: str) -> int:
    """``uint256(keccak256(abi.encode(bytes20 beacon, subject)))``: the subject on the ring."""
    return _hash_point(_beacon_word(beacon) + address_word(subject))


def attester_point(beacon: bytes, attester: str) -> int:
    """``uint256(keccak256(abi.encode(attester, bytes20 beacon)))``: where its arc starts."""
    return _hash_point(address_word(attester) + _beacon_word(beacon))


def seat_draw(beacon: bytes, subject: str, attester: str) -> int:
    """The seat lottery: the subject's point minus the attester's, modulo 2**256."""
    return (subject_point(beacon, subject) - attester_point(beacon, attester)) % _RING


def _threshold(total_weight: int, committee_size: int, weight: int) -> int | None:
    """The seat lottery's bound for ``weight``; None when the seat is sure (``k * w >= T``)."""
    if committee_size * weight >= total_weight:
        return None
    return (_UINT256_MAX // total_weight) * (committee_size * weight)


def vote_weight(
    beacon: bytes,
    total_weight: int,
    committee_size: int,
    subject: str,
    attester: str,
    weight: int,
) -> int:
    """The attester's vote weight on ``subject``'s committee; 0 when it holds no seat.

    ``weight`` is the attester's ``weightAt(round)``, ``total_weight`` and ``beacon`` the round's
    seal, ``committee_size`` the round's rules (k). Bit-exact with the contract's seat rule.
    """
    if committee_size < 1:
        raise ValueError(f"committee size must be at least 1, got {committee_size}")
    if address_word(subject) == address_word(attester) or weight <= 0 or total_weight <= 0:
        return 0
    threshold = _threshold(total_weight, committee_size, weight)
    if threshold is None:
        return weight
    seated = seat_draw(beacon, subject, attester) < threshold
    return total_weight // committee_size if seated else 0


class RoundSeats:
    """Every seat of one sealed round over its ``subjects``, by the points on the ring: one hash
    per subject here and one per attester asked, then a binary search (O((N + S) log S) for a
    round of S batches and N attesters, where testing each pair would take N * S hashes)."""

    def __init__(
        self, beacon: bytes, total_weight: int, committee_size: int, subjects: Iterable[str]
    ) -> None:
        if committee_size < 1:
            raise ValueError(f"committee size must be at least 1, got {committee_size}")
        self.beacon, self.total_weight, self.committee_size = beacon, total_weight, committee_size
        # subject_point's hash, with each subject's word made once (``of`` compares them too)
        self._words = {subject: address_word(subject) for subject in subjects}
        beacon_word = _beacon_word(beacon)
        points = {(_hash_point(beacon_word + word), s) for s, word in self._words.items()}
        self._ring = sorted(points, key=lambda point: point[0])
        self._points = [point for point, _ in self._ring]
        self._starts: dict[str, int] = {}  # attester -> its point, hashed once per ring

    def of(self, attester: str, weight: int, order: Sequence[str] | None = None) -> list[str]:
        """The subjects ``attester`` (weight ``weight``) is seated on: the arc of the ring after
        its point, itself left out; in ``order`` when given, else by point."""
        if weight <= 0 or self.total_weight <= 0:
            return []
        own = address_word(attester)
        threshold = _threshold(self.total_weight, self.committee_size, weight)
        if threshold is None:
            arc = self._ring
        else:
            start = self._starts.get(attester)
            if start is None:
                start = self._starts[attester] = attester_point(self.beacon, attester)
            arc = self._arc(start, threshold)
        seated = {subject for _, subject in arc if self._words[subject] != own}
        if order is None:
            return [subject for _, subject in arc if subject in seated]
        return [subject for subject in order if subject in seated]

    def _arc(self, start: int, length: int) -> list[tuple[int, str]]:
        """The subjects whose points p satisfy (p - start) mod 2**256 < length."""
        first = bisect_left(self._points, start)
        end = start + length
        if end <= _RING:
            return self._ring[first : bisect_left(self._points, end)]
        return self._ring[first:] + self._ring[: bisect_left(self._points, end - _RING)]


def settle_outcome(
    flag_weight: int, agree_weight: int, rules: Rules, total_weight: int, subject_weight: int
) -> VerdictState:
    """The contract's settle rule (docs/PROTOCOL.md, "Outcome"). Upheld: the flags outweigh the
    quorum share of the weight that voted, reach the floor share of the judging weight other than
    the subject's, and reach the subject's own weight. Rejected: the agreements outweigh the
    flags. Inconclusive otherwise."""
    quorum = flag_weight * 10_000 > rules.quorum_bps * (flag_weight + agree_weight)
    others = max(0, total_weight - subject_weight)
    floors = flag_weight * 10_000 >= rules.floor_bps * others and flag_weight >= subject_weight
    if quorum and floors:
        return VerdictState.UPHELD
    return VerdictState.REJECTED if agree_weight > flag_weight else VerdictState.INCONCLUSIVE


def sort_items(items: Iterable[VerdictItem]) -> list[VerdictItem]:
    """Items in the order reveal requires: by subject (as a number), strictly ascending.

    Raises ValueError when two items name the same subject (the contract would revert).
    """
    ordered = sorted(items, key=VerdictItem.sort_key)
    for before, after in pairwise(ordered):
        if before.subject == after.subject:
            raise ValueError(f"two verdicts on {after.subject}: one item per subject")
    return ordered


def encode_items(items: Sequence[VerdictItem]) -> bytes:
    """``abi.encode(items)`` of a ``VerdictItem[]``, in the order given."""
    return encode([ITEMS_TYPE], [[item.to_abi() for item in items]])


def items_hash(items: Sequence[VerdictItem]) -> bytes:
    """``keccak256(abi.encode(items))``, the items in the order given (sort them first)."""
    return keccak(encode_items(items))


def ballot_commitment(
    attester: str, round: int, items: Sequence[VerdictItem], salt: bytes
) -> bytes:
    """``keccak256(abi.encode(attester, round, keccak256(abi.encode(items)), salt))``: what
    ``commitVerdicts`` takes; reveal the same items in the same order with the same salt."""
    if len(salt) != 32:
        raise ValueError(f"a salt is 32 bytes, got {len(salt)}")
    word = encode(
        ["address", "uint64", "bytes32", "bytes32"],
        [to_checksum_address(attester), round, items_hash(items), salt],
    )
    return keccak(word)


def reveal_receipt(items: Sequence[VerdictItem]) -> bytes:
    """``keccak256(abi.encode(keccak256(abi.encode(items)), "revealed"))``: the ballot slot after a
    reveal (``reportAgreement`` proves revealed items against it)."""
    return keccak(encode(["bytes32", "string"], [items_hash(items), "revealed"]))


def new_salt() -> bytes:
    """A fresh random 32-byte ballot salt (keep it until the reveal: without it the ballot is
    lost)."""
    return secrets.token_bytes(32)

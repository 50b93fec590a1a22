"""When a verdict may be attested: the contract's rules as one pure function.

The contract takes, per attester, items in strictly ascending (round, subject) order starting at
its ``nextAttestRound``, each within ``window`` rounds of its round, and then moves
``nextAttestRound`` past the last one. So a verdict waits until its round can receive no more
commitments (``final_round``), is sent with every other due verdict in one transaction, and is
given up once its round is behind ``nextAttestRound`` or out of the window.
"""

from __future__ import annotations

from collections.abc import Sequence
from dataclasses import dataclass

from node.chain.models import Attestation, sort_attestations


@dataclass(frozen=True)
class AttestationPlan:
    due: list[Attestation]  # send now, in the contract's order
    later: list[Attestation]  # their round may still get commitments
    expired: list[Attestation]  # can no longer be attested


def plan_attestations(
    pending: Sequence[Attestation],
    *,
    next_round: int,
    current: int,
    window: int,
    final_round: int,
) -> AttestationPlan:
    """Sorts ``pending`` into due, later and expired (see the module docstring)."""
    due, later, expired = [], [], []
    for item in pending:
        if item.round < next_round or current > item.round + window:
            expired.append(item)
        elif item.round <= final_round:
            due.append(item)
        else:
            later.append(item)
    return AttestationPlan(due=sort_attestations(due), later=later, expired=expired)

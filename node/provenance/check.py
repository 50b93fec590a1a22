"""A provenance check's verdict on a batch: the recomputed margins of its groups, judged.

Two tolerances on a completion's worst margin (docs/PROTOCOL.md, "Seeded sampler"):

- below ``-SOFT_TOLERANCE`` the completion is **excluded**: no reward, never trained on. The
  fp32 drift between machines is at most ~1e-5, so an honest completion is never excluded;
- below ``-HARD_TOLERANCE`` the batch is **flagged**, with the evidence (the group and
  completion of the worst margin, and its first position below ``-HARD_TOLERANCE``: after a
  wrong token the later ones fail too, so the first is where the forgery starts) that lets every other seat recompute that one group. A hundred
  times the soft tolerance: a flag costs the subject its stake, so it needs a miss that no float
  rounding explains.
"""

from __future__ import annotations

from collections.abc import Mapping, Sequence
from dataclasses import dataclass

from node.provenance.recompute import CompletionMargins

SOFT_TOLERANCE = 1e-4
HARD_TOLERANCE = 1e-2


@dataclass(frozen=True)
class Evidence:
    """Where a flagged batch fails: the completion with the worst margin, the first position of
    it below the hard tolerance and that position's margin."""

    group: int
    completion: int
    position: int
    margin: float
    worst: float


@dataclass(frozen=True)
class ProvenanceResult:
    """What one seat's recompute found."""

    checked: tuple[int, ...]
    excluded: frozenset[tuple[int, int]]
    """(group, completion) pairs below the soft tolerance."""
    evidence: Evidence | None
    """The worst completion below the hard tolerance; None when the batch is not flagged."""
    worst_margin: float
    """Over every recomputed token (logged, so that tolerances can be calibrated)."""

    @property
    def flagged(self) -> bool:
        return self.evidence is not None


def judge(margins: Mapping[int, Sequence[CompletionMargins]]) -> ProvenanceResult:
    """Applies the two tolerances to recomputed margins (by group index, then completion)."""
    excluded, worst, evidence = set(), float("inf"), None
    for group, completions in sorted(margins.items()):
        for index, completion in enumerate(completions):
            worst = min(worst, completion.worst)
            if completion.worst < -SOFT_TOLERANCE:
                excluded.add((group, index))
            if completion.worst < -HARD_TOLERANCE and (
                evidence is None or completion.worst < evidence.worst
            ):
                first = completion.first_below(HARD_TOLERANCE)
                position = completion.position if first is None else first
                margin = completion.margins[position]
                evidence = Evidence(group, index, position, margin, completion.worst)
    return ProvenanceResult(tuple(sorted(margins)), frozenset(excluded), evidence, worst)

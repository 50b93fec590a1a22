"""``swarm audit ROUND``: anyone re-verifies every batch of a round from the chain and the store.

- ``audit``    reads the round from the chain (RolloutsPublished, VerdictRevealed/Ignored, the
               ``verdict`` tally), fetches and re-verifies every batch (node.sampling: re-hash,
               re-score every completion) and compares its own verdict with the committee's
               outcome, and optionally with a leaderboard (the indexer's /api/rounds/{round})
- ``receipt``  the result as canonical JSON with its SHA-256, and as lines for people
- ``command``  the click command (exit 0: all agree, 1: a DISAGREEMENT, 2: an error)

Protocol layer: never imports torch, transformers or ``node.policy``.
"""

from node.audit.audit import AuditError, AuditSettings, audit_round
from node.audit.receipt import BatchAudit, RoundAudit

__all__ = ["AuditError", "AuditSettings", "BatchAudit", "RoundAudit", "audit_round"]

"""One round of peer intake: fetch every peer's committed batch, verify it, count and log reasons.

The caller (the round loop) reads the round's ``RolloutsPublished`` events, passes them here with a
content store and the round's context, and gets an :class:`IntakeReport`: per-peer verdicts (for
committee ballots), rejection counts by reason code, and the verified groups to sample from.
"""

from __future__ import annotations

import logging
from collections.abc import Sequence

from node.chain.events import RolloutsPublished
from node.sampling.fetch import fetch_batches
from node.sampling.verdicts import IntakeReport, PeerVerdict
from node.sampling.verify import RoundContext, TaskDeriver, derive_for_preset, verify_batch
from node.storage import ContentStore

log = logging.getLogger(__name__)


def intake_round(
    commitments: Sequence[RolloutsPublished],
    store: ContentStore,
    context: RoundContext,
    *,
    own_address: str | None = None,
    per_fetch_timeout: float = 10.0,
    total_budget: float = 30.0,
    max_workers: int = 8,
    derive: TaskDeriver = derive_for_preset,
) -> IntakeReport:
    """Fetches and verifies the round's peer batches (this node's own commitment is skipped)."""
    peers = [c for c in commitments if c.round == context.round and c.peer != own_address]
    fetched = fetch_batches(
        peers,
        store,
        per_fetch_timeout=per_fetch_timeout,
        total_budget=total_budget,
        max_workers=max_workers,
    )
    report = IntakeReport(round=context.round)
    for result in fetched:
        if result.data is None:
            assert result.reason is not None
            verdict = PeerVerdict(
                result.commitment.peer,
                result.commitment.round,
                result.commitment.digest,
                result.reason,
                result.detail,
            )
        else:
            verdict = verify_batch(result.data, result.commitment, context, derive=derive)
        _log_verdict(verdict)
        report.verdicts.append(verdict)
    return report


def _log_verdict(verdict: PeerVerdict) -> None:
    if verdict.reason is None:
        log.info(
            "round %d: %s verified (%d completions, %d groups kept)",
            verdict.round,
            verdict.peer,
            verdict.checked,
            len(verdict.groups),
        )
    else:
        log.warning(
            "round %d: %s rejected: %s (%s)",
            verdict.round,
            verdict.peer,
            verdict.reason.value,
            verdict.detail,
        )

"""Peer intake and filtering: fetch peers' committed batches, verify them, pick external groups.

- ``verdicts``   what one peer's batch earned: reason, counts for a ballot item, verified groups
- ``verify``     the ordered checks of one batch's bytes against its on-chain commitment
- ``shape``      the round's one batch shape: n groups for tasks 0..n-1 in order, G completions each
- ``fetch``      concurrent fetching from a content store, per-fetch timeout and total budget
- ``intake``     one round's intake: fetch, verify, count reasons, build ballot items
- ``selection``  zero-advantage filter and the strategies that choose J external groups

Protocol layer: never imports torch, transformers or ``node.policy``.
"""

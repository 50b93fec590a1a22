"""Retrying transient content-store failures with backoff (chain calls retry in ``node.chain``)."""

from __future__ import annotations

import logging
import time
from collections.abc import Callable
from typing import TypeVar

from node.chain.rpc import RetryPolicy, short
from node.storage import StoreError

log = logging.getLogger(__name__)
T = TypeVar("T")

STORE_RETRY = RetryPolicy(attempts=5, initial_delay=0.5, max_delay=8.0)


def retry_store(
    fn: Callable[[], T],
    *,
    what: str,
    policy: RetryPolicy = STORE_RETRY,
    sleep: Callable[[float], None] = time.sleep,
) -> T:
    """Runs ``fn``; a retryable :class:`StoreError` is retried under ``policy``, then raised."""
    for attempt in range(1, policy.attempts + 1):
        try:
            return fn()
        except StoreError as exc:
            if not exc.retryable or attempt == policy.attempts:
                raise
            delay = policy.delay(attempt)
            log.warning(policy.retry_line(what, short(exc), attempt, delay))
            sleep(delay)
    raise AssertionError("unreachable")  # pragma: no cover

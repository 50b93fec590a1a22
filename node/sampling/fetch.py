"""Fetching peers' batches from a content store, concurrently, within time limits.

Each fetch gets ``per_fetch_timeout`` seconds from the moment a worker starts it and the whole round
gets ``total_budget``; a fetch past either limit is abandoned (its thread finishes on its own, its
result is ignored) and reported as ``fetch_timeout``. Store errors become ``fetch_failed`` or
``digest_mismatch``; nothing a store or a peer does raises out of :func:`fetch_batches`.

A fetch reads up to ``MAX_FETCH_BYTES`` (4 MiB), above the protocol's 1 MiB batch limit: bytes
over the limit that hash to the committed digest prove the publisher broke it, and verification
flags them (``too_large``). A blob over the ceiling is ``fetch_failed``: nothing is proved.
"""

from __future__ import annotations

import logging
import time
from collections.abc import Sequence
from concurrent.futures import FIRST_COMPLETED, Future, ThreadPoolExecutor, wait
from dataclasses import dataclass

from node.chain.events import RolloutsPublished
from node.rollouts.limits import MAX_FETCH_BYTES
from node.rollouts.reasons import RejectReason
from node.storage import ContentStore, DigestMismatch, StoreError

log = logging.getLogger(__name__)

_POLL_SECONDS = 0.05


@dataclass(frozen=True)
class FetchResult:
    """The bytes of one commitment, or why there are none."""

    commitment: RolloutsPublished
    data: bytes | None = None
    reason: RejectReason | None = None
    detail: str = ""
    seconds: float = 0.0


class _TimedFetch:
    """One store.get run on a worker thread, remembering when the worker picked it up."""

    def __init__(self, store: ContentStore, commitment: RolloutsPublished, max_size: int) -> None:
        self.store = store
        self.commitment = commitment
        self.max_size = max_size
        self.started: float | None = None

    def __call__(self) -> bytes:
        self.started = time.monotonic()
        return self.store.get(self.commitment.digest, max_size=self.max_size)


def fetch_batches(
    commitments: Sequence[RolloutsPublished],
    store: ContentStore,
    *,
    per_fetch_timeout: float = 10.0,
    total_budget: float = 30.0,
    max_workers: int = 8,
    max_size: int = MAX_FETCH_BYTES,
) -> list[FetchResult]:
    """Fetches every commitment's bytes (at most ``max_size`` each); results come back in the
    commitments' order."""
    if not commitments:
        return []
    deadline = time.monotonic() + total_budget
    pool = ThreadPoolExecutor(max_workers=max_workers, thread_name_prefix="swarm-fetch")
    jobs = [_TimedFetch(store, c, max_size) for c in commitments]
    futures: dict[Future[bytes], _TimedFetch] = {pool.submit(job): job for job in jobs}
    results: dict[int, FetchResult] = {}
    try:
        pending = set(futures)
        while pending:
            done, pending = wait(pending, timeout=_POLL_SECONDS, return_when=FIRST_COMPLETED)
            for future in done:
                results[id(futures[future])] = _outcome(futures[future], future)
            pending = _expire(pending, futures, results, deadline, per_fetch_timeout)
    finally:
        pool.shutdown(wait=False, cancel_futures=True)
    return [results[id(job)] for job in jobs]


def _expire(
    pending: set[Future[bytes]],
    futures: dict[Future[bytes], _TimedFetch],
    results: dict[int, FetchResult],
    deadline: float,
    per_fetch_timeout: float,
) -> set[Future[bytes]]:
    now = time.monotonic()
    still: set[Future[bytes]] = set()
    for future in pending:
        job = futures[future]
        over_budget = now >= deadline
        too_slow = job.started is not None and now - job.started >= per_fetch_timeout
        if over_budget or too_slow:
            future.cancel()
            limit = "round budget" if over_budget else f"{per_fetch_timeout:g} s per fetch"
            results[id(job)] = FetchResult(
                job.commitment,
                reason=RejectReason.FETCH_TIMEOUT,
                detail=f"no answer within {limit}",
            )
        else:
            still.add(future)
    return still


def _outcome(job: _TimedFetch, future: Future[bytes]) -> FetchResult:
    seconds = time.monotonic() - (job.started or time.monotonic())
    try:
        return FetchResult(job.commitment, data=future.result(), seconds=seconds)
    except DigestMismatch as exc:
        return FetchResult(job.commitment, reason=RejectReason.DIGEST_MISMATCH, detail=str(exc))
    except StoreError as exc:
        return FetchResult(job.commitment, reason=RejectReason.FETCH_FAILED, detail=str(exc))
    except Exception as exc:  # a broken store must not take the node down
        log.warning("store raised %r fetching %s", exc, job.commitment.digest.hex())
        return FetchResult(job.commitment, reason=RejectReason.FETCH_FAILED, detail=repr(exc)[:200])

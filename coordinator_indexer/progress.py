"""Progress lines while the indexer catches up and follows the chain.

At most one catch-up line every ``interval`` seconds (block, head, percent, events, rate), one line
when it first reaches the head, one per reorg and per RPC outage. Quiet when following the head,
except for ranges with events when ``verbose``.
"""

from __future__ import annotations

import time
from collections.abc import Callable

from coordinator_indexer.ingest import StepResult


class ProgressPrinter:
    """Turns step results into human lines (``write`` receives each line)."""

    def __init__(
        self,
        write: Callable[[str], None],
        *,
        start_block: int,
        interval: float = 2.0,
        verbose: bool = False,
        clock: Callable[[], float] = time.monotonic,
    ) -> None:
        self.write = write
        self.start_block = start_block
        self.interval = interval
        self.verbose = verbose
        self.clock = clock
        self.started = clock()
        self.last_line = float("-inf")
        self.events = 0
        self.caught_up = False
        self.unavailable = False

    def step(self, result: StepResult) -> None:
        """Called after every ingestion step."""
        if self.unavailable:
            self.write("RPC reachable again")
            self.unavailable = False
        if result.kind == "reorg":
            depth = (result.rolled_back_from or result.cursor) - result.cursor
            self.write(
                f"reorg: rolled back {depth} block(s) from {result.rolled_back_from} to the "
                f"common ancestor {result.cursor}; re-applying"
            )
            return
        self.events += result.events
        now = self.clock()
        if result.caught_up and not self.caught_up:
            self.caught_up = True
            self.write(
                f"caught up at block {result.cursor:,} ({self.events:,} events in "
                f"{now - self.started:.1f} s); following the chain"
            )
            self.last_line = now
        elif not result.caught_up and now - self.last_line >= self.interval:
            self.write(self._catch_up_line(result, now))
            self.last_line = now
        elif self.caught_up and self.verbose and result.events:
            self.write(f"block {result.cursor:,}: {result.events} event(s)")

    def _catch_up_line(self, result: StepResult, now: float) -> str:
        total = max(1, result.head - self.start_block)
        done = max(0, result.cursor - self.start_block)
        elapsed = max(1e-9, now - self.started)
        return (
            f"catching up: block {result.cursor:,} of {result.head:,} "
            f"({100 * done / total:.1f}%), {self.events:,} events, "
            f"{self.events / elapsed:,.0f} events/s, {result.head - result.cursor:,} blocks behind"
        )

    def rpc_unavailable(self, error: Exception) -> None:
        """Called when the RPC is unreachable (the indexer keeps retrying)."""
        if not self.unavailable:
            self.write(f"waiting for the RPC: {error}")
            self.unavailable = True

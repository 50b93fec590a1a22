"""Ingestion: from the chain's logs to the database, one block range per transaction, reorg-safe.

One ``step``:

1. Is the cursor block still on the chain (same number, same hash)? If not, a reorg happened:
   walk the kept block hashes down to the newest one the chain still has (the common ancestor),
   roll back every row above it (``Store.rollback_to``) and let the next step re-apply. When no kept
   block survived, the reorg is deeper than the window: ``ReorgTooDeep``, and ingestion stops
   rather than serve rows of a chain that no longer exists.
2. Otherwise read the next range ``[cursor + 1, min(head, cursor + range)]``: the headers of its
   blocks inside the unconfirmed window (the last ``confirmations`` blocks below the head, whose
   hashes are kept), the range's first and last header, and its logs (``LogReader``: chunked,
   halving a chunk the RPC refuses; a log whose contents the decoder refuses is kept aside and
   never fails the range, since the indexer never stops on a chain's data). The range is applied
   only if it hangs together: the first block's parent is the cursor block, the window's headers
   link by parent hash, and every log's block hash is the header's. Anything else means the chain
   moved while we read; the range is dropped and the next step starts over (and finds the reorg
   in 1).
3. Apply the range in one transaction, with the new cursor (``Store.apply_range``).

Blocks more than ``confirmations`` below the head are *final*: their hashes are pruned, so a reorg
reaching them cannot be repaired. The range size adapts: it halves after a range with more than
``max_events`` logs and grows back after quiet ones.
"""

from __future__ import annotations

import logging
import threading
from collections.abc import Callable
from dataclasses import dataclass
from typing import Self

from web3 import Web3

from coordinator_indexer.chainview import ChainView
from coordinator_indexer.errors import DeploymentMismatch, IndexerError, ReorgTooDeep
from coordinator_indexer.fetch import FetchedRange, fetch_range, fill_seal_reads, next_range_size
from coordinator_indexer.logs import LogReader
from coordinator_indexer.readahead import MERGED, ReadAhead, ReaderGone, ReadFrom, config_for
from coordinator_indexer.store import BlockRef, IndexerState, Store
from node.chain.deployment import Deployment
from node.chain.errors import RetryableChainError
from node.chain.events import ParametersScheduled
from node.chain.rpc import DEFAULT_RETRY, RetryPolicy

log = logging.getLogger(__name__)


@dataclass(frozen=True)
class IngestSettings:
    """How the indexer reads the chain."""

    confirmations: int = 12
    """Blocks below the head after which a block is final; also how deep a reorg can be repaired."""
    max_range: int = 2_000
    """Most blocks read and applied in one step (one database transaction)."""
    max_events: int = 5_000
    """A range with more logs than this halves the next range (keeps transactions small)."""
    poll_interval: float = 1.0
    """Seconds between polls once caught up with the head."""
    read_ahead: int = 32
    """Blocks behind the head from which reader processes (one per core) read the next ranges
    while the database takes the current ones (``readahead``); 0: always read in line."""

    def __post_init__(self) -> None:
        if self.confirmations < 0:
            raise ValueError("confirmations must be 0 or more")
        if self.read_ahead < 0:
            raise ValueError("read_ahead must be 0 or more")
        if self.max_range < 1 or self.max_events < 1:
            raise ValueError("max_range and max_events must be at least 1")
        if self.poll_interval <= 0:
            raise ValueError("poll_interval must be positive")


@dataclass(frozen=True)
class StepResult:
    """What one step did."""

    kind: str  # "applied" | "idle" | "reorg" | "retry"
    cursor: int
    head: int
    events: int = 0
    blocks: int = 0
    rolled_back_from: int | None = None

    @property
    def caught_up(self) -> bool:
        return self.cursor >= self.head


class Indexer:
    """Keeps one database in step with one coordinator's events."""

    def __init__(
        self,
        w3: Web3,
        deployment: Deployment,
        store: Store,
        settings: IngestSettings | None = None,
        *,
        retry: RetryPolicy = DEFAULT_RETRY,
    ) -> None:
        self.deployment = deployment
        self.store = store
        self.settings = settings or IngestSettings()
        self.chain = ChainView(w3, deployment.coordinator, retry=retry)
        self.reader = LogReader(
            w3, deployment.coordinator, max_chunk=self.settings.max_range, retry=retry
        )
        self.range_size = self.settings.max_range
        self._ahead_config = config_for(
            w3,
            deployment.coordinator,
            retry,
            self.settings.max_range,
            self.settings.max_events,
        )
        self._ahead: ReadAhead | None = None
        self._ahead_failures = 0

    def close(self) -> None:
        """Ends the read-ahead processes, if they run (the store is the caller's to close)."""
        if self._ahead is not None:
            self._ahead.close()
            self._ahead = None

    def __enter__(self) -> Self:
        return self

    def __exit__(self, *exc: object) -> None:
        self.close()

    # ------------------------------------------------------------------------------- startup

    def prepare(self) -> IndexerState:
        """Checks that the chain holds the deployment and binds the database to it."""
        chain_id = self.chain.chain_id()
        if chain_id != self.deployment.chain_id:
            raise DeploymentMismatch(
                f"the RPC serves chain {chain_id}, but the deployment is on chain "
                f"{self.deployment.chain_id}: use the RPC of that chain"
            )
        created = self.chain.block(self.deployment.deployment_block)
        if created is None or created.hash != self.deployment.block_hash:
            raise DeploymentMismatch(
                f"block {self.deployment.deployment_block} on this chain is not the block that "
                f"created the coordinator {self.deployment.coordinator} (was the chain reset, or "
                "is this another chain?): use the deployment file of this chain"
            )
        anchor = self.chain.block(self.deployment.deployment_block - 1) or BlockRef(
            self.deployment.deployment_block - 1, created.parent_hash, "0x" + "00" * 32, 0
        )
        state = self.store.start(self.deployment, anchor, self.settings.confirmations)
        if self._reads_ahead(state, self.chain.head()):
            try:
                self._start_reader()  # its imports overlap the rest of the startup
            except ReaderGone as exc:
                self._reader_failed(exc)
        judging_rounds = self.chain.judging_rounds()
        if state.judging_rounds != judging_rounds:
            state = self.store.note_judging_rounds(judging_rounds)
        self._read_rules_shapes()
        return state

    def wait_for_readers(self) -> None:
        """Waits until the read-ahead processes ``prepare`` started, if any, have started (their
        imports take about half a second, once): what a measurement of the steady state waits
        for."""
        if self._ahead is not None:
            self._ahead.wait_started()

    def _start_reader(self) -> ReadAhead:
        """The read-ahead processes, started unless they were (``take`` reports a dead one)."""
        assert self._ahead_config is not None
        if self._ahead is None:
            self._ahead = ReadAhead(self._ahead_config)
            self._ahead.start()
        return self._ahead

    def _read_rules_shapes(self) -> None:
        """n and G of the rules rows indexed before migration 6 (which did not keep them), read
        again from their ParametersScheduled logs. A log no longer there (a reorg since) is left
        as it is: the next step rolls its row back."""
        missing = self.store.rules_without_shape()
        shapes: dict[tuple[int, int, str], tuple[int, int]] = {}
        for block in sorted({block for block, _, _ in missing}):
            for event in self.reader.read(block, block, events=[ParametersScheduled]):
                if isinstance(event, ParametersScheduled):
                    key = (event.block_number, event.log_index, event.tx_hash)
                    shapes[key] = (event.rules.tasks_per_round, event.rules.group_size)
        found = {key: shapes[key] for key in missing if key in shapes}
        self.store.fill_rules_shapes(found)
        if missing:
            log.info("read n and G of %d of %d rules indexed earlier", len(found), len(missing))

    # --------------------------------------------------------------------------------- steps

    def step(self) -> StepResult:
        """One poll: repair a reorg, or apply the next range, or note that nothing is new."""
        state = self.store.state()
        if state is None:
            raise IndexerError("the database is not bound to a deployment: call prepare() first")
        head = self.chain.head()
        cursor = state.cursor_block
        on_chain = self.chain.block(cursor)
        if on_chain is None or on_chain.hash != state.cursor_hash:
            return self._repair(state, head)
        if cursor >= head:
            if head != state.chain_head:
                self.store.note_head(head)
            return StepResult("idle", cursor, head)
        return self._apply_next(state, head)

    def note_head(self) -> None:
        """Records the chain's head and nothing else (``/health`` after ingestion stopped)."""
        self.store.note_head(self.chain.head())

    def _apply_next(self, state: IndexerState, head: int) -> StepResult:
        ahead = self._read_ahead(state, head) if self._reads_ahead(state, head) else None
        if ahead is not None:
            return ahead
        start = state.cursor_block + 1
        end = min(head, state.cursor_block + self.range_size)
        fetched = fetch_range(
            self.chain,
            self.reader,
            start,
            end,
            keep_from=head - self.settings.confirmations,
            registered=self.store.registered_peers,
        )
        result = self._apply(state, head, fetched)
        if result.kind == "applied":
            settings = self.settings
            self.range_size = next_range_size(
                self.range_size, result.events, settings.max_events, settings.max_range
            )
        return result

    def _apply(self, state: IndexerState, head: int, fetched: FetchedRange | None) -> StepResult:
        """Applies ``fetched`` after the cursor; "retry" when it is None or does not follow."""
        if fetched is None or fetched.first.parent_hash != state.cursor_hash:
            return StepResult("retry", state.cursor_block, head)
        keep_from = head - self.settings.confirmations
        self.store.apply_range(
            state.cursor_block, fetched.records(), fetched.window, fetched.last, head, keep_from
        )
        if fetched.refused:
            log.warning(
                "blocks %d-%d: kept %d undecodable logs",
                fetched.start,
                fetched.end,
                fetched.refused,
            )
        blocks = fetched.end - fetched.start + 1
        return StepResult("applied", fetched.end, head, events=fetched.logs, blocks=blocks)

    def _reads_ahead(self, state: IndexerState, head: int) -> bool:
        """Whether this step takes its range from the read-ahead processes: far enough behind the
        head, or already reading there."""
        if self._ahead_config is None or self.settings.read_ahead == 0:
            return False
        if self._ahead is not None and self._ahead.reading_from(state.cursor_block + 1):
            return True
        return head - state.cursor_block >= self.settings.read_ahead

    def _read_ahead(self, state: IndexerState, head: int) -> StepResult | None:
        """The step with the range read ahead (see ``readahead``); None to read in line (the
        process ended: it is restarted at the next step, up to three times in a row)."""
        assert self._ahead_config is not None
        try:
            read = ReadFrom(
                start=state.cursor_block + 1,
                parent_hash=state.cursor_hash,
                until=head,
                keep_from=head - self.settings.confirmations,
                registered=self.store.registered_peers,
            )
            fetched = self._start_reader().take(read, max_logs=MERGED * self.settings.max_events)
        except ReaderGone as exc:
            self._reader_failed(exc)
            return None
        self._ahead_failures = 0
        if fetched is not None and fetched.seals:
            fill_seal_reads(self.chain, fetched, self.store.registered_peers())
        return self._apply(state, head, fetched)

    def _reader_failed(self, exc: ReaderGone) -> None:
        """Ends the reader; the next step starts another, up to three failures in a row, after
        which the indexer reads in line for good."""
        self.close()
        self._ahead_failures += 1
        if self._ahead_failures >= 3:
            self._ahead_config = None
            log.warning("%s; reading in line from now on", exc)
        else:
            log.warning("%s; reading this range in line", exc)

    def _repair(self, state: IndexerState, head: int) -> StepResult:
        kept = self.store.kept_blocks()
        for ref in kept:
            if ref.number > head:
                continue
            block = self.chain.block(ref.number)
            if block is not None and block.hash == ref.hash:
                self.store.rollback_to(state.cursor_block, block, head)
                log.warning(
                    "reorg: rolled back from block %d to common ancestor %d",
                    state.cursor_block,
                    block.number,
                )
                return StepResult("reorg", block.number, head, rolled_back_from=state.cursor_block)
        oldest = kept[-1].number if kept else state.cursor_block
        raise ReorgTooDeep(
            f"the chain reorganised below block {oldest}, the oldest block whose hash this "
            f"indexer keeps ({state.confirmations} confirmations): rows indexed up to block "
            f"{state.cursor_block} may belong to a chain that no longer exists, so the indexer "
            "stops. Re-index into a new database, and raise --confirmations if this chain "
            "reorganises this deep",
            oldest_kept=oldest,
            cursor=state.cursor_block,
        )

    # ---------------------------------------------------------------------------------- loops

    def sync(
        self,
        *,
        stop: threading.Event | None = None,
        on_step: Callable[[StepResult], None] | None = None,
    ) -> StepResult:
        """Steps until the cursor reaches the head (as seen at the last step); returns that step."""
        while True:
            result = self.step()
            if on_step is not None:
                on_step(result)
            if (result.caught_up and result.kind != "reorg") or (stop and stop.is_set()):
                return result

    def run(
        self,
        stop: threading.Event,
        *,
        on_step: Callable[[StepResult], None] | None = None,
        on_unavailable: Callable[[Exception], None] | None = None,
    ) -> None:
        """Follows the chain until ``stop`` is set. An unreachable RPC is waited out (reported
        through ``on_unavailable``); every other error ends the loop by propagating."""
        backoff = self.settings.poll_interval
        while not stop.is_set():
            try:
                result = self.step()
            except RetryableChainError as exc:
                if on_unavailable is not None:
                    on_unavailable(exc)
                stop.wait(backoff)
                backoff = min(30.0, backoff * 2)
                continue
            backoff = self.settings.poll_interval
            if on_step is not None:
                on_step(result)
            if result.kind in ("idle", "retry") or result.caught_up:
                stop.wait(self.settings.poll_interval)

"""``swarm run``'s driver: one node following chain rounds in real time.

Each iteration takes the chain's *current* round by the next block's time (a node that fell
behind skips ahead, and says so, instead of publishing stale work), produces its batch, waits
for peers until every active peer has published or ``collect_fraction`` of the round has
passed, then completes the round. Transient chain and
store failures interrupt the round, are logged and retried with exponential backoff (the round's
steps are idempotent, so a retry never publishes twice). A reset chain stops the node with the
reason. The first Ctrl-C (or SIGTERM, or SIGHUP: a closed terminal) stops the node at the next step
boundary, after its state and adapter are saved (generation and training, the long parts, end
within a decode step or micro-batch: ``node.interrupt``); a second one aborts at once.
"""

from __future__ import annotations

import logging
import signal
import threading
import time
from collections.abc import Callable
from dataclasses import dataclass
from types import FrameType

from node.chain.client import CoordinatorClient
from node.chain.errors import RetryableChainError
from node.chain.rpc import RetryPolicy, pending_block_time
from node.interrupt import Interrupted, interruptible
from node.round.exchange import ChainExchange
from node.round.node import SwarmNode
from node.round.report import RoundReport
from node.storage import StoreError

log = logging.getLogger(__name__)

#: Backoff between failed round attempts: 2 s doubling to 60 s, for as long as it takes.
ROUND_RETRY = RetryPolicy(attempts=1_000_000, initial_delay=2.0, max_delay=60.0)


@dataclass(frozen=True)
class LoopSettings:
    collect_fraction: float = 0.6
    poll_interval: float = 2.0
    max_rounds: int | None = None
    retry: RetryPolicy = ROUND_RETRY


class StopSignal:
    """Set by Ctrl-C, SIGTERM or SIGHUP (``install``; SIGHUP is what closing the terminal
    sends) or by ``request``; sleeps end early when it is."""

    def __init__(self) -> None:
        self._event = threading.Event()

    @property
    def requested(self) -> bool:
        return self._event.is_set()

    def request(self) -> None:
        self._event.set()

    def sleep(self, seconds: float) -> bool:
        """Sleeps up to ``seconds``; True if a stop was requested meanwhile."""
        return self._event.wait(max(0.0, seconds))

    def install(self, notice: Callable[[str], None]) -> None:
        """First SIGINT/SIGTERM/SIGHUP: stop at the next step boundary. Second: KeyboardInterrupt
        (the second of any of them)."""

        def handle(signum: int, frame: FrameType | None) -> None:
            if self.requested:
                raise KeyboardInterrupt
            self.request()
            notice("stopping after the current step (Ctrl-C again to abort now)")

        for sig in (signal.SIGINT, signal.SIGTERM, signal.SIGHUP):
            signal.signal(sig, handle)


class ChainTime:
    """The chain's time now: the next block's timestamp as the RPC tells it (its pending block),
    or, where that lags, the latest block's timestamp plus the local time since that block was
    first seen (a chain that mines only on demand has no new block to read; the local clock's own
    offset to the chain never matters)."""

    def __init__(self, node: SwarmNode, clock: Callable[[], float] = time.monotonic) -> None:
        self.node = node
        self.clock = clock
        self._seen: tuple[int, int, float] | None = None  # block number, timestamp, seen at

    def now(self) -> float:
        client = chain_client(self.node)
        number, timestamp = client.latest_block()
        if self._seen is None or self._seen[0] != number:
            self._seen = (number, timestamp, self.clock())
        estimate = timestamp + (self.clock() - self._seen[2])
        pending = pending_block_time(client.w3, policy=client.retry)
        return estimate if pending is None else max(estimate, pending)


def chain_client(node: SwarmNode) -> CoordinatorClient:
    """The coordinator client of a node on a chain (real time needs one: rounds are chain time)."""
    if not isinstance(node.exchange, ChainExchange):
        raise TypeError("a node runs in real time only on a chain (a ChainExchange)")
    return node.exchange.client


def run_node(
    node: SwarmNode,
    settings: LoopSettings = LoopSettings(),
    *,
    stop: StopSignal | None = None,
    on_report: Callable[[RoundReport], None] = lambda report: None,
    on_notice: Callable[[str], None] = log.info,
) -> int:
    """Runs rounds until ``max_rounds`` are done or a stop is requested; returns rounds done.
    ``on_notice`` hears what the user should know between rounds (rounds skipped)."""
    stop = stop or StopSignal()
    node.start()
    chain_time = ChainTime(node)
    done = failures = 0
    try:
        while not stop.requested and (settings.max_rounds is None or done < settings.max_rounds):
            try:
                with interruptible(lambda: stop.requested):
                    report = _one_round(node, settings, stop, chain_time, on_notice)
            except Interrupted:
                break  # generation or training stopped early; its work is dropped
            except (RetryableChainError, StoreError) as exc:
                if isinstance(exc, StoreError) and not exc.retryable:
                    raise
                failures += 1
                delay = settings.retry.delay(failures)
                log.warning("round interrupted (%s); retrying in %.0fs", exc, delay)
                stop.sleep(delay)
                continue
            if report is not None:
                failures = 0
                done += 1
                on_report(report)
    finally:
        node.save()
    return done


def _one_round(
    node: SwarmNode,
    settings: LoopSettings,
    stop: StopSignal,
    chain_time: ChainTime,
    on_notice: Callable[[str], None],
) -> RoundReport | None:
    round_ = _wait_for_round(node, settings, stop, chain_time, on_notice)
    if round_ is None:
        return None
    node.check_chain()  # a chain restarted while we waited would otherwise look merely empty
    node.produce(round_)
    if stop.requested:
        return None
    _wait_for_peers(node, round_, settings, stop, chain_time)
    return node.complete(round_)


def _wait_for_round(
    node: SwarmNode,
    settings: LoopSettings,
    stop: StopSignal,
    chain_time: ChainTime,
    on_notice: Callable[[str], None],
) -> int | None:
    """The round to work on now: the current one by the chain's clock, once it is one this node
    has not done. Rounds passed over are said."""
    clock = chain_client(node).clock
    while not stop.requested:
        now = chain_time.now()
        current = clock.round_at(int(now))  # the round a transaction sent now lands in
        last = node.state.last_round if node.state else None
        if last is None or current > last:
            if last is not None and current > last + 1:
                on_notice(skipped_rounds_line(last, current))
            return current
        wait = clock.end_of(current) - now
        stop.sleep(min(settings.poll_interval, max(wait, 0.2)))
    return None


def skipped_rounds_line(last: int, current: int) -> str:
    """What a node says when it takes up ``current`` after ``last``, with rounds between."""
    first, final = last + 1, current - 1
    which = f"round {first}" if first == final else f"rounds {first}-{final}"
    return (
        f"{which} skipped: they ended while this node was stopped or busy "
        f"(it publishes only in the current round, {current})"
    )


def _wait_for_peers(
    node: SwarmNode, round_: int, settings: LoopSettings, stop: StopSignal, chain_time: ChainTime
) -> None:
    clock = chain_client(node).clock
    deadline = clock.start_of(round_) + settings.collect_fraction * clock.duration
    with node.report(round_).timings.measure("wait"):
        while not stop.requested and not node.everyone_published(round_):
            left = deadline - chain_time.now()
            if left <= 0:
                return
            stop.sleep(min(settings.poll_interval, left))

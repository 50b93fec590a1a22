"""Reading the chain ahead of the database, in a child process.

Reading a range (``fetch.fetch_range``: eth_getLogs, decoding, seal reads, rows) is pure Python
work about twice as long as writing it, so in line the indexer's database waits for the reader
and the reader for the database. Here a child process reads the ranges after the cursor while the
parent writes the ones it has; when the parent is ready for more, it takes every range that
arrived meanwhile as one (coalesced: fewer, larger transactions when the database is the slower
side). Nothing else changes: each range was checked to hang together as it was read (fetch), the
ranges link up by parent hash, and the parent checks the first against its cursor before it
applies them, exactly as ``ingest`` does in line.

The child is ``python -m coordinator_indexer.readahead`` (started with
``node.local.children.spawn``: it dies with its parent, however the parent ends), with its own
RPC connection; ``ReadAhead.close`` ends it with the indexer. Messages, pickled over its stdin and
stdout (its prints go to stderr):

    parent -> child   ReaderConfig                   first, once
                      ("read", generation, start, parent_hash, until, keep_from, registered)
                      ("ack", generation, logs)      the parent took ranges worth ``logs`` logs
                      ("stop",)
    child -> parent   ("range", generation, path, logs)  a FetchedRange, pickled in ``path``
                      ("retry", generation)          the chain moved under the read: start over
                      ("failed", generation, exc)    an error the parent raises as its own
                      ("broken", generation, why)    the spool cannot be written: read in line

A range travels as a file in the reader's spool folder (a private temporary folder, removed with
the reader; one left by a killed indexer is removed by the next), not down the pipe: a pipe holds
64 KiB, so a range of megabytes would wait on the parent to drain it, and the parent is busy
writing the range before.

A generation reads ``[start, until]``: ranges sized like ``ingest``'s (halved after one with more
than ``max_events`` logs, doubled after quiet ones), starting from one block so that the parent
has work at once. At most ``AHEAD`` x ``max_events`` logs wait unacknowledged: memory stays
bounded however far behind the database is.
"""

from __future__ import annotations

import contextlib
import logging
import os
import pickle
import shutil
import subprocess
import sys
import tempfile
import weakref
from collections.abc import Callable
from dataclasses import dataclass
from multiprocessing.connection import Connection
from pathlib import Path
from typing import Any

from web3 import HTTPProvider, Web3

from coordinator_indexer.chainview import ChainView
from coordinator_indexer.errors import IndexerError
from coordinator_indexer.fetch import FetchedRange, fetch_range, next_range_size
from coordinator_indexer.logs import LogReader
from node.chain.errors import ChainError
from node.chain.rpc import RetryPolicy, connect
from node.local.children import spawn, stop

log = logging.getLogger(__name__)

AHEAD = 8  # unacknowledged logs the child may hold, in units of max_events
_SPOOL_PREFIX = "swarm-indexer-read-ahead-"


class ReaderGone(IndexerError):
    """The read-ahead process ended or stopped answering (the caller reads in line instead)."""


@dataclass(frozen=True)
class ReaderConfig:
    """What the child needs to reach the chain on its own."""

    rpc_url: str
    rpc_timeout: float
    coordinator: str
    retry: RetryPolicy
    max_range: int
    max_events: int


def config_for(
    w3: Web3, coordinator: str, retry: RetryPolicy, max_range: int, max_events: int
) -> ReaderConfig | None:
    """The child's config for ``w3``'s endpoint; None where reading ahead cannot help: with one
    core (the two processes would take turns on it), or where the child cannot reach the chain
    the same way (a provider that is not web3's own HTTPProvider: a subclass may change what it
    sends)."""
    provider = w3.provider
    if type(provider) is not HTTPProvider or provider.endpoint_uri is None:
        return None
    if _cores() < 2:
        return None
    timeout = (provider.get_request_kwargs() or {}).get("timeout", 30.0)
    return ReaderConfig(
        rpc_url=str(provider.endpoint_uri),
        rpc_timeout=float(timeout) if isinstance(timeout, int | float) else 30.0,
        coordinator=coordinator,
        retry=retry,
        max_range=max_range,
        max_events=max_events,
    )


def _cores() -> int:
    """The cores this process may run on."""
    if hasattr(os, "sched_getaffinity"):
        return len(os.sched_getaffinity(0))
    return os.cpu_count() or 1


@dataclass(frozen=True)
class ReadFrom:
    """A read for the child: blocks ``start`` (whose parent is ``parent_hash``) to ``until``,
    the headers from ``keep_from`` on kept; ``registered()``: the peers registered before
    ``start`` (asked only when a new read starts)."""

    start: int
    parent_hash: str
    until: int
    keep_from: int
    registered: Callable[[], set[str]]


@dataclass
class _Job:
    generation: int
    next_start: int
    parent_hash: str
    until: int
    keep_from: int
    registered: set[str]
    size: int = 1
    unacked: int = 0


class _Child:
    """The child's side: reads what it is told, one range at a time."""

    def __init__(
        self, inbox: Connection, outbox: Connection, config: ReaderConfig, spool: Path
    ) -> None:
        self.inbox, self.outbox, self.config, self.spool = inbox, outbox, config, spool
        w3 = connect(config.rpc_url, timeout=config.rpc_timeout)
        self.chain = ChainView(w3, config.coordinator, retry=config.retry)
        self.reader = LogReader(
            w3, config.coordinator, max_chunk=config.max_range, retry=config.retry
        )
        self.job: _Job | None = None

    def serve(self) -> None:
        while True:
            if self.job is None or self._held_back():
                self._handle(self.inbox.recv())  # EOFError when the parent is gone
                continue
            while self.inbox.poll():
                self._handle(self.inbox.recv())
            if self.job is not None and not self._held_back():
                self._read_next(self.job)

    def _held_back(self) -> bool:
        assert self.job is not None
        return self.job.unacked > AHEAD * self.config.max_events

    def _handle(self, message: tuple[Any, ...]) -> None:
        if message[0] == "stop":
            raise EOFError
        if message[0] == "read":
            _, generation, start, parent_hash, until, keep_from, registered = message
            self.job = _Job(generation, start, parent_hash, until, keep_from, set(registered))
        elif message[0] == "ack" and self.job is not None and message[1] == self.job.generation:
            self.job.unacked -= message[2]

    def _read_next(self, job: _Job) -> None:
        end = min(job.until, job.next_start + job.size - 1)
        try:
            fetched = fetch_range(
                self.chain,
                self.reader,
                job.next_start,
                end,
                keep_from=job.keep_from,
                registered=lambda: job.registered,
            )
        except Exception as exc:  # noqa: BLE001 - every error goes to the parent, which decides
            self.outbox.send(("failed", job.generation, _portable(exc)))
            self.job = None
            return
        if fetched is None or fetched.first.parent_hash != job.parent_hash:
            self.outbox.send(("retry", job.generation))
            self.job = None
            return
        path = self.spool / f"{job.generation}-{job.next_start}.range"
        try:
            with path.open("wb") as file:
                pickle.dump(fetched, file, protocol=pickle.HIGHEST_PROTOCOL)
        except OSError as exc:  # a full disk, say: the parent reads in line instead
            self.outbox.send(("broken", job.generation, f"cannot write to {self.spool}: {exc}"))
            self.job = None
            return
        self.outbox.send(("range", job.generation, str(path), fetched.logs))
        job.unacked += fetched.logs + 1
        job.registered |= fetched.registered
        job.parent_hash, job.next_start = fetched.last.hash, end + 1
        job.size = next_range_size(
            job.size, fetched.logs, self.config.max_events, self.config.max_range
        )
        if job.next_start > job.until:
            self.job = None


def _portable(exc: Exception) -> Exception:
    """``exc`` if it survives pickling, else a ChainError (or IndexerError) with its text."""
    try:
        pickle.loads(pickle.dumps(exc))
        return exc
    except Exception:  # noqa: BLE001 - any pickling failure
        kind = ChainError if isinstance(exc, ChainError) else IndexerError
        return kind(f"{type(exc).__name__}: {exc}")


def main() -> None:
    """The child: ``python -m coordinator_indexer.readahead SPOOL`` (started by ``ReadAhead``)."""
    inbox = Connection(os.dup(0), writable=False)
    outbox = Connection(os.dup(1), readable=False)
    os.dup2(2, 1)  # a stray print must not corrupt the channel
    try:
        config = inbox.recv()
        _Child(inbox, outbox, config, Path(sys.argv[1])).serve()
    except (EOFError, BrokenPipeError, KeyboardInterrupt):
        pass  # the parent is gone or stopping


class ReadAhead:
    """The parent's side: starts the child, asks for ranges, takes what arrived."""

    def __init__(self, config: ReaderConfig) -> None:
        self.config = config
        self._process: subprocess.Popen[bytes] | None = None
        self._to_child: Connection | None = None
        self._from_child: Connection | None = None
        self._generation = 0
        self._next_start: int | None = None  # where the current generation's next range starts
        self._until = -1
        self._held: tuple[Any, ...] | None = None  # a message left for the next call
        self._finalizer: Callable[[], Any] = lambda: None

    @property
    def running(self) -> bool:
        return self._process is not None and self._process.poll() is None

    def start(self) -> None:
        """Starts the child (about half a second of imports, once) and sends it the config;
        ReaderGone when it cannot (no temporary folder, no process)."""
        _remove_stale_spools()
        try:
            spool = tempfile.mkdtemp(prefix=f"{_SPOOL_PREFIX}{os.getpid()}-")
            child_in, to_child = os.pipe()
            from_child, child_out = os.pipe()
        except OSError as exc:
            raise ReaderGone(f"cannot start the read-ahead process: {exc}") from None
        try:
            process = spawn(
                [sys.executable, "-m", "coordinator_indexer.readahead", spool],
                stdin=child_in,
                stdout=child_out,
            )
        except OSError as exc:
            for fd in (to_child, from_child):
                os.close(fd)
            shutil.rmtree(spool, ignore_errors=True)
            raise ReaderGone(f"cannot start the read-ahead process: {exc}") from None
        finally:
            os.close(child_in)
            os.close(child_out)
        self._process = process
        self._to_child = Connection(to_child, readable=False)
        self._from_child = Connection(from_child, writable=False)
        self._finalizer = weakref.finalize(
            self, _end, process, self._to_child, self._from_child, spool
        )
        self._next_start, self._held = None, None
        self._send(self.config)

    def close(self) -> None:
        """Ends the child (asked to stop, then killed if it does not) and removes its spool."""
        self._process = self._to_child = self._from_child = None
        self._finalizer()

    def reading_from(self, start: int) -> bool:
        """Whether the child is reading a generation whose next range starts at ``start``."""
        return self.running and self._next_start == start and start <= self._until

    def take(self, read: ReadFrom, max_logs: int) -> FetchedRange | None:
        """The ranges read from block ``read.start`` on, as one (at least one range; more if
        they arrived, up to ``max_logs`` logs); None when the chain moved under the read. Starts a
        new read unless the child is already reading from there. Raises ReaderGone when the child
        died, and the child's error when its read failed."""
        if not self.running:
            status = None if self._process is None else self._process.returncode
            raise ReaderGone(f"the read-ahead process ended (exit status {status})")
        if self._next_start != read.start or read.start > self._until:
            self._begin(read)
        message = self._held or self._get(block=True)
        self._held = None
        assert message is not None
        merged = self._collect(message, max_logs)
        if merged is not None:
            self._next_start = merged.end + 1
            self._send(("ack", self._generation, merged.logs + merged.parts))
        return merged

    def _begin(self, read: ReadFrom) -> None:
        self._generation += 1
        self._next_start, self._until, self._held = read.start, read.until, None
        registered = sorted(read.registered())
        self._send(
            (
                "read",
                self._generation,
                read.start,
                read.parent_hash,
                read.until,
                read.keep_from,
                registered,
            )
        )

    def _collect(self, message: tuple[Any, ...], max_logs: int) -> FetchedRange | None:
        """The range in ``message`` with those queued behind it; raises a failure."""
        if message[0] == "failed":
            self._next_start = None
            raise message[2]
        if message[0] == "retry":
            self._next_start = None
            return None
        if message[0] == "broken":
            self.close()
            raise ReaderGone(message[2])
        merged = _load(message[2])
        while merged.logs < max_logs and merged.end < self._until:
            following = self._get(block=False)
            if following is None:
                break
            if following[0] != "range":
                self._held = following
                break
            merged.extend(_load(following[2]))
        return merged

    def _get(self, *, block: bool) -> tuple[Any, ...] | None:
        """The next message of the current generation (older ones are dropped); None when none
        waits and ``block`` is False."""
        assert self._from_child is not None
        try:
            while block or self._from_child.poll():
                message = self._from_child.recv()
                if message[1] == self._generation:
                    return message
                if message[0] == "range":
                    Path(message[2]).unlink(missing_ok=True)
        except (EOFError, OSError) as exc:
            self.close()
            raise ReaderGone(f"the read-ahead process ended ({type(exc).__name__})") from None
        return None

    def _send(self, message: Any) -> None:
        assert self._to_child is not None
        try:
            self._to_child.send(message)
        except OSError as exc:
            self.close()
            raise ReaderGone(f"the read-ahead process is gone ({exc})") from None


def _load(path: str) -> FetchedRange:
    """A range the child spooled (the file is removed once read); ReaderGone when it is not
    there to read (removed under the indexer, say)."""
    try:
        with open(path, "rb") as file:
            return pickle.load(file)
    except (OSError, pickle.UnpicklingError, EOFError) as exc:
        raise ReaderGone(f"the read-ahead process's range {path} cannot be read: {exc}") from None
    finally:
        Path(path).unlink(missing_ok=True)


def _end(
    process: subprocess.Popen[bytes], to_child: Connection, from_child: Connection, spool: str
) -> None:
    """Asks the child to stop, then ends it and removes its spool (also when its ReadAhead is
    collected unclosed)."""
    with contextlib.suppress(OSError):
        to_child.send(("stop",))
    to_child.close()
    stop(process, grace=2.0)
    from_child.close()
    shutil.rmtree(spool, ignore_errors=True)


def _remove_stale_spools() -> None:
    """Spool folders of indexers that are gone (killed before they could remove theirs)."""
    for folder in Path(tempfile.gettempdir()).glob(f"{_SPOOL_PREFIX}*"):
        pid = folder.name[len(_SPOOL_PREFIX) :].split("-", 1)[0]
        if pid.isdigit() and not _alive(int(pid)):
            shutil.rmtree(folder, ignore_errors=True)


def _alive(pid: int) -> bool:
    try:
        os.kill(pid, 0)
    except ProcessLookupError:
        return False
    except PermissionError:
        return True  # another user's process
    return True


if __name__ == "__main__":
    main()

"""Reading the chain ahead of the database, in reader processes.

Reading a range (``fetch.fetch_range``: eth_getLogs, decoding, seal reads, rows) is pure Python
work two to three times as long as writing it, so in line the indexer's database waits for the
reader and the reader for the database. Here reader processes (one per core, at most
``MAX_READERS``) read the ranges after the cursor, side by side, while the parent writes the ones
it has; when the parent is ready for more, it takes the next range and every one after it that
has arrived, as one (fewer, larger transactions when the database is the slower side). Nothing
else changes: each range was checked to hang together as it was read (fetch), the parent checks
that each links to the one before by parent hash and the first to its cursor before it applies
them, exactly as ``ingest`` does in line.

The parent hands out the ranges, in block order, to the reader with the fewest in hand. Sizes
follow ``ingest``'s rule (halved after a range with more than ``max_events`` logs, doubled after
quiet ones), from one block at first so that the parent has work at once. At most ``IN_HAND``
ranges per reader are handed out and not yet taken: memory stays bounded however far behind the
database is.

A seal's rows need the weight of every peer registered before it, and the ranges before it may
still be in other readers' hands. Each range is handed out with the peers registered up to the
last block of which every range has come back; a reader whose range holds a seal reads the
registrations after that block itself (eth_getLogs of PeerRegistered alone). The parent checks,
as it takes a range, that no weight is missing (``fetch.fill_seal_reads``).

A reader is ``python -m coordinator_indexer.readahead SPOOL`` (started with
``node.local.children.spawn``: it dies with its parent, however the parent ends), with its own
RPC connection; ``ReadAhead.close`` ends the readers with the indexer. Messages, pickled over each
reader's stdin and stdout (its prints go to stderr):

    parent -> reader  ReaderConfig                        first, once
                      ("read", generation, start, end, keep_from, peers, known_through)
                                                          peers: a file of the peers new to
                                                          this reader, registered up to block
                                                          known_through (None: none)
                      ("stop",)
    reader -> parent  ("ready", -1)                       once, when it has started
                      ("range", generation, start, path, logs, peers)  a FetchedRange, pickled
                                                          in ``path``; peers: a file of the peers
                                                          registered in it (None: none)
                      ("retry", generation, start)        the chain moved under the read
                      ("failed", generation, start, exc)  an error the parent raises as its own
                      ("broken", generation, start, why)  the spool cannot be written

A range, and a list of peers, travels as a file in the readers' spool folder (a private temporary
folder, removed with them; one left by a killed indexer is removed by the next), not down the pipe:
a pipe holds 64 KiB, so a range of megabytes would wait on the parent to drain it while the parent
is busy writing the range before, and ten thousand peers sent each way would leave the parent and
a reader each waiting for the other to read. A message is a few hundred bytes. A new generation
(a read from elsewhere: after a reorg, a retry) drops the ranges of the old one, read or not.
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
from collections import deque
from collections.abc import Callable
from dataclasses import dataclass, field
from multiprocessing.connection import Connection, wait
from pathlib import Path
from typing import Any

from web3 import HTTPProvider, Web3

from coordinator_indexer.chainview import ChainView
from coordinator_indexer.errors import IndexerError
from coordinator_indexer.fetch import FetchedRange, fetch_range, next_range_size
from coordinator_indexer.logs import LogReader
from node.chain.errors import ChainError
from node.chain.events import PeerRegistered
from node.chain.rpc import RetryPolicy, connect
from node.local.children import spawn, stop

log = logging.getLogger(__name__)

MAX_READERS = 4
IN_HAND = 3  # ranges per reader handed out and not yet taken
MERGED = 8  # a take merges ranges up to this many times max_events logs
_SPOOL_PREFIX = "swarm-indexer-read-ahead-"
_MESSAGE_BYTES = 4096  # the most an error sent down a pipe takes (everything else is smaller)


class ReaderGone(IndexerError):
    """A reader process ended or stopped answering (the caller reads in line instead)."""


@dataclass(frozen=True)
class ReaderConfig:
    """What a reader needs to reach the chain on its own, and how many readers to start."""

    rpc_url: str
    rpc_timeout: float
    coordinator: str
    retry: RetryPolicy
    max_range: int
    max_events: int
    readers: int = 1


def config_for(
    w3: Web3, coordinator: str, retry: RetryPolicy, max_range: int, max_events: int
) -> ReaderConfig | None:
    """The readers' config for ``w3``'s endpoint, one reader per core; None where reading ahead
    cannot help: with one core (the processes would take turns on it), or where a reader cannot
    reach the chain the same way (a provider that is not web3's own HTTPProvider: a subclass may
    change what it sends)."""
    provider = w3.provider
    if type(provider) is not HTTPProvider or provider.endpoint_uri is None:
        return None
    cores = _cores()
    if cores < 2:
        return None
    timeout = (provider.get_request_kwargs() or {}).get("timeout", 30.0)
    return ReaderConfig(
        rpc_url=str(provider.endpoint_uri),
        rpc_timeout=float(timeout) if isinstance(timeout, int | float) else 30.0,
        coordinator=coordinator,
        retry=retry,
        max_range=max_range,
        max_events=max_events,
        readers=min(cores, MAX_READERS),
    )


def _cores() -> int:
    """The cores this process may run on."""
    if hasattr(os, "sched_getaffinity"):
        return len(os.sched_getaffinity(0))
    return os.cpu_count() or 1


@dataclass(frozen=True)
class ReadFrom:
    """A read for the readers: blocks ``start`` (whose parent is ``parent_hash``) to ``until``,
    the headers from ``keep_from`` on kept; ``registered()``: the peers registered before
    ``start`` (asked when a new read starts, and when a seal lacks weights)."""

    start: int
    parent_hash: str
    until: int
    keep_from: int
    registered: Callable[[], set[str]]


@dataclass(frozen=True)
class _Job:
    generation: int
    start: int
    end: int
    keep_from: int
    peers: str | None  # a file
    known_through: int


class _Reader:
    """A reader process's side: reads the ranges it is handed, in order."""

    def __init__(
        self, inbox: Connection, outbox: Connection, config: ReaderConfig, spool: Path
    ) -> None:
        self.inbox, self.outbox, self.config, self.spool = inbox, outbox, config, spool
        w3 = connect(config.rpc_url, timeout=config.rpc_timeout)
        self.chain = ChainView(w3, config.coordinator, retry=config.retry)
        self.reader = LogReader(
            w3, config.coordinator, max_chunk=config.max_range, retry=config.retry
        )
        self.registrations = LogReader(
            w3, config.coordinator, max_chunk=config.max_range, retry=config.retry
        )
        self.jobs: deque[_Job] = deque()
        self.generation = -1
        self.registered: set[str] = set()

    def serve(self) -> None:
        while True:
            if not self.jobs:
                self._handle(self.inbox.recv())  # EOFError when the parent is gone
            while self.inbox.poll():
                self._handle(self.inbox.recv())
            if self.jobs:
                self._read(self.jobs.popleft())

    def _handle(self, message: tuple[Any, ...]) -> None:
        if message[0] == "stop":
            raise EOFError
        if message[0] == "read":
            job = _Job(*message[1:])
            if job.generation > self.generation:  # the older generation's ranges are dropped
                for dropped in self.jobs:
                    _remove(dropped.peers)
                self.jobs.clear()
                self.generation, self.registered = job.generation, set()
            if job.generation == self.generation:
                self.jobs.append(job)

    def _read(self, job: _Job) -> None:
        where = (job.generation, job.start)
        try:
            self.registered.update(_unspool(job.peers) if job.peers else [])
        except ReaderGone as exc:
            self.outbox.send(("broken", *where, str(exc)))
            return
        try:
            fetched = fetch_range(
                self.chain,
                self.reader,
                job.start,
                job.end,
                keep_from=job.keep_from,
                registered=lambda: self._registered_before(job),
            )
        except Exception as exc:  # noqa: BLE001 - every error goes to the parent, which decides
            self.outbox.send(("failed", *where, _portable(exc)))
            return
        if fetched is None:
            self.outbox.send(("retry", *where))
            return
        name = f"{job.generation}-{job.start}"
        try:
            path = _spool(self.spool / f"{name}.range", fetched)
            peers = _spool(self.spool / f"{name}.peers", sorted(fetched.registered) or None)
        except OSError as exc:  # a full disk, say: the parent reads in line instead
            self.outbox.send(("broken", *where, f"cannot write to {self.spool}: {exc}"))
            return
        self.outbox.send(("range", *where, path, fetched.logs, peers))

    def _registered_before(self, job: _Job) -> set[str]:
        """The peers registered before the job's range: those the parent told of, and those of
        the blocks between the last it knew of and the range."""
        if job.known_through + 1 >= job.start:
            return self.registered
        events, _ = self.registrations.read_range(
            job.known_through + 1, job.start - 1, events=[PeerRegistered]
        )
        return self.registered | {e.peer for e in events if isinstance(e, PeerRegistered)}


def _portable(exc: Exception) -> Exception:
    """``exc`` if it survives pickling in a message's size, else a ChainError (or IndexerError)
    with the start of its text."""
    try:
        pickled = pickle.dumps(exc)
        pickle.loads(pickled)
        fits = len(pickled) <= _MESSAGE_BYTES
    except Exception:  # noqa: BLE001 - any pickling failure
        fits = False
    if fits:
        return exc
    kind = ChainError if isinstance(exc, ChainError) else IndexerError
    return kind(f"{type(exc).__name__}: {exc}"[: _MESSAGE_BYTES // 4])


def main() -> None:
    """A reader: ``python -m coordinator_indexer.readahead SPOOL`` (started by ``ReadAhead``)."""
    inbox = Connection(os.dup(0), writable=False)
    outbox = Connection(os.dup(1), readable=False)
    os.dup2(2, 1)  # a stray print must not corrupt the channel
    try:
        config = inbox.recv()
        reader = _Reader(inbox, outbox, config, Path(sys.argv[1]))
        outbox.send(("ready", -1))  # no generation: the parent's receiving drops it
        reader.serve()
    except (EOFError, BrokenPipeError, KeyboardInterrupt):
        pass  # the parent is gone or stopping


@dataclass
class _Channel:
    """The parent's end of one reader: its process, its pipes, the ranges in its hands, and the
    peers it was told of in this generation."""

    process: subprocess.Popen[bytes]
    to_reader: Connection
    from_reader: Connection
    in_hand: int = 0
    told: int = 0  # how many of ReadAhead._registered it was sent

    def send(self, message: Any) -> None:
        self.to_reader.send(message)


@dataclass
class _Generation:
    """One read: its ranges handed out (by start: end, and the reader's channel), and what
    came back (by start)."""

    number: int
    until: int
    keep_from: int
    next_hand: int  # the next range handed out starts here
    next_take: int  # the next range taken starts here
    known_through: int  # every range up to this block has come back
    handed: dict[int, tuple[int, _Channel]] = field(default_factory=dict)
    came_back: set[int] = field(default_factory=set)  # starts
    arrived: dict[int, tuple[Any, ...]] = field(default_factory=dict)
    moved: bool = False  # two of its ranges did not link: the chain moved under the read


class ReadAhead:
    """The parent's side: starts the readers, hands out ranges, takes what arrived."""

    def __init__(self, config: ReaderConfig) -> None:
        self.config = config
        self._channels: list[_Channel] = []
        self._generations = 0
        self._read: _Generation | None = None
        self._registered: list[str] = []  # registered before the read's start, then as read
        self._spool: Path | None = None
        self._size = 1  # blocks in the next range handed out
        self._sized = False  # whether a range came back to size the next ones by
        self._finalizer: Callable[[], Any] = lambda: None

    @property
    def running(self) -> bool:
        return bool(self._channels) and all(c.process.poll() is None for c in self._channels)

    def start(self) -> None:
        """Starts the readers (about half a second of imports, once) and sends them the config;
        ReaderGone when it cannot (no temporary folder, no process)."""
        _remove_stale_spools()
        try:
            spool = tempfile.mkdtemp(prefix=f"{_SPOOL_PREFIX}{os.getpid()}-")
        except OSError as exc:
            raise ReaderGone(f"cannot start the read-ahead process: {exc}") from None
        channels: list[_Channel] = []
        self._finalizer = weakref.finalize(self, _end, channels, spool)
        for _ in range(self.config.readers):
            try:
                channels.append(_start_reader(spool))
            except OSError as exc:
                self._finalizer()
                raise ReaderGone(f"cannot start the read-ahead process: {exc}") from None
        self._channels, self._read, self._spool = channels, None, Path(spool)
        for channel in channels:
            self._send(channel, self.config)

    def wait_started(self) -> None:
        """Waits until every reader has started (its imports and connections done): for a
        measurement of the steady state, before any range is handed out. ReaderGone when one
        ended."""
        for channel in self._channels:
            try:
                message = channel.from_reader.recv()
            except (EOFError, OSError) as exc:
                self.close()
                raise ReaderGone(f"the read-ahead process ended ({type(exc).__name__})") from None
            if message[0] != "ready":
                raise ValueError(f"wait_started after ranges were handed out: got {message[0]}")

    def close(self) -> None:
        """Ends the readers (asked to stop, then killed if they do not) and removes the spool."""
        self._channels, self._read = [], None
        self._finalizer()

    def reading_from(self, start: int) -> bool:
        """Whether the readers are reading a generation whose next range starts at ``start``."""
        read = self._read
        return self.running and read is not None and read.next_take == start <= read.until

    def take(self, read: ReadFrom, max_logs: int) -> FetchedRange | None:
        """The ranges read from block ``read.start`` on, as one (at least one range; more if
        they arrived, up to ``max_logs`` logs); None when the chain moved under the read. Starts a
        new read unless the readers are already reading from there. Raises ReaderGone when a
        reader died, and a reader's error when its read failed."""
        if not self.running:
            codes = [c.process.returncode for c in self._channels]
            raise ReaderGone(f"the read-ahead process ended (exit status {codes})")
        if not self.reading_from(read.start):
            self._begin(read)
        current = self._read
        assert current is not None
        self._hand_out(current)
        message = self._arrival(current, current.next_take)
        merged = self._collect(current, message, max_logs)
        if merged is None or current.moved:
            self._drop()
        else:
            current.next_take = merged.end + 1
            self._hand_out(current)
        return merged

    def _begin(self, read: ReadFrom) -> None:
        self._drop()
        self._generations += 1
        self._read = _Generation(
            self._generations, read.until, read.keep_from, read.start, read.start, read.start - 1
        )
        self._registered = sorted(read.registered())
        for channel in self._channels:
            channel.in_hand = channel.told = 0

    def _drop(self) -> None:
        """Ends the current generation: what it read and nobody took is removed."""
        if self._read is not None:
            for message in self._read.arrived.values():
                _discard(message)
        self._read = None

    def _hand_out(self, read: _Generation) -> None:
        """Hands out ranges until every reader has ``IN_HAND`` that the parent has not taken
        (or the read's end is handed out)."""
        while read.next_hand <= read.until:
            channel = min(self._channels, key=lambda c: c.in_hand)
            if channel.in_hand >= IN_HAND:
                return
            end = min(read.until, read.next_hand + self._size - 1)
            peers = self._spool_peers(f"{read.number}-{read.next_hand}.told", channel)
            job = (read.number, read.next_hand, end, read.keep_from, peers, read.known_through)
            self._send(channel, ("read", *job))
            channel.in_hand += 1
            read.handed[read.next_hand] = (end, channel)
            read.next_hand = end + 1
            if not self._sized:
                self._size = min(self.config.max_range, self._size * 2)

    def _spool_peers(self, name: str, channel: _Channel) -> str | None:
        """A file of the peers ``channel``'s reader was not told of yet; None when none."""
        assert self._spool is not None
        new = self._registered[channel.told :]
        try:
            path = _spool(self._spool / name, new or None)
        except OSError as exc:
            self.close()
            raise ReaderGone(f"cannot write to {self._spool}: {exc}") from None
        channel.told = len(self._registered)
        return path

    def _arrival(self, read: _Generation, start: int) -> tuple[Any, ...]:
        """What came back for the range starting at ``start`` (waits for it)."""
        while start not in read.arrived:
            self._receive(read)
        return _taken(read, start)

    def _receive(self, read: _Generation, *, block: bool = True) -> None:
        """Files what the readers sent (the older generations' is dropped); waits for one
        message at least when ``block``."""
        pipes = {c.from_reader: c for c in self._channels}
        for pipe in wait(list(pipes), timeout=None if block else 0):
            channel = pipes[pipe]  # type: ignore[index]
            try:
                message = channel.from_reader.recv()
            except (EOFError, OSError) as exc:
                self.close()
                raise ReaderGone(f"the read-ahead process ended ({type(exc).__name__})") from None
            if message[1] != read.number:
                _discard(message)
                continue
            read.arrived[message[2]] = message
            read.came_back.add(message[2])
            while read.known_through + 1 in read.came_back:
                read.known_through = read.handed[read.known_through + 1][0]
            if message[0] == "range":
                self._registered.extend(_unspool(message[5]) if message[5] else [])
                size = read.handed[message[2]][0] - message[2] + 1
                max_events, max_range = self.config.max_events, self.config.max_range
                self._size = next_range_size(size, message[4], max_events, max_range)
                self._sized = True

    def _collect(
        self, read: _Generation, message: tuple[Any, ...], max_logs: int
    ) -> FetchedRange | None:
        """The range in ``message`` with the ranges that arrived after it; raises a failure."""
        if message[0] == "failed":
            self._drop()
            raise message[3]
        if message[0] == "retry":
            return None
        if message[0] == "broken":
            self.close()
            raise ReaderGone(message[3])
        merged: FetchedRange = _unspool(message[3])
        self._receive(read, block=False)
        while merged.logs < max_logs and merged.end + 1 in read.arrived:
            following = read.arrived[merged.end + 1]
            if following[0] != "range":
                break
            part: FetchedRange = _unspool(_taken(read, merged.end + 1)[3])
            if part.first.parent_hash != merged.last.hash:  # the chain moved between the reads
                read.moved = True  # what was merged stands; the next take starts over
                break
            merged.extend(part)
        return merged

    def _send(self, channel: _Channel, message: Any) -> None:
        try:
            channel.send(message)
        except OSError as exc:
            self.close()
            raise ReaderGone(f"the read-ahead process is gone ({exc})") from None


def _start_reader(spool: str) -> _Channel:
    """A reader process and the parent's ends of its pipes."""
    reader_in, to_reader = os.pipe()
    from_reader, reader_out = os.pipe()
    try:
        process = spawn(
            [sys.executable, "-m", "coordinator_indexer.readahead", spool],
            stdin=reader_in,
            stdout=reader_out,
        )
    except OSError:
        for fd in (to_reader, from_reader):
            os.close(fd)
        raise
    finally:
        os.close(reader_in)
        os.close(reader_out)
    return _Channel(
        process, Connection(to_reader, readable=False), Connection(from_reader, writable=False)
    )


def _taken(read: _Generation, start: int) -> tuple[Any, ...]:
    """What came back for the range at ``start``, taken: its reader may be handed another."""
    read.handed[start][1].in_hand -= 1
    return read.arrived.pop(start)


def _discard(message: tuple[Any, ...]) -> None:
    """Removes the files of a range nobody will take."""
    if message[0] == "range":
        _remove(message[3])
        _remove(message[5])


def _spool(path: Path, value: Any) -> str | None:
    """``value`` pickled into ``path`` (None: nothing to write, no file)."""
    if value is None:
        return None
    with path.open("wb") as file:
        pickle.dump(value, file, protocol=pickle.HIGHEST_PROTOCOL)
    return str(path)


def _remove(path: str | None) -> None:
    if path is not None:
        Path(path).unlink(missing_ok=True)


def _unspool(path: str) -> Any:
    """What ``_spool`` wrote in ``path`` (a range, or peers; the file is removed once read);
    ReaderGone when it is not there to read (removed under the indexer, say)."""
    try:
        with open(path, "rb") as file:
            return pickle.load(file)
    except (OSError, pickle.UnpicklingError, EOFError) as exc:
        raise ReaderGone(f"the read-ahead spool's {path} cannot be read: {exc}") from None
    finally:
        _remove(path)


def _end(channels: list[_Channel], spool: str) -> None:
    """Asks the readers to stop, then ends them and removes the spool (also when their
    ReadAhead is collected unclosed)."""
    for channel in channels:
        with contextlib.suppress(OSError):
            channel.send(("stop",))
        channel.to_reader.close()
    for channel in channels:
        stop(channel.process, grace=2.0)
        channel.from_reader.close()
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

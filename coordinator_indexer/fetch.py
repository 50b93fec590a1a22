"""Reading one block range from the chain into the rows it adds (the fetch half of a step).

``fetch_range`` reads the headers a range needs (its first and last block, and every block inside
the unconfirmed window, whose hashes are kept), its logs (``LogReader``: a log the decoder refuses
is kept aside, never failing the range), and for each seal the chain's committee size and weights
at the seal's block; then it turns them into rows (``records_of``). It returns None when the range
does not hang together (the window's headers do not link by parent hash, a log's block hash is not
its header's, a block is missing): the chain moved while it was read, and the caller starts over.

It touches no database, so the indexer runs it in its reader processes (``readahead``) while the
database takes the ranges before, as well as in line (``ingest``). A reader reading ahead does not
know every peer registered before its range (the range before may still be in another reader's
hands): ``fill_seal_reads`` reads, at the seal's block, the weights of the peers it did not ask.
"""

from __future__ import annotations

import itertools
from collections.abc import Callable, Iterable
from dataclasses import dataclass, field
from typing import Any

from coordinator_indexer import schema
from coordinator_indexer.chainview import ChainView
from coordinator_indexer.logs import LogReader
from coordinator_indexer.records import (
    Records,
    SealReads,
    Touched,
    records_of,
    seal_weight_rows,
    unstorable,
)
from coordinator_indexer.store import BlockRef
from node.chain.events import ChainEvent, PeerRegistered, RoundSealed


@dataclass
class SealAsked:
    """A seal of a fetched range and the peers whose weights were read for it."""

    round: int
    block_number: int
    block_hash: str
    position: tuple[int, int]
    asked: set[str]


@dataclass
class FetchedRange:
    """The rows of blocks ``[first.number, last.number]`` and the headers that vouch for them.

    Rows are keyed by table name (a ``Table`` does not cross a process boundary)."""

    first: BlockRef
    last: BlockRef
    window: list[BlockRef]
    rows: dict[str, list[dict[str, Any]]]
    touched: Touched
    logs: int
    refused: int
    registered: dict[str, tuple[int, int]] = field(default_factory=dict)  # peer -> position
    seals: list[SealAsked] = field(default_factory=list)
    parts: int = 1  # ranges read to make this one

    @property
    def start(self) -> int:
        return self.first.number

    @property
    def end(self) -> int:
        return self.last.number

    def records(self) -> Records:
        """The rows as ``Store.apply_range`` takes them."""
        records = Records(touched=self.touched)
        for name, rows in self.rows.items():
            records.rows[schema.metadata.tables[name]].extend(rows)
        return records

    def extend(self, after: FetchedRange) -> None:
        """Appends the range that follows this one (``after.start == self.end + 1``)."""
        if after.start != self.end + 1:
            raise ValueError(f"range {after.start}-{after.end} does not follow block {self.end}")
        self.last = after.last
        known = {b.number for b in self.window}
        self.window.extend(b for b in after.window if b.number not in known)
        for name, rows in after.rows.items():
            self.rows.setdefault(name, []).extend(rows)
        self.touched.update(after.touched)
        self.logs += after.logs
        self.refused += after.refused
        self.registered |= after.registered
        self.seals.extend(after.seals)
        self.parts += after.parts


def fetch_range(
    chain: ChainView,
    reader: LogReader,
    start: int,
    end: int,
    *,
    keep_from: int,
    registered: Callable[[], Iterable[str]],
) -> FetchedRange | None:
    """Blocks ``[start, end]`` read and turned into rows (None: the chain moved; see the module
    docstring). Headers of blocks from ``keep_from`` on are kept; ``registered()`` gives the peers
    registered before ``start``, whose weights each seal of the range reads (asked only when the
    range has a seal)."""
    numbers = range(max(start, keep_from), end + 1)
    headers = [chain.block(n) for n in numbers]
    first = headers[0] if numbers and numbers[0] == start else chain.block(start)
    last = headers[-1] if headers else chain.block(end)
    if first is None or last is None or any(h is None for h in headers):
        return None  # the chain got shorter
    window = [h for h in headers if h is not None]
    if not _linked(window):
        return None
    events, refused = reader.read_range(start, end)
    known = {b.number: b.hash for b in (*window, first, last)}
    if any(e.block_hash != known.get(e.block_number, e.block_hash) for e in (*events, *refused)):
        return None
    reads = seal_reads(chain, events, registered)
    records = records_of(events, reads, refused)
    return FetchedRange(
        first=first,
        last=last,
        window=window,
        rows={table.name: rows for table, rows in records.rows.items() if rows},
        touched=records.touched,
        logs=len(events) + len(refused),
        refused=len(refused),
        registered={e.peer: e.position for e in events if isinstance(e, PeerRegistered)},
        seals=[
            SealAsked(
                e.round, e.block_number, e.block_hash, e.position, set(reads[e.round].weights)
            )
            for e in events
            if isinstance(e, RoundSealed) and e.round in reads
        ],
    )


def fill_seal_reads(chain: ChainView, fetched: FetchedRange, registered: set[str]) -> int:
    """Reads, for each seal of ``fetched``, the weights of the peers registered before it that
    its reader did not ask (``registered``: the peers registered before the range), and adds
    their rows. Returns how many weights were read."""
    read = 0
    for seal in fetched.seals:
        before = {peer for peer, at in fetched.registered.items() if at < seal.position}
        missing = sorted((registered | before) - seal.asked)
        if not missing:
            continue
        weights = chain.seal_reads(seal.round, missing, seal.block_hash).weights
        rows = seal_weight_rows(seal.round, seal.block_number, weights)
        fetched.rows.setdefault(schema.seal_weights.name, []).extend(rows)
        seal.asked.update(missing)
        read += len(missing)
    return read


def next_range_size(size: int, logs: int, max_events: int, max_range: int) -> int:
    """The next range's size in blocks after a range of ``size`` blocks held ``logs`` logs:
    halved after a busy one (more than ``max_events``), doubled after a quiet one (under a
    quarter of it), at most ``max_range``."""
    if logs > max_events:
        return max(1, size // 2)
    if logs < max_events // 4:
        return min(max_range, size * 2)
    return size


def seal_reads(
    chain: ChainView, events: list[ChainEvent], registered: Callable[[], Iterable[str]]
) -> dict[int, SealReads]:
    """For each RoundSealed of ``events``: the chain's committee size and weights at its block,
    for every peer registered before it (``registered()``, or earlier in ``events``). A seal the
    tables cannot hold is applied to nothing, so nothing is read for it."""
    seals = [e for e in events if isinstance(e, RoundSealed) and unstorable(e) is None]
    if not seals:
        return {}
    known = set(registered())
    reads = {}
    for seal in seals:
        peers = known | {
            e.peer for e in events if isinstance(e, PeerRegistered) and e.position < seal.position
        }
        reads[seal.round] = chain.seal_reads(seal.round, peers, seal.block_hash)
    return reads


def _linked(headers: list[BlockRef]) -> bool:
    return all(b.parent_hash == a.hash for a, b in itertools.pairwise(headers))

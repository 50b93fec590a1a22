"""Reading ahead in reader processes (coordinator_indexer.readahead): it writes exactly what reading
in line writes, through reorgs under the read, a killed reader and RPC failures, and its processes
end with the indexer."""

from __future__ import annotations

import gc
import hashlib
import logging
import os
import pickle
import shutil
import signal
import tempfile
from pathlib import Path

import pytest
from web3 import HTTPProvider, Web3

from coordinator_indexer import ingest, readahead
from coordinator_indexer.chainview import ChainView
from coordinator_indexer.fetch import FetchedRange, fetch_range, fill_seal_reads
from coordinator_indexer.ingest import Indexer, IngestSettings
from coordinator_indexer.logs import LogReader
from coordinator_indexer.records import Touched
from coordinator_indexer.store import BlockRef
from node.chain.errors import RpcUnavailable
from node.chain.events import RoundSealed
from node.chain.rpc import connect
from tests.chain.helpers import FlakyProxy
from tests.chain_fixtures import TEST_RETRY
from tests.indexer.scenario import play
from tests.indexer.test_reorg import tables
from tests.waiting import wait_for

pytestmark = pytest.mark.integration

#: Reads ahead from the first block, in child ranges of a block or two (max_events 4).
AHEAD = {"read_ahead": 1, "max_events": 4}


def readers() -> list[int]:
    """Pids of the read-ahead processes this test process started."""
    found = []
    for entry in Path("/proc").iterdir():
        if not entry.name.isdigit():
            continue
        try:
            command = (entry / "cmdline").read_bytes().split(b"\0")
            parent = int((entry / "stat").read_text().rsplit(")", 1)[1].split()[1])
        except (OSError, ValueError, IndexError):
            continue  # gone meanwhile
        if b"coordinator_indexer.readahead" in command and parent == os.getpid():
            found.append(int(entry.name))
    return found


def synced_with_reader(indexer: Indexer) -> tuple[list[str], bool]:
    """Syncs; the steps' kinds, and whether a read-ahead process ran during the sync."""
    kinds: list[str] = []
    seen = False

    def on_step(result) -> None:
        nonlocal seen
        kinds.append(result.kind)
        seen = seen or bool(readers())

    indexer.sync(on_step=on_step)
    return kinds, seen


def assert_as_in_line(indexer: Indexer, make_indexer) -> None:
    """The tables equal an index read in line, one block per range, and a rebuild."""
    confirmations = indexer.settings.confirmations
    in_line = make_indexer(read_ahead=0, max_range=1, confirmations=confirmations)
    in_line.sync()
    assert tables(indexer.store) == tables(in_line.store)
    expected = tables(indexer.store)
    indexer.store.rebuild()
    assert tables(indexer.store) == expected


def test_reading_ahead_writes_what_reading_in_line_writes(
    chain, client_for, dev_accounts, make_indexer
) -> None:
    play(chain, client_for, dev_accounts[1:])
    indexer = make_indexer(**AHEAD)
    kinds, seen = synced_with_reader(indexer)
    assert seen and set(kinds) == {"applied"}
    assert indexer.store.state().cursor_block == chain.w3.eth.block_number
    assert_as_in_line(indexer, make_indexer)
    indexer.close()
    assert readers() == []


def test_waiting_for_the_readers_to_start_then_reading_ahead(
    chain, client_for, dev_accounts, make_indexer
) -> None:
    """``wait_for_readers`` (what a benchmark of the steady state calls after ``prepare``)
    returns once every reader has started, and the readers' first message does not disturb the
    ranges that follow; without readers it returns at once."""
    play(chain, client_for, dev_accounts[1:])
    indexer = make_indexer(**AHEAD)
    indexer.wait_for_readers()
    assert len(readers()) == indexer._ahead.config.readers
    kinds, seen = synced_with_reader(indexer)
    assert seen and set(kinds) == {"applied"}
    assert_as_in_line(indexer, make_indexer)
    in_line = make_indexer(read_ahead=0)
    in_line.wait_for_readers()
    assert in_line.sync().caught_up


def test_a_reorg_under_the_read_ahead_is_repaired(
    chain, client_for, dev_accounts, make_indexer
) -> None:
    """The chain's last blocks are replaced after the first range is written, while the reader
    has read (some of) the old ones: the old rows are rolled back, the new chain applied."""
    play(chain, client_for, dev_accounts[1:])
    chain.mine(8)
    indexer = make_indexer(confirmations=20, **AHEAD)
    write = indexer.store.apply_range
    reorged = []

    def write_then_reorg(*args, **kwargs):
        write(*args, **kwargs)
        if not reorged:
            reorged.append(chain.rpc("anvil_reorg", 10, []))

    indexer.store.apply_range = write_then_reorg
    kinds, _ = synced_with_reader(indexer)
    # Ranges the readers read before the reorg may have taken the cursor to the head on the old
    # chain: sync stops there, and the next poll finds the reorg.
    kinds += synced_with_reader(indexer)[0]
    if "reorg" not in kinds:  # the reader had not read past the first range: nothing stale
        assert "retry" in kinds or kinds.count("applied") > 1
    assert reorged
    latest = chain.w3.eth.get_block("latest")["hash"]
    assert indexer.store.state().cursor_hash == "0x" + bytes(latest).hex()
    assert_as_in_line(indexer, make_indexer)


def test_a_killed_reader_is_replaced_and_nothing_is_lost(
    chain, client_for, dev_accounts, make_indexer, caplog
) -> None:
    play(chain, client_for, dev_accounts[1:])
    indexer = make_indexer(max_range=2, **AHEAD)  # the range read in line is short: new
    assert indexer.step().kind == "applied"  # readers take over at the next step
    os.kill(readers()[0], signal.SIGKILL)
    with caplog.at_level(logging.WARNING, logger="coordinator_indexer.ingest"):
        kinds, seen = synced_with_reader(indexer)
    assert "read-ahead process ended" in caplog.text
    assert seen and set(kinds) == {"applied"}
    assert_as_in_line(indexer, make_indexer)


def test_a_reader_that_keeps_dying_leaves_the_indexer_reading_in_line(
    chain, client_for, dev_accounts, make_indexer, monkeypatch, caplog
) -> None:
    play(chain, client_for, dev_accounts[1:])
    start = readahead.ReadAhead.start

    def start_then_die(self) -> None:
        start(self)
        for channel in self._channels:
            channel.process.kill()
            channel.process.wait()

    monkeypatch.setattr(readahead.ReadAhead, "start", start_then_die)
    indexer = make_indexer(max_range=2, **AHEAD)
    with caplog.at_level(logging.WARNING, logger="coordinator_indexer.ingest"):
        kinds, _ = synced_with_reader(indexer)
    assert "reading in line from now on" in caplog.text
    assert set(kinds) == {"applied"}
    assert readers() == []
    assert_as_in_line(indexer, make_indexer)


def test_an_rpc_failure_in_the_reader_is_raised_as_in_line(
    chain, client_for, dev_accounts, deployment, open_store, sqlite_url, make_indexer
) -> None:
    """Logs the RPC keeps refusing (503, more times than the retry policy tries) fail the step
    with the same error as in line; once the RPC answers, the sync goes on where it was."""
    play(chain, client_for, dev_accounts[1:])
    with FlakyProxy(
        chain.w3.provider.endpoint_uri, {"eth_getLogs": [503] * 1000}
    ).running() as proxy:
        indexer = Indexer(
            connect(proxy.url),
            deployment,
            open_store(sqlite_url("flaky")),
            IngestSettings(confirmations=6, **AHEAD),
            retry=TEST_RETRY,
        )
        indexer.prepare()
        with pytest.raises(RpcUnavailable, match="503|unavailable|HTTP"):
            indexer.sync()
        assert indexer.store.state().cursor_block < chain.w3.eth.block_number
        proxy.plan.clear()  # the RPC answers again
        kinds, seen = synced_with_reader(indexer)
        assert seen and set(kinds) == {"applied"}
        assert_as_in_line(indexer, make_indexer)
        indexer.close()


def test_the_reader_ends_with_the_indexer(
    chain, client_for, dev_accounts, make_indexer, w3, deployment, open_store, sqlite_url
) -> None:
    """Closed, or dropped without closing: the process ends and its spool folder goes."""
    play(chain, client_for, dev_accounts[1:], phases=2)
    indexer = make_indexer(**AHEAD)
    indexer.step()
    assert (
        len(readers())
        == readahead.config_for(w3, deployment.coordinator, TEST_RETRY, 2000, 5000).readers
    )
    spools = list(Path(tempfile.gettempdir()).glob("swarm-indexer-read-ahead-*"))
    assert spools
    indexer.close()
    assert readers() == []
    assert not any(spool.exists() for spool in spools)

    settings = IngestSettings(confirmations=6, **AHEAD)
    dropped = Indexer(w3, deployment, open_store(sqlite_url("dropped")), settings, retry=TEST_RETRY)
    dropped.prepare()
    dropped.step()
    assert readers()
    del dropped
    gc.collect()
    wait_for(lambda: readers() == [], what="the dropped indexer's reader to end")


def test_a_range_joins_only_the_range_that_follows_it() -> None:
    def block(number: int) -> BlockRef:
        return BlockRef(number, f"0x{number:064x}", f"0x{number - 1:064x}", number)

    def fetched(start: int, end: int, logs: int) -> FetchedRange:
        rows = {"votes": [{}] * logs}
        return FetchedRange(block(start), block(end), [block(end)], rows, Touched(), logs, 0)

    first = fetched(1, 3, 2)
    first.extend(fetched(4, 6, 5))
    assert (first.start, first.end, first.logs, first.parts) == (1, 6, 7, 2)
    assert len(first.rows["votes"]) == 7
    assert [b.number for b in first.window] == [3, 6]
    with pytest.raises(ValueError, match="does not follow"):
        first.extend(fetched(8, 9, 1))


def test_a_spool_that_cannot_be_written_leaves_the_range_to_be_read_in_line(
    chain, client_for, dev_accounts, make_indexer, caplog
) -> None:
    """The reader's folder removed under it (as a full disk would fail its writes): the range is
    read in line, a new reader with a new folder takes the next, and nothing is lost."""
    play(chain, client_for, dev_accounts[1:])
    indexer = make_indexer(max_range=2, **AHEAD)
    (spool,) = Path(tempfile.gettempdir()).glob(f"swarm-indexer-read-ahead-{os.getpid()}-*")
    shutil.rmtree(spool)
    with caplog.at_level(logging.WARNING, logger="coordinator_indexer.ingest"):
        kinds, seen = synced_with_reader(indexer)
    assert f"cannot write to {spool}" in caplog.text
    assert seen and set(kinds) == {"applied"}
    assert_as_in_line(indexer, make_indexer)


def test_no_temporary_folder_means_reading_in_line(
    chain, client_for, dev_accounts, make_indexer, monkeypatch, caplog
) -> None:
    def no_folder(*args, **kwargs):
        raise PermissionError(13, "Permission denied", "/tmp")

    play(chain, client_for, dev_accounts[1:])
    monkeypatch.setattr(readahead.tempfile, "mkdtemp", no_folder)
    with caplog.at_level(logging.WARNING, logger="coordinator_indexer.ingest"):
        indexer = make_indexer(max_range=2, **AHEAD)
        kinds, _ = synced_with_reader(indexer)
    assert "cannot start the read-ahead process" in caplog.text
    assert "reading in line from now on" in caplog.text
    assert set(kinds) == {"applied"} and readers() == []
    monkeypatch.undo()
    assert_as_in_line(indexer, make_indexer)


def test_one_core_or_another_provider_reads_in_line(w3, monkeypatch) -> None:
    coordinator = "0x" + "11" * 20
    assert readahead.config_for(w3, coordinator, TEST_RETRY, 2000, 5000) is not None
    limited = type("Limited", (HTTPProvider,), {})(w3.provider.endpoint_uri)
    assert readahead.config_for(Web3(limited), coordinator, TEST_RETRY, 2000, 5000) is None
    monkeypatch.setattr(readahead.os, "sched_getaffinity", lambda pid: {0})
    assert readahead.config_for(w3, coordinator, TEST_RETRY, 2000, 5000) is None


def test_readers_handed_ranges_before_the_registrations_come_back_ask_every_weight(
    chain, client_for, dev_accounts, make_indexer, monkeypatch
) -> None:
    """Every range handed out at once (the seals' ranges before those of the registrations have
    come back): the readers read the registrations in between themselves, so that the parent has
    no weight left to read, and the tables are those of reading in line."""
    play(chain, client_for, dev_accounts[1:])
    monkeypatch.setattr(readahead, "IN_HAND", 1000)
    filled: list[int] = []
    fill = ingest.fill_seal_reads
    monkeypatch.setattr(
        ingest, "fill_seal_reads", lambda *args: filled.append(fill(*args)) or filled[-1]
    )
    indexer = make_indexer(**AHEAD)
    kinds, seen = synced_with_reader(indexer)
    assert seen and set(kinds) == {"applied"}
    assert filled and set(filled) == {0}  # the seals were taken, and nothing was missing
    assert_as_in_line(indexer, make_indexer)


def test_the_weights_a_reader_did_not_ask_are_read_when_its_range_is_taken(
    chain, client_for, dev_accounts, w3, deployment
) -> None:
    swarm = play(chain, client_for, dev_accounts[1:])
    view = ChainView(w3, deployment.coordinator, retry=TEST_RETRY)
    reader = LogReader(w3, deployment.coordinator)
    head = w3.eth.block_number
    (seal, *_) = [e for e in reader.read(1, head) if isinstance(e, RoundSealed)]
    everyone = {swarm.address(name) for name in swarm.clients}

    def seal_block(registered: set[str]) -> FetchedRange:
        fetched = fetch_range(
            view,
            reader,
            seal.block_number,
            seal.block_number,
            keep_from=head,
            registered=lambda: registered,
        )
        assert fetched is not None
        return fetched

    complete = seal_block(everyone)
    partial = seal_block({swarm.address("alice")})
    assert len(partial.rows["seal_weights"]) == 1 < len(complete.rows["seal_weights"])
    assert fill_seal_reads(view, partial, everyone) == len(everyone) - 1
    assert sorted(map(sorted_items, partial.rows["seal_weights"])) == sorted(
        map(sorted_items, complete.rows["seal_weights"])
    )
    assert fill_seal_reads(view, partial, everyone) == 0  # asked once


def sorted_items(row: dict) -> tuple:
    return tuple(sorted(row.items()))


def test_messages_stay_small_however_many_peers_are_registered(
    chain, client_for, dev_accounts, make_indexer, monkeypatch
) -> None:
    """Thousands of peers known at the start go to the readers as files, not down their pipes:
    a pipe holds 64 KiB, and a parent and a reader each sending the other more than that would
    each wait for the other forever. Every message either way stays under 4 KiB."""
    play(chain, client_for, dev_accounts[1:])
    sizes: list[int] = []

    class Measured(readahead.Connection):
        def send(self, obj) -> None:
            sizes.append(len(pickle.dumps(obj)))
            super().send(obj)

        def recv(self):
            message = super().recv()
            sizes.append(len(pickle.dumps(message)))
            return message

    monkeypatch.setattr(readahead, "Connection", Measured)
    indexer = make_indexer(**AHEAD)
    registered = indexer.store.registered_peers
    many = {"0x" + hashlib.sha256(str(i).encode()).hexdigest()[:40] for i in range(5000)}
    monkeypatch.setattr(indexer.store, "registered_peers", lambda: registered() | many)
    kinds, seen = synced_with_reader(indexer)
    assert seen and set(kinds) == {"applied"}
    assert sizes and max(sizes) < 4096
    assert_as_in_line(indexer, make_indexer)

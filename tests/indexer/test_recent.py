"""The rounds kept in memory between ranges (coordinator_indexer.recent): they must agree with the
database or not be used. A range that fails, another writer, and rounds evicted and read again
must all leave the same rows as a rebuild from the event tables."""

from __future__ import annotations

import pytest

from coordinator_indexer import advance
from tests.indexer.scenario import play
from tests.indexer.test_totals import assert_as_rebuilt, kept_totals, worked_out_totals

pytestmark = pytest.mark.integration


def assert_consistent(store) -> None:
    assert kept_totals(store) == worked_out_totals(store)
    assert_as_rebuilt(store)


def test_a_range_that_failed_after_its_rows_were_kept_is_applied_again_from_the_database(
    chain, client_for, dev_accounts, make_indexer, monkeypatch
) -> None:
    """Every range fails once at its end, after the kept rounds took its rows and verdicts; the
    transaction rolls back, and the retry must not count them twice."""
    indexer = make_indexer(max_range=1, read_ahead=0)
    write_rounds = advance._write_rounds
    failed: set[int] = set()

    def fail_once(conn, recent, rounds) -> None:
        write_rounds(conn, recent, rounds)
        cursor = indexer.store.state().cursor_block  # another connection: the range's start
        if cursor not in failed:
            failed.add(cursor)
            raise RuntimeError("power cut")

    monkeypatch.setattr(advance, "_write_rounds", fail_once)

    def synced(phase: int) -> None:
        while True:
            try:
                if indexer.step().caught_up:
                    break
            except RuntimeError as exc:
                assert "power cut" in str(exc)
        assert_consistent(indexer.store)

    play(chain, client_for, dev_accounts[1:], between=synced)
    assert len(failed) > 5


def test_another_writer_in_between_is_noticed(
    chain, client_for, dev_accounts, make_indexer, sqlite_url
) -> None:
    """Two indexers on one database take turns, a block each: each must read what the other
    wrote instead of trusting the rounds it kept."""
    url = sqlite_url("shared")
    first, second = (make_indexer(url, max_range=1, read_ahead=0) for _ in range(2))

    def synced(phase: int) -> None:
        turn = 0
        while not (first, second)[turn % 2].step().caught_up:
            turn += 1
        assert_consistent(first.store)

    play(chain, client_for, dev_accounts[1:], between=synced)
    assert first.store.recent.version != second.store.recent.version


def test_rounds_evicted_are_read_again(chain, client_for, dev_accounts, make_indexer) -> None:
    """With no room for rounds beyond the current range's, every range reads its rounds from the
    database and must come to the same rows as keeping them."""
    tight = make_indexer(max_range=1, read_ahead=0)
    tight.store.recent.rows_kept = 0
    roomy = make_indexer(max_range=1, read_ahead=0)

    def synced(phase: int) -> None:
        for indexer in (tight, roomy):
            indexer.sync()
        assert_consistent(tight.store)
        assert tight.store.dump()["peers"] == roomy.store.dump()["peers"]

    play(chain, client_for, dev_accounts[1:], between=synced)

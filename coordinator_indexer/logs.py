"""Reading the coordinator's logs so that no log's contents can stop the indexer (fetch stage).

``node.chain.events.EventReader`` turns logs into typed events and raises on a log whose values its
event's model refuses, or whose bytes do not decode: a ``ParametersScheduled`` with rules outside
the contract's bounds (quorumBps 65535); a name that is not UTF-8 decodes, with U+FFFD for its bad
bytes (``node.chain.events``). One such log would fail every read of its range, and the indexer
would stop there for good. ``LogReader`` sets such logs aside as :class:`RefusedLog` (kept as they are in
``unapplied_events``) and reads the rest.
"""

from __future__ import annotations

from collections.abc import Iterable
from functools import lru_cache
from typing import Any, cast

from eth_abi.exceptions import DecodingError
from eth_typing import ABIEvent
from eth_utils import event_abi_to_log_topic

from coordinator_indexer.records import RefusedLog
from node.chain.abi import load_abi
from node.chain.events import ChainEvent, EventReader, decode_log

#: What decoding one log raises on its contents (pydantic's ValidationError and
#: UnicodeDecodeError are ValueErrors).
_CONTENT_ERRORS = (ValueError, TypeError, OverflowError, DecodingError)
_REASON_CHARS = 500


class LogReader(EventReader):
    """An EventReader that refuses single logs instead of whole ranges."""

    def __init__(self, *args: Any, **kwargs: Any) -> None:
        super().__init__(*args, **kwargs)
        self._refused: dict[tuple[int, int], RefusedLog] = {}

    def read_range(
        self, start: int, end: int, *, events: Iterable[type[ChainEvent]] | None = None
    ) -> tuple[list[ChainEvent], list[RefusedLog]]:
        """The events of blocks ``[start, end]`` in chain order (of the types ``events``, by
        default all), and the logs refused there."""
        self._refused = {}
        found = self.read(start, end, events=events)
        return found, sorted(self._refused.values(), key=lambda log: log.position)

    def _decode(self, log: Any) -> ChainEvent | None:
        # EventReader decodes every log through here, once.
        try:
            return decode_log(log)
        except _CONTENT_ERRORS as exc:
            refused = refused_log(log, exc)
            self._refused[refused.position] = refused
            return None


def refused_log(log: Any, error: Exception) -> RefusedLog:
    """The log as it is, with the decoder's reason on one line."""
    topics = tuple("0x" + bytes(topic).hex() for topic in log["topics"])
    text = f"{type(error).__name__}: {error}".replace("\x00", "\ufffd")  # Postgres text: no NUL
    reason = " ".join(text.split())[:_REASON_CHARS]
    return RefusedLog(
        block_number=int(log["blockNumber"]),
        block_hash="0x" + bytes(log["blockHash"]).hex(),
        log_index=int(log["logIndex"]),
        tx_hash="0x" + bytes(log["transactionHash"]).hex(),
        event=_event_names().get(topics[0], "unknown") if topics else "unknown",
        reason=reason,
        topics=topics,
        data="0x" + bytes(log["data"]).hex(),
    )


@lru_cache(maxsize=1)
def _event_names() -> dict[str, str]:
    """topic0 (0x-hex) -> event name, from the committed ABI."""
    return {
        "0x" + bytes(event_abi_to_log_topic(cast(ABIEvent, item))).hex(): str(item["name"])
        for item in load_abi()
        if item["type"] == "event"
    }

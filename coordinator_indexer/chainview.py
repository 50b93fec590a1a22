"""The few reads of the chain itself the indexer makes besides logs: the head, block headers.

Transient RPC failures are retried (``node.chain.rpc``); a block that does not exist (the chain is
shorter than asked, e.g. after a rollback) is ``None``, not an error.
"""

from __future__ import annotations

from typing import Any

from web3 import Web3
from web3.exceptions import BlockNotFound

from coordinator_indexer.store import BlockRef
from node.chain.rpc import DEFAULT_RETRY, RetryPolicy, call_with_retry, endpoint_of


def _hex(value: Any) -> str:
    return "0x" + bytes(value).hex()


class ChainView:
    """Head and headers of the chain behind ``w3``."""

    def __init__(self, w3: Web3, *, retry: RetryPolicy = DEFAULT_RETRY) -> None:
        self.w3 = w3
        self.retry = retry
        self.endpoint = endpoint_of(w3)

    def chain_id(self) -> int:
        return int(
            call_with_retry(
                lambda: self.w3.eth.chain_id,
                what="reading the chain id",
                endpoint=self.endpoint,
                policy=self.retry,
            )
        )

    def head(self) -> int:
        return int(
            call_with_retry(
                lambda: self.w3.eth.block_number,
                what="reading the latest block number",
                endpoint=self.endpoint,
                policy=self.retry,
            )
        )

    def block(self, number: int) -> BlockRef | None:
        """The header of block ``number``; None when the chain has no such block (yet)."""
        if number < 0:
            return None

        def fetch() -> BlockRef | None:
            try:
                header = self.w3.eth.get_block(number)
            except BlockNotFound:
                return None
            return BlockRef(
                number=int(header["number"]),
                hash=_hex(header["hash"]),
                parent_hash=_hex(header["parentHash"]),
                timestamp=int(header["timestamp"]),
            )

        return call_with_retry(
            fetch, what=f"reading block {number}", endpoint=self.endpoint, policy=self.retry
        )

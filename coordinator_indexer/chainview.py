"""The few reads of the chain itself the indexer makes besides logs: the head, block headers.

Transient RPC failures are retried (``node.chain.rpc``); a block that does not exist (the chain is
shorter than asked, e.g. after a rollback) is ``None``, not an error.
"""

from __future__ import annotations

from collections.abc import Iterable
from typing import Any

from web3 import Web3
from web3.exceptions import BlockNotFound

from coordinator_indexer.records import SealReads
from coordinator_indexer.store import BlockRef
from node.chain.abi import load_abi
from node.chain.rpc import DEFAULT_RETRY, RetryPolicy, call_with_retry, endpoint_of

#: Views per JSON-RPC batch request.
_BATCH = 200


def _hex(value: Any) -> str:
    return "0x" + bytes(value).hex()


class ChainView:
    """Head and headers of the chain behind ``w3``; the coordinator's views the indexer needs."""

    def __init__(
        self, w3: Web3, coordinator: str | None = None, *, retry: RetryPolicy = DEFAULT_RETRY
    ) -> None:
        self.w3 = w3
        self.retry = retry
        self.endpoint = endpoint_of(w3)
        self.contract = (
            w3.eth.contract(address=coordinator, abi=load_abi()) if coordinator else None
        )

    def _view(self, what: str, call: Any, block: Any = "latest") -> Any:
        assert self.contract is not None, "ChainView needs the coordinator for contract views"
        return call_with_retry(
            lambda: call.call(block_identifier=block),
            what=what,
            endpoint=self.endpoint,
            policy=self.retry,
        )

    def _batched_views(self, what: str, calls: list[Any], block: Any) -> list[Any]:
        """The views in one JSON-RPC batch (a seal needs every peer's weight: one request
        each took a second per 1,000 peers); retried as a whole."""

        def run() -> list[Any]:
            # A batched call cannot name its block by hash: name it by number, then check that
            # the number still holds that hash (else the answers may be another chain's).
            number = int(self.w3.eth.get_block(block)["number"])
            with self.w3.batch_requests() as batch:
                for call in calls:
                    batch.add(call.call(block_identifier=number))
                values = list(batch.execute())
            if bytes(self.w3.eth.get_block(number)["hash"]) != bytes(block):
                raise BlockNotFound(f"block {_hex(block)} was reorganised away")
            return values

        return call_with_retry(run, what=what, endpoint=self.endpoint, policy=self.retry)

    def judging_rounds(self) -> int:
        """J = graceRounds + commitRounds + revealRounds (immutable)."""
        assert self.contract is not None
        functions = self.contract.functions
        return sum(
            int(self._view(f"reading {name}", getattr(functions, name)()))
            for name in ("graceRounds", "commitRounds", "revealRounds")
        )

    def seal_reads(self, round_: int, peers: Iterable[str], block_hash: str) -> SealReads:
        """``rulesAt(round).committeeSize`` and each peer's ``weightAt(peer, round)`` at the end of
        the block ``block_hash`` (by hash: a block reorganised away fails instead of answering for
        another chain)."""
        assert self.contract is not None
        functions, block = self.contract.functions, bytes.fromhex(block_hash[2:])
        rules = self._view(f"reading rulesAt({round_})", functions.rulesAt(round_), block)
        ordered = sorted(set(peers))
        weights: dict[str, int] = {}
        for start in range(0, len(ordered), _BATCH):
            chunk = ordered[start : start + _BATCH]
            values = self._batched_views(
                f"reading weightAt of {len(chunk)} peers for round {round_}",
                [functions.weightAt(peer, round_) for peer in chunk],
                block,
            )
            weights.update(zip(chunk, (int(v) for v in values), strict=True))
        return SealReads(committee_size=int(rules[2]), weights=weights)

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

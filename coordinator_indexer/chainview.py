"""The few reads of the chain itself the indexer makes besides logs: the head, block headers.

Transient RPC failures are retried (``node.chain.rpc``); a block that does not exist (the chain is
shorter than asked, e.g. after a rollback) is ``None``, not an error.
"""

from __future__ import annotations

from collections.abc import Iterable
from typing import Any

from eth_abi import encode
from eth_abi.exceptions import DecodingError
from eth_utils import function_signature_to_4byte_selector
from web3 import Web3
from web3.exceptions import BlockNotFound, Web3RPCError
from web3.types import RPCEndpoint

from coordinator_indexer import weights_reader
from coordinator_indexer.records import SealReads
from coordinator_indexer.store import BlockRef
from node.chain.abi import load_abi
from node.chain.errors import RpcUnavailable
from node.chain.events import hex_digits
from node.chain.rpc import DEFAULT_RETRY, RetryPolicy, call_with_retry, endpoint_of

#: Per-peer views per JSON-RPC batch request, where the chain refuses ``WeightsReader``'s call.
_BATCH = 200


#: ``weightAt(address,uint64)``'s selector.
_WEIGHT_AT = function_signature_to_4byte_selector("weightAt(address,uint64)")


def _hex(value: Any) -> str:
    return "0x" + bytes(value).hex()


def _weight_at_calldata(peer: str, round_: int) -> str:
    return "0x" + (_WEIGHT_AT + encode(["address", "uint64"], [peer, round_])).hex()


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

    def _weights(self, round_: int, peers: list[str], block: bytes) -> list[int]:
        """``weightAt(peer, round_)`` of ``peers`` at ``block``: in one ``eth_call`` of
        ``WeightsReader``'s creation code, or, where the chain refuses that call, in JSON-RPC
        batches of raw per-peer ``eth_call``s; retried as a whole."""
        assert self.contract is not None
        to = self.contract.address

        def run() -> list[int]:
            # A batched call cannot name its block by hash: name it by number, then check that
            # the number still holds that hash (else the answers may be another chain's).
            sealed = self._header("eth_getBlockByHash", _hex(block))
            if sealed is None:
                raise BlockNotFound(f"block {_hex(block)} was reorganised away")
            weights = self._weights_in_one_call(to, round_, peers, sealed.number)
            if weights is None:
                weights = self._weights_peer_by_peer(to, round_, peers, sealed.number)
            now = self._header("eth_getBlockByNumber", hex(sealed.number))
            if now is None or now.hash != _hex(block):
                raise BlockNotFound(f"block {_hex(block)} was reorganised away")
            return weights

        what = f"reading weightAt of {len(peers)} peers for round {round_}"
        return call_with_retry(run, what=what, endpoint=self.endpoint, policy=self.retry)

    def _weights_in_one_call(
        self, to: str, round_: int, peers: list[str], number: int
    ) -> list[int] | None:
        """The weights from one ``WeightsReader`` call; None when the chain answers it with an
        error or a malformed result (a revert, a gas cap, an RPC that refuses calls without
        ``to``): the caller then reads peer by peer. A transport failure raises (retried)."""
        data = weights_reader.call_data(to, round_, peers)
        params = [{"data": data}, hex(number)]
        answer = self.w3.provider.make_request("eth_call", params)  # type: ignore[arg-type]
        result = answer.get("result")
        if "error" in answer or not isinstance(result, str):
            return None
        try:
            return weights_reader.decode_weights(result, len(peers))
        except (ValueError, TypeError, DecodingError):
            return None

    def _weights_peer_by_peer(
        self, to: str, round_: int, peers: list[str], number: int
    ) -> list[int]:
        """The weights from raw per-peer ``eth_call``s in JSON-RPC batches of ``_BATCH``
        (calldata encoded here: web3's per-call ABI handling cost 3 ms a call)."""
        weights: list[int] = []
        for start in range(0, len(peers), _BATCH):
            chunk = peers[start : start + _BATCH]
            calls = [
                ("eth_call", [{"to": to, "data": _weight_at_calldata(peer, round_)}, hex(number)])
                for peer in chunk
            ]
            answered = self.w3.provider.make_batch_request(calls)  # type: ignore[attr-defined]
            answers = [answered] if isinstance(answered, dict) else list(answered)
            failed = [a for a in answers if "error" in a or "result" not in a]
            if failed or len(answers) != len(chunk):
                first = failed[0] if failed else {"error": {"message": "answers missing"}}
                raise Web3RPCError(str(first.get("error")), rpc_response=first)
            by_id = sorted(answers, key=lambda a: int(a["id"]))
            weights += [int(a["result"], 16) for a in by_id]
        return weights

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
        for start in range(0, len(ordered), weights_reader.PEERS_PER_CALL):
            chunk = ordered[start : start + weights_reader.PEERS_PER_CALL]
            weights.update(zip(chunk, self._weights(round_, chunk, block), strict=True))
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
        return call_with_retry(
            lambda: self._header("eth_getBlockByNumber", hex(number)),
            what=f"reading block {number}",
            endpoint=self.endpoint,
            policy=self.retry,
        )

    def _header(self, method: str, block: str) -> BlockRef | None:
        """A block's header by a raw JSON-RPC request (web3's result formatters took ~2 ms a
        header); None when the chain has no such block. A malformed answer is retryable, as an
        unreachable RPC is."""
        answer: Any = self.w3.provider.make_request(RPCEndpoint(method), [block, False])
        if not isinstance(answer, dict):
            raise self._malformed(block, f"a {type(answer).__name__}")
        if "error" in answer:
            raise Web3RPCError(str(answer["error"]), rpc_response=answer)
        header = answer.get("result")
        if header is None:
            return None
        try:
            return BlockRef(
                number=int(header["number"], 16),
                hash=_hex(bytes.fromhex(hex_digits(header["hash"]))),
                parent_hash=_hex(bytes.fromhex(hex_digits(header["parentHash"]))),
                timestamp=int(header["timestamp"], 16),
            )
        except (KeyError, TypeError, ValueError) as exc:
            raise self._malformed(block, f"a malformed header ({exc!r})") from None

    def _malformed(self, block: str, what: str) -> RpcUnavailable:
        return RpcUnavailable(
            f"the RPC at {self.endpoint} answered the header of block {block} with {what}; "
            "if it persists, use another RPC"
        )

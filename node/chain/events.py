"""Typed coordinator events and a chunked, adaptive ``eth_getLogs`` reader.

Every event of the ABI has a record class named like it (``RolloutsPublished``...) whose fields are
the event's arguments in snake_case plus where the log sits: ``block_number``, ``block_hash``,
``tx_hash``, ``log_index``. Logs are decoded with the committed ABI (eth_abi), so the indexer and
the node agree with the contract byte for byte.

``EventReader.read(from_block, to_block, round=..., peer=...)`` fetches a block range in chunks of
at most ``max_chunk`` blocks, halving a chunk whenever the RPC says a query returns too much, and
filters by the indexed ``round`` and peer (``peer`` or ``subject``) topics on the node's side.
"""

from __future__ import annotations

from collections.abc import Iterable, Iterator, Sequence
from functools import lru_cache
from typing import TYPE_CHECKING, Any, ClassVar, cast

from eth_abi import decode as abi_decode
from eth_abi import encode as abi_encode
from eth_typing import ABIEvent
from eth_utils import event_abi_to_log_topic, to_checksum_address
from pydantic import Field
from web3 import Web3
from web3.exceptions import Web3RPCError
from web3.types import RPCEndpoint

from node.chain.abi import abi_type_string, load_abi, snake_case
from node.chain.abi_words import WORD, LooseWord, word_decoder
from node.chain.errors import RpcError, RpcUnavailable
from node.chain.models import (
    Address,
    Bytes20,
    Bytes32,
    FrozenModel,
    HashHex,
    HexBytes,
    Rules,
    VerdictItem,
    VerdictState,
    checksummed,
)
from node.chain.rpc import (
    DEFAULT_RETRY,
    RetryPolicy,
    call_with_retry,
    endpoint_of,
    rpc_error_message,
)

_TOO_MUCH = (
    "more than",
    "too many",
    "limit exceeded",
    "response size",
    "range is too large",
    "block range",
    "query timeout",
    "exceed maximum",
    "max results",
    "too large",
)


class ChainEvent(FrozenModel):
    """Common part of every decoded log."""

    event: ClassVar[str] = ""
    block_number: int
    block_hash: HashHex
    tx_hash: HashHex
    log_index: int

    @property
    def position(self) -> tuple[int, int]:
        """Sort key: (block, log index)."""
        return (self.block_number, self.log_index)


class PeerRegistered(ChainEvent):
    event = "PeerRegistered"
    peer: Address
    name: str
    stake: int


class StakeAdded(ChainEvent):
    event = "StakeAdded"
    peer: Address
    amount: int
    total_stake: int
    counts_from_round: int = Field(description="First round in which the amount is voting weight.")


class ExitRequested(ChainEvent):
    event = "ExitRequested"
    peer: Address
    exit_round: int
    withdrawable_from_round: int = Field(description="First round in which withdraw can succeed.")


class Withdrawn(ChainEvent):
    event = "Withdrawn"
    peer: Address
    amount: int


class RolloutsPublished(ChainEvent):
    event = "RolloutsPublished"
    round: int
    peer: Address
    digest: Bytes32
    groups: int
    completions: int
    reward_sum: int
    relayer: Address | None = Field(
        description="Sponsor that sent it; None when the peer sent it itself."
    )


class EndpointAnnounced(ChainEvent):
    event = "EndpointAnnounced"
    peer: Address
    endpoint: HexBytes = Field(
        description="The announced bytes as given (node.storage.endpoint parses them); empty "
        "withdraws the peer's endpoint."
    )


class RoundArmed(ChainEvent):
    """The first seal call of a round fixed the block whose hash draws its beacon."""

    event = "RoundArmed"
    round: int
    beacon_block: int


class RoundSealed(ChainEvent):
    event = "RoundSealed"
    round: int
    beacon: Bytes20
    total_weight: int


class VerdictsCommitted(ChainEvent):
    event = "VerdictsCommitted"
    round: int
    attester: Address


class ProvenanceEvidence(ChainEvent):
    """A recomputing seat found completion ``completion`` of group ``group`` of ``subject``'s
    batch not sampled from its model, first at token index ``token``."""

    event = "ProvenanceEvidence"
    round: int
    subject: Address
    poster: Address
    group: int
    completion: int
    token: int


class _RevealedItem:
    """What VerdictRevealed and VerdictIgnored share: the item as revealed (a mixin, so both stay
    direct ChainEvent subclasses for EVENT_TYPES)."""

    if TYPE_CHECKING:  # declared by each event (as pydantic fields)
        subject: str
        checked: int
        agreed: int
        verified_reward_sum: int

    @property
    def is_flag(self) -> bool:
        return self.agreed < self.checked

    def item(self) -> VerdictItem:
        """The revealed item as the attester passed it."""
        return VerdictItem(
            subject=self.subject,
            checked=self.checked,
            agreed=self.agreed,
            verified_reward_sum=self.verified_reward_sum,
        )


class VerdictRevealed(ChainEvent, _RevealedItem):
    event = "VerdictRevealed"
    round: int
    subject: Address
    attester: Address
    checked: int
    agreed: int
    verified_reward_sum: int
    weight: int = Field(description="The attester's vote weight on this batch.")


class VerdictIgnored(ChainEvent, _RevealedItem):
    """A revealed item that did not count (the attester held no seat on the subject's committee)."""

    event = "VerdictIgnored"
    round: int
    subject: Address
    attester: Address
    checked: int
    agreed: int
    verified_reward_sum: int


class DisputeSettled(ChainEvent):
    event = "DisputeSettled"
    round: int
    subject: Address
    outcome: int = Field(description="VerdictState: 2 upheld, 3 rejected, 4 inconclusive.")
    amount: int = Field(description="Wei slashed from the subject (0 unless upheld).")
    flag_weight: int
    agree_weight: int
    settler: Address
    tip: int = Field(description="Wei of the slash paid to the settler.")

    @property
    def slashed(self) -> bool:
        """Whether the flags won (the subject was slashed)."""
        return self.outcome == VerdictState.UPHELD

    @property
    def inconclusive(self) -> bool:
        """Neither side won: nobody slashed, the flags' bonds returned, no verified reward."""
        return self.outcome == VerdictState.INCONCLUSIVE


class FlagResolved(ChainEvent):
    event = "FlagResolved"
    round: int
    subject: Address
    flagger: Address
    upheld: bool
    amount: int = Field(
        description="Upheld: the flagger's share of the slash; rejected: its forfeited bond; "
        "inconclusive: 0 (the bond came back)."
    )


class AgreementPenalized(ChainEvent):
    event = "AgreementPenalized"
    round: int
    subject: Address
    attester: Address
    reporter: Address
    amount: int
    reporter_share: int


class ParametersScheduled(ChainEvent):
    event = "ParametersScheduled"
    from_round: int
    min_stake: int
    rules: Rules


class Claimed(ChainEvent):
    event = "Claimed"
    account: Address
    amount: int


class Paused(ChainEvent):
    event = "Paused"
    account: Address


class Unpaused(ChainEvent):
    event = "Unpaused"
    account: Address


class OwnershipTransferStarted(ChainEvent):
    event = "OwnershipTransferStarted"
    previous_owner: Address
    new_owner: Address


class OwnershipTransferred(ChainEvent):
    event = "OwnershipTransferred"
    previous_owner: Address
    new_owner: Address


EVENT_TYPES: dict[str, type[ChainEvent]] = {cls.event: cls for cls in ChainEvent.__subclasses__()}
#: The events of the protocol itself (the rest are administration).
PROTOCOL_EVENTS: tuple[type[ChainEvent], ...] = (
    PeerRegistered,
    StakeAdded,
    ExitRequested,
    Withdrawn,
    RolloutsPublished,
    EndpointAnnounced,
    RoundArmed,
    RoundSealed,
    VerdictsCommitted,
    ProvenanceEvidence,
    VerdictRevealed,
    VerdictIgnored,
    DisputeSettled,
    FlagResolved,
    AgreementPenalized,
    ParametersScheduled,
    Claimed,
)

# ---------------------------------------------------------------------------------------- decoding


class _EventSpec:
    """What decoding one event needs, derived from its ABI entry."""

    def __init__(self, abi: dict[str, Any]) -> None:
        self.name = abi["name"]
        self.cls = EVENT_TYPES[self.name]
        self.topic0 = bytes(event_abi_to_log_topic(cast(ABIEvent, abi)))
        self.inputs = [
            (snake_case(i["name"]), abi_type_string(i), i["indexed"]) for i in abi["inputs"]
        ]
        indexed = [name for name, _, is_indexed in self.inputs if is_indexed]
        self.round_topic = indexed.index("round") + 1 if "round" in indexed else None
        peer_names = [n for n in ("peer", "subject", "attester") if n in indexed]
        self.peer_topic = indexed.index(peer_names[0]) + 1 if peer_names else None
        self.topic_count = len(indexed) + 1
        self.data_size = WORD * (len(self.inputs) - len(indexed))
        words = [word_decoder(abi_type) for _, abi_type, _ in self.inputs]
        self.words = None if None in words else words  # every input one word: no eth_abi

    def decode(self, log: Any) -> ChainEvent:
        fields = self.word_fields(log) if self.words is not None else None
        if fields is None:
            fields = self.abi_fields(log)
        return self.cls(
            block_number=log["blockNumber"],
            block_hash="0x" + bytes(log["blockHash"]).hex(),
            tx_hash="0x" + bytes(log["transactionHash"]).hex(),
            log_index=log["logIndex"],
            **fields,
        )

    def word_fields(self, log: Any) -> dict[str, Any] | None:
        """The event's values read word by word (``abi_words``); None where eth_abi must decide
        (a topic or data length other than the event's, a word it refuses)."""
        assert self.words is not None
        topics, data = log["topics"], bytes(log["data"])
        if len(topics) != self.topic_count or len(data) != self.data_size:
            return None
        fields, topic, offset = {}, 1, 0
        try:
            for (name, abi_type, is_indexed), decode in zip(self.inputs, self.words, strict=True):
                if is_indexed:
                    word = bytes(topics[topic])
                    topic += 1
                    if len(word) != WORD:
                        return None
                else:
                    word, offset = data[offset : offset + WORD], offset + WORD
                fields[name] = _python_value(self.name, name, abi_type, decode(word))
        except LooseWord:
            return None
        return fields

    def abi_fields(self, log: Any) -> dict[str, Any]:
        """The event's values decoded by eth_abi (raises on what it refuses)."""
        topics = iter(log["topics"][1:])
        # a string is decoded as its bytes (the same encoding), then as lenient UTF-8 (below)
        data_types = [_as_bytes(t) for _, t, is_indexed in self.inputs if not is_indexed]
        data_values = iter(abi_decode(data_types, bytes(log["data"])))
        fields = {}
        for name, abi_type, is_indexed in self.inputs:
            value = (
                abi_decode([abi_type], bytes(next(topics)))[0] if is_indexed else next(data_values)
            )
            fields[name] = _python_value(self.name, name, abi_type, value)
        return fields


def _as_bytes(abi_type: str) -> str:
    return "bytes" if abi_type == "string" else abi_type


def _python_value(event: str, name: str, abi_type: str, value: Any) -> Any:
    if abi_type == "string" and isinstance(value, bytes):
        # The contract takes any bytes as a name: invalid UTF-8 shows as U+FFFD instead of
        # making the event undecodable (and its peer unknown to every reader).
        return value.decode("utf-8", errors="replace")
    if abi_type == "address":
        address = checksummed(value)
        if event == "RolloutsPublished" and name == "relayer" and int(address, 16) == 0:
            return None
        return address
    if event == "ParametersScheduled" and name == "rules":
        return Rules.from_abi(value)
    return value


@lru_cache(maxsize=1)
def _specs() -> dict[bytes, _EventSpec]:
    return {
        spec.topic0: spec
        for spec in (_EventSpec(item) for item in load_abi() if item["type"] == "event")
    }


def decode_log(log: Any) -> ChainEvent | None:
    """The typed event of a coordinator log; None for a log this ABI does not know."""
    topics = log["topics"]
    spec = _specs().get(bytes(topics[0])) if topics else None
    return spec.decode(log) if spec else None


# ------------------------------------------------------------------------------------------ reading


class _RangeTooLarge(Exception):
    """The RPC refused a getLogs range as too large (internal: triggers halving)."""


class EventReader:
    """Reads coordinator events over block ranges, in adaptive chunks."""

    def __init__(
        self, w3: Web3, address: str, *, max_chunk: int = 2_000, retry: RetryPolicy = DEFAULT_RETRY
    ) -> None:
        if max_chunk < 1:
            raise ValueError("max_chunk must be at least 1")
        self.w3 = w3
        self.address = to_checksum_address(address)
        self.max_chunk = max_chunk
        self.retry = retry

    def read(
        self,
        from_block: int,
        to_block: int,
        *,
        events: Iterable[type[ChainEvent]] | None = None,
        round: int | None = None,
        peer: str | None = None,
    ) -> list[ChainEvent]:
        """All matching events in ``[from_block, to_block]``, in chain order.

        ``events`` restricts the types (default: all). With ``round``, only events indexed by round
        (RolloutsPublished, RoundSealed, VerdictsCommitted, ProvenanceEvidence, VerdictRevealed,
        VerdictIgnored, DisputeSettled, FlagResolved, AgreementPenalized) can match; with
        ``peer``, only events indexed by a peer, a subject or (for VerdictsCommitted) an
        attester.
        """
        found = [
            event
            for chunk in self.iter_chunks(
                from_block, to_block, events=events, round=round, peer=peer
            )
            for event in chunk
        ]
        return found

    def iter_chunks(
        self,
        from_block: int,
        to_block: int,
        *,
        events: Iterable[type[ChainEvent]] | None = None,
        round: int | None = None,
        peer: str | None = None,
    ) -> Iterator[list[ChainEvent]]:
        """The events of ``read``, one sorted list per block chunk (for callers that checkpoint)."""
        queries = _topic_queries(_select(events, round, peer), round, peer)
        if not queries or from_block > to_block:
            return
        start, size = from_block, self.max_chunk
        while start <= to_block:
            end = min(to_block, start + size - 1)
            try:
                logs = [log for topics in queries for log in self._get_logs(start, end, topics)]
            except _RangeTooLarge as exc:
                if end == start:
                    raise RpcError(
                        f"the RPC at {endpoint_of(self.w3)} refuses the logs of block {start} "
                        f"alone ({exc}); use an RPC without that limit"
                    ) from None
                size = max(1, (end - start + 1) // 2)
                continue
            decoded = (self._decode(log) for log in logs if not log.get("removed", False))
            yield sorted(
                {e.position: e for e in decoded if e is not None}.values(), key=lambda e: e.position
            )
            start = end + 1

    def _decode(self, log: Any) -> ChainEvent | None:
        """One log's event (None: unknown to this ABI); raises on contents its model refuses."""
        return decode_log(log)

    def _get_logs(self, start: int, end: int, topics: list[Any]) -> list[dict[str, Any]]:
        """One ``eth_getLogs`` as a raw JSON-RPC request, its logs parsed by ``raw_log``: web3's
        result formatters (AttributeDicts, HexBytes, per-field type checks) took as long as
        decoding the events (docs/BENCHMARKS.md, *Indexer*)."""
        params = {
            "address": self.address,
            "fromBlock": hex(start),
            "toBlock": hex(end),
            "topics": topics,
        }

        def fetch() -> list[dict[str, Any]]:
            answer: Any = self.w3.provider.make_request(RPCEndpoint("eth_getLogs"), [params])
            if not isinstance(answer, dict):
                raise _malformed(self.w3, start, end, f"a {type(answer).__name__}")
            if "error" in answer:
                error = Web3RPCError(str(answer["error"]), rpc_response=answer)
                message = rpc_error_message(error)
                lowered = message.lower()
                if "rate" not in lowered and any(m in lowered for m in _TOO_MUCH):
                    raise _RangeTooLarge(message) from error
                raise error
            result = answer.get("result")
            if not isinstance(result, list):
                raise _malformed(self.w3, start, end, f"a result of {type(result).__name__}")
            try:
                return [raw_log(entry) for entry in result]
            except (KeyError, TypeError, ValueError) as exc:
                raise _malformed(self.w3, start, end, f"a malformed log ({exc!r})") from None

        return call_with_retry(
            fetch,
            what=f"reading logs of blocks {start}-{end}",
            endpoint=endpoint_of(self.w3),
            policy=self.retry,
        )


def raw_log(entry: dict[str, Any]) -> dict[str, Any]:
    """A JSON-RPC log object as ``decode_log`` reads it: topics, data and hashes as bytes,
    numbers as ints. Raises KeyError, TypeError or ValueError on a malformed one."""
    return {
        "topics": [bytes.fromhex(hex_digits(topic)) for topic in entry["topics"]],
        "data": bytes.fromhex(hex_digits(entry["data"])),
        "blockNumber": int(entry["blockNumber"], 16),
        "blockHash": bytes.fromhex(hex_digits(entry["blockHash"])),
        "transactionHash": bytes.fromhex(hex_digits(entry["transactionHash"])),
        "logIndex": int(entry["logIndex"], 16),
        "removed": entry.get("removed") is True,
    }


def hex_digits(value: Any) -> str:
    """The digits of a 0x-prefixed hex string; ValueError for anything else."""
    if not isinstance(value, str) or not value.startswith("0x"):
        raise ValueError(f"not 0x-prefixed hex: {repr(value)[:24]}")
    return value[2:]


def _malformed(w3: Web3, start: int, end: int, what: str) -> RpcUnavailable:
    """Retryable, as a failed connection is: a proxy's garbage answer may pass, and a reader
    (the indexer's included) waits it out rather than stopping for good."""
    return RpcUnavailable(
        f"the RPC at {endpoint_of(w3)} answered the logs of blocks {start}-{end} with {what}, "
        "not JSON-RPC logs; if it persists, use another RPC"
    )


def _select(
    events: Iterable[type[ChainEvent]] | None, round: int | None, peer: str | None
) -> list[_EventSpec]:
    wanted = {cls.event for cls in events} if events is not None else set(EVENT_TYPES)
    chosen = [s for s in _specs().values() if s.name in wanted]
    if round is not None:
        chosen = [s for s in chosen if s.round_topic is not None]
    if peer is not None:
        chosen = [s for s in chosen if s.peer_topic is not None]
    return chosen


def _topic_queries(
    specs: Sequence[_EventSpec], round: int | None, peer: str | None
) -> list[list[Any]]:
    """One topics filter per distinct (round position, peer position) among the chosen events."""
    groups: dict[tuple[int | None, int | None], list[bytes]] = {}
    for spec in specs:
        key = (
            spec.round_topic if round is not None else None,
            spec.peer_topic if peer is not None else None,
        )
        groups.setdefault(key, []).append(spec.topic0)
    queries = []
    for (round_pos, peer_pos), topic0s in groups.items():
        topics: list[Any] = [["0x" + t.hex() for t in topic0s]]
        for position, value in (
            (round_pos, _word("uint64", round)),
            (peer_pos, _word("address", peer)),
        ):
            if position is not None:
                topics.extend([None] * (position + 1 - len(topics)))
                topics[position] = value
        queries.append(topics)
    return queries


def _word(abi_type: str, value: Any) -> str | None:
    if value is None:
        return None
    if abi_type == "address":
        value = to_checksum_address(value)
    return "0x" + abi_encode([abi_type], [value]).hex()

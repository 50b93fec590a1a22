"""One-word ABI values decoded without eth_abi (node.chain.abi_words) give what eth_abi's strict
decoder gives, and refuse what it refuses; an event decoded word by word equals the same event
decoded by eth_abi, and a log eth_abi refuses is refused with eth_abi's own error."""

from __future__ import annotations

import random

import pytest
from eth_abi import decode, encode
from eth_abi.exceptions import DecodingError

from node.chain.abi_words import LooseWord, word_decoder
from node.chain.events import _specs, decode_log

TYPES = [
    *(f"uint{bits}" for bits in (8, 16, 32, 64, 96, 256)),
    *(f"int{bits}" for bits in (8, 64, 256)),
    "address",
    "bool",
    *(f"bytes{size}" for size in (1, 20, 32)),
]


def words(rng: random.Random, abi_type: str) -> list[bytes]:
    """Valid encodings of ``abi_type``'s edge values, and words that differ from them in one
    byte of padding or value (most of them invalid), and random words."""
    valid = [encode([abi_type], [value]) for value in edges(abi_type)]
    out = list(valid)
    for word in valid:
        for position in (0, 11, 12, 19, 20, 30, 31):
            for byte in (0x00, 0x01, 0x80, 0xFF):
                changed = bytearray(word)
                changed[position] = byte
                out.append(bytes(changed))
    out += [rng.randbytes(32) for _ in range(50)]
    return out


def edges(abi_type: str) -> list:
    if abi_type.startswith("uint"):
        bits = int(abi_type[4:])
        return [0, 1, 2**bits - 1, 2 ** (bits - 1)]
    if abi_type.startswith("int"):
        bits = int(abi_type[3:])
        return [0, 1, -1, 2 ** (bits - 1) - 1, -(2 ** (bits - 1))]
    if abi_type == "address":
        return ["0x" + "00" * 20, "0x70997970C51812dc3A010C7d01b50e0d17dc79C8", "0x" + "ff" * 20]
    if abi_type == "bool":
        return [False, True]
    size = int(abi_type[5:])
    return [bytes(size), b"\xff" * size, bytes(range(1, size + 1))]


@pytest.mark.parametrize("abi_type", TYPES)
def test_a_word_decodes_as_eth_abi_decodes_it_or_is_refused_as_it_is(abi_type: str) -> None:
    decoder = word_decoder(abi_type)
    assert decoder is not None
    refused = accepted = 0
    for word in words(random.Random(abi_type), abi_type):
        try:
            (expected,) = decode([abi_type], word)
        except DecodingError:
            with pytest.raises(LooseWord):
                decoder(word)
            refused += 1
            continue
        value = decoder(word)
        assert (type(value), value) == (type(expected), expected), word.hex()
        accepted += 1
    assert accepted and (refused or abi_type in ("uint256", "int256", "bytes32"))  # no padding


@pytest.mark.parametrize("abi_type", ["string", "bytes", "uint256[]", "(uint64,uint16)", "uint7"])
def test_what_is_not_one_word_is_left_to_eth_abi(abi_type: str) -> None:
    assert word_decoder(abi_type) is None


def static_specs() -> list:
    return [spec for spec in _specs().values() if spec.words is not None]


def test_most_events_and_the_busiest_are_read_word_by_word() -> None:
    names = {spec.name for spec in static_specs()}
    assert {"VerdictRevealed", "RolloutsPublished", "VerdictsCommitted", "RoundSealed"} <= names
    assert not names & {"PeerRegistered", "EndpointAnnounced", "ParametersScheduled"}


@pytest.mark.parametrize("spec", static_specs(), ids=lambda spec: spec.name)
def test_an_event_read_word_by_word_equals_eth_abis_reading(spec) -> None:
    """Logs of the event built from valid and tampered words: the word path gives eth_abi's
    fields, or steps aside where eth_abi refuses (and decode_log then raises eth_abi's error)."""
    rng = random.Random(spec.name)
    pools = [words(rng, abi_type) for _, abi_type, _ in spec.inputs]
    stepped_aside = 0
    for _ in range(300):
        chosen = [rng.choice(pool) for pool in pools]
        topics = [spec.topic0] + [w for w, (_, _, ix) in zip(chosen, spec.inputs) if ix]
        data = b"".join(w for w, (_, _, ix) in zip(chosen, spec.inputs) if not ix)
        log = {"topics": topics, "data": data, "blockNumber": 1, "blockHash": b"\x33" * 32,
               "transactionHash": b"\x44" * 32, "logIndex": 0}  # fmt: skip
        try:
            expected = spec.abi_fields(log)
        except (DecodingError, ValueError) as exc:
            assert spec.word_fields(log) is None
            with pytest.raises(type(exc), match=None):
                decode_log(log)
            stepped_aside += 1
            continue
        assert spec.word_fields(log) == expected
        assert decode_log(log).model_dump() == spec.cls(
            block_number=1, block_hash="0x" + "33" * 32, tx_hash="0x" + "44" * 32, log_index=0,
            **expected,
        ).model_dump()  # fmt: skip
    assert stepped_aside  # tampered words were among them


def test_a_log_of_another_length_is_left_to_eth_abi() -> None:
    spec = next(s for s in static_specs() if s.name == "VerdictsCommitted")
    topics = [spec.topic0, encode(["uint64"], [3]), encode(["address"], ["0x" + "11" * 20])]
    log = {"topics": topics, "data": b"", "blockNumber": 1, "blockHash": b"\x33" * 32,
           "transactionHash": b"\x44" * 32, "logIndex": 0}  # fmt: skip
    assert spec.word_fields(log) is not None
    assert spec.word_fields({**log, "data": bytes(32)}) is None  # eth_abi ignores the extra word
    assert decode_log({**log, "data": bytes(32)}) == decode_log(log)
    assert spec.word_fields({**log, "topics": topics[:2]}) is None
    short = {**log, "topics": [*topics[:2], topics[2][:31]]}
    assert spec.word_fields(short) is None
    with pytest.raises(DecodingError):
        decode_log(short)

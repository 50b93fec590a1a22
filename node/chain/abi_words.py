"""Static ABI words decoded as eth_abi's strict decoder does, without its per-call machinery.

eth_abi builds a decoder stack, a stream and a padding check for every value it decodes: more
than half of the time it took to read a chain's logs (docs/BENCHMARKS.md, "Indexer"). Most of the
coordinator's events hold only one-word values (``uintN``, ``intN``, ``address``, ``bool``,
``bytesN``), which need nothing of that: a word is valid exactly when its padding is what
eth_abi's strict mode demands, and then its value is a slice or an int.

``word_decoder(abi_type)`` gives a function from a 32-byte word to the value eth_abi would
return (the same Python type: an int, a bool, bytes, or a lower-case 0x address), raising
``LooseWord`` where eth_abi would raise; None for a type that is not one word (strings, bytes,
arrays, tuples). Callers fall back to eth_abi on ``LooseWord`` so that its error, and its text,
stay the ones a reader reports.
"""

from __future__ import annotations

import re
from collections.abc import Callable
from functools import partial
from typing import Any

WORD = 32


class LooseWord(ValueError):
    """A word whose padding eth_abi's strict decoder refuses."""


def word_decoder(abi_type: str) -> Callable[[bytes], Any] | None:
    """The strict decoder of one word of ``abi_type``; None when the type is not one word."""
    if abi_type == "address":
        return _address
    if abi_type == "bool":
        return _bool
    size = _size(abi_type, "uint", 8, 256, 8)
    if size is not None:
        return partial(_uint, size)
    size = _size(abi_type, "int", 8, 256, 8)
    if size is not None:
        return partial(_int, size)
    size = _size(abi_type, "bytes", 1, 32, 1)
    if size is not None:
        return partial(_bytes, size)
    return None


def _size(abi_type: str, prefix: str, low: int, high: int, step: int) -> int | None:
    match = re.fullmatch(rf"{prefix}(\d+)", abi_type)
    if match is None:
        return None
    size = int(match.group(1))
    return size if low <= size <= high and size % step == 0 else None


def _uint(bits: int, word: bytes) -> int:
    value = int.from_bytes(word, "big")
    if value >> bits:
        raise LooseWord(f"uint{bits} with non-zero padding")
    return value


def _int(bits: int, word: bytes) -> int:
    value = int.from_bytes(word, "big", signed=True)
    bound = 1 << (bits - 1)
    if not -bound <= value < bound:
        raise LooseWord(f"int{bits} padding is not its sign")
    return value


def _address(word: bytes) -> str:
    if any(word[:12]):
        raise LooseWord("address with non-zero padding")
    return "0x" + word[12:].hex()


def _bool(word: bytes) -> bool:
    value = int.from_bytes(word, "big")
    if value > 1:
        raise LooseWord("bool neither 0 nor 1")
    return value == 1


def _bytes(size: int, word: bytes) -> bytes:
    if any(word[size:]):
        raise LooseWord(f"bytes{size} with non-zero padding")
    return word[:size]

"""Revert data -> the matching :class:`~node.chain.errors.ContractRevert` subclass.

Revert data is a 4-byte selector plus ABI-encoded arguments. Selectors come from the committed ABI's
custom errors (each mapped to its class in ``node.chain.reverts``); ``Error(string)`` and
``Panic(uint256)`` become a plain ContractRevert with the reason; anything else (unknown selector,
truncated data, no data) a plain ContractRevert that keeps the raw bytes.
"""

from __future__ import annotations

from functools import lru_cache
from typing import Any

from eth_abi import decode as abi_decode
from eth_abi.exceptions import DecodingError
from eth_utils import keccak, to_checksum_address

import node.chain.reverts  # noqa: F401 - defining the classes registers them
from node.chain.abi import abi_type_string, load_abi
from node.chain.errors import ContractRevert

_ERROR_STRING_SELECTOR = bytes.fromhex("08c379a0")  # Error(string)
_PANIC_SELECTOR = bytes.fromhex("4e487b71")  # Panic(uint256)
_PANIC_CODES = {
    0x01: "assertion failed",
    0x11: "arithmetic overflow or underflow",
    0x12: "division by zero",
    0x21: "invalid enum value",
    0x22: "bad storage byte array",
    0x31: "pop on an empty array",
    0x32: "array index out of bounds",
    0x41: "out of memory",
    0x51: "call to an invalid function",
}


@lru_cache(maxsize=1)
def error_selectors() -> dict[bytes, tuple[str, tuple[str, ...]]]:
    """Selector -> (error name, argument types) for every custom error in the committed ABI."""
    table = {}
    for item in load_abi():
        if item["type"] == "error":
            types = tuple(abi_type_string(i) for i in item["inputs"])
            selector = keccak(text=f"{item['name']}({','.join(types)})")[:4]
            table[selector] = (item["name"], types)
    return table


def _normalise(value: Any, abi_type: str) -> Any:
    return to_checksum_address(value) if abi_type == "address" else value


def decode_revert(data: bytes | str | None, *, now: int | None = None) -> ContractRevert:
    """Turns raw revert data into the matching exception (not raised: the caller raises it).

    ``now`` is the chain's current time, used only to say how long is left until a deadline.
    """
    raw = _as_bytes(data)
    selector, body = raw[:4], raw[4:]
    known = error_selectors().get(selector)
    try:
        if known is not None and known[0] in ContractRevert.registry:
            name, types = known
            values = [
                _normalise(v, t) for v, t in zip(abi_decode(list(types), body), types, strict=True)
            ]
            return ContractRevert.registry[name](*values, data=raw, now=now)
        if selector == _ERROR_STRING_SELECTOR:
            return ContractRevert(data=raw, reason=abi_decode(["string"], body)[0], now=now)
        if selector == _PANIC_SELECTOR:
            code = abi_decode(["uint256"], body)[0]
            return ContractRevert(
                data=raw, reason=f"panic 0x{code:02x} ({_PANIC_CODES.get(code, 'unknown')})"
            )
    except DecodingError:
        pass
    return ContractRevert(data=raw, now=now)


def _as_bytes(data: bytes | str | None) -> bytes:
    if data is None:
        return b""
    if isinstance(data, bytes):
        return data
    text = data.removeprefix("0x")
    try:
        return bytes.fromhex(text)
    except ValueError:
        return b""

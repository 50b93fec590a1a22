"""Strict JSON parsing of untrusted bytes: every failure is ``BatchRejected(bad_json)``.

Stricter than ``json.loads``: the input must be valid UTF-8 (no BOM, no encoded surrogates);
duplicate object keys, ``NaN``/``Infinity``, numbers that overflow to infinity and integer
literals longer than ``MAX_INT_DIGITS`` are refused; nesting deeper than ``MAX_JSON_DEPTH`` is
refused by a linear pre-scan, before the recursive parser could hit Python's recursion limit.
Escaped lone surrogates (``"\\ud800"``) parse, but no canonical encoding exists for them, so the
schema and the canonical check reject them later.
"""

from __future__ import annotations

import json
import math
import re
from typing import Any

from node.rollouts.limits import MAX_INT_DIGITS, MAX_JSON_DEPTH
from node.rollouts.reasons import BatchRejected, RejectReason

# A JSON string (skipped whole: brackets inside do not count) or a bracket. An unterminated
# string runs to the end of the text, so the pattern matches at every quote it starts from and
# finditer never rescans: the scan stays linear even for hostile input.
_TOKENS = re.compile(r'"[^"\\]*(?:\\.[^"\\]*)*(?:"|\\?\Z)|[\[\]{}]', re.DOTALL)


class _Invalid(Exception):
    """Raised inside json.loads' hooks; turned into BatchRejected(bad_json)."""


def parse_strict_json(data: bytes) -> Any:
    """Parses untrusted bytes as one strict JSON value; BatchRejected(bad_json) otherwise."""
    try:
        text = bytes(data).decode("utf-8", errors="strict")
    except UnicodeDecodeError as error:
        raise _rejected(f"not valid UTF-8 at byte {error.start}") from None
    if text.startswith("\ufeff"):
        raise _rejected("starts with a byte-order mark")
    check_depth(text)
    try:
        return json.loads(
            text,
            object_pairs_hook=_object_without_duplicates,
            parse_constant=_refuse_constant,
            parse_float=_finite_float,
            parse_int=_bounded_int,
        )
    except _Invalid as error:
        raise _rejected(str(error)) from None
    except (ValueError, RecursionError) as error:  # JSONDecodeError is a ValueError
        raise _rejected(str(error) or type(error).__name__) from None


def check_depth(text: str, limit: int = MAX_JSON_DEPTH) -> None:
    """BatchRejected(bad_json) when arrays/objects nest deeper than ``limit`` (linear scan)."""
    depth = 0
    for match in _TOKENS.finditer(text):
        token = match.group()
        if token in "[{":
            depth += 1
            if depth > limit:
                raise _rejected(f"nested deeper than {limit} at character {match.start()}")
        elif token in "]}":
            depth -= 1


def _object_without_duplicates(pairs: list[tuple[str, Any]]) -> dict[str, Any]:
    result: dict[str, Any] = {}
    for key, value in pairs:
        if key in result:
            raise _Invalid(f"duplicate key {key[:64]!r}")
        result[key] = value
    return result


def _refuse_constant(name: str) -> Any:
    raise _Invalid(f"{name} is not allowed")


def _finite_float(literal: str) -> float:
    value = float(literal)
    if not math.isfinite(value):
        raise _Invalid(f"number {literal[:32]} overflows a double")
    return value


def _bounded_int(literal: str) -> int:
    if len(literal.lstrip("-")) > MAX_INT_DIGITS:
        raise _Invalid(f"integer literal longer than {MAX_INT_DIGITS} digits")
    return int(literal)


def _rejected(detail: str) -> BatchRejected:
    return BatchRejected(RejectReason.BAD_JSON, detail)

"""Canonical JSON: the one byte encoding of a JSON value that every node produces identically.

Rules (docs/PROTOCOL.md, "Canonical JSON"; the choices the v1 protocol left open are marked *):

- UTF-8, no byte-order mark; object keys sorted by code point (Python's ``sorted`` on ``str``,
  which equals UTF-16 order for the protocol's ASCII field names); separators ``,`` and ``:``
  with no whitespace anywhere.
- * Strings are written as Python's ``json`` module writes them with ``ensure_ascii=False``:
  only ``"``, ``\\`` and the control characters below U+0020 are escaped (``\\b \\f \\n \\r \\t``
  in their short forms, the others as ``\\u00xx`` with lower-case hex); every other character,
  U+007F and U+2028 included, is written as its raw UTF-8 bytes. Strings that are not valid
  Unicode (lone surrogates) cannot be encoded and are refused.
- * Integers in decimal without leading zeros; ``true``, ``false``, ``null``.
- * Floats as Python's ``repr`` writes them: the shortest digit string that round-trips to the
  same IEEE-754 double, always with a ``.`` or an exponent (``0.0``, ``1.0``, ``0.25``,
  ``1e-05``, exponent form below 1e-4 and from 1e16 on). NaN and the infinities are refused, and
  so is ``-0.0`` (the schema normalises a zero reward to ``0.0`` before encoding).

Two dictionaries with the same content give the same bytes whatever order their keys were
inserted in, in any process on any machine.
"""

from __future__ import annotations

import json
import math
from typing import Any

from pydantic import BaseModel

_ENCODER = json.JSONEncoder(
    ensure_ascii=False,
    allow_nan=False,
    sort_keys=True,
    separators=(",", ":"),
    check_circular=True,
)


def canonical_json(obj: Any) -> bytes:
    """The canonical bytes of a JSON value (dict, list, str, int, float, bool, None) or a model.

    A pydantic model is encoded as ``model_dump(mode="json", by_alias=True)``.
    ValueError for anything without a canonical form: NaN/Infinity, ``-0.0``, non-string keys,
    other types, strings with lone surrogates.
    """
    if isinstance(obj, BaseModel):
        obj = obj.model_dump(mode="json", by_alias=True)
    _check(obj)
    try:
        return _ENCODER.encode(obj).encode("utf-8")
    except UnicodeEncodeError as error:
        raise ValueError(f"a string is not valid Unicode (lone surrogate): {error}") from None


def _check(obj: Any) -> None:
    """Refuses what json would encode non-canonically or not at all (iterative: no recursion)."""
    stack = [obj]
    while stack:
        value = stack.pop()
        if isinstance(value, dict):
            for key, item in value.items():
                if not isinstance(key, str):
                    raise ValueError(f"object keys must be strings, got {type(key).__name__}")
                stack.append(item)
        elif isinstance(value, list):
            stack.extend(value)
        elif isinstance(value, float):
            if not math.isfinite(value):
                raise ValueError(f"{value!r} has no JSON form")
            if value == 0.0 and math.copysign(1.0, value) < 0:
                raise ValueError("-0.0 has no canonical form; use 0.0")
        elif value is None or isinstance(value, (str, int)):  # bool is an int
            continue
        else:
            raise ValueError(f"{type(value).__name__} is not a JSON type")

"""canonical_json: the byte rules, key order, floats, refusals, and identity across processes."""

from __future__ import annotations

import json
import subprocess
import sys
from pathlib import Path

import pytest
from hypothesis import given
from hypothesis import strategies as st

from node.rollouts import canonical_json, encode_batch
from tests.rollouts.factories import make_batch


def test_sorted_keys_no_whitespace_utf8() -> None:
    assert (
        canonical_json({"b": 1, "a": [True, None, "é"]}) == '{"a":[true,null,"é"],"b":1}'.encode()
    )


def test_key_insertion_order_does_not_matter() -> None:
    one = {"z": {"y": 1, "x": 2}, "a": [1, {"c": 3, "b": 4}]}
    two = {"a": [1, {"b": 4, "c": 3}], "z": {"x": 2, "y": 1}}
    assert canonical_json(one) == canonical_json(two)


def test_model_and_its_dict_encode_alike() -> None:
    batch = make_batch()
    as_dict = json.loads(canonical_json(batch))
    shuffled = dict(reversed(list(as_dict.items())))
    shuffled["body"] = dict(reversed(list(as_dict["body"].items())))
    assert canonical_json(shuffled) == canonical_json(batch) == encode_batch(batch)


@pytest.mark.parametrize(
    ("value", "text"),
    [
        (0.0, "0.0"),
        (1.0, "1.0"),
        (0.5, "0.5"),
        (0.1, "0.1"),
        (1 / 3, "0.3333333333333333"),
        (1e-05, "1e-05"),
        (0.0001, "0.0001"),
        (2.5e-300, "2.5e-300"),
        (1e16, "1e+16"),
        (12, "12"),
        (-3, "-3"),
        (2**64 - 1, "18446744073709551615"),
    ],
)
def test_numbers_are_python_repr(value: float, text: str) -> None:
    assert canonical_json([value]) == f"[{text}]".encode()


@pytest.mark.parametrize(
    ("value", "text"),
    [
        ('"\\', r'"\"\\"'),
        ("\n\r\t\b\f", r'"\n\r\t\b\f"'),
        ("\x00\x1f", r'"\u0000\u001f"'),
        ("\x7f\u2028😀", '"\x7f\u2028😀"'),
        ("/", '"/"'),
    ],
)
def test_string_escapes(value: str, text: str) -> None:
    assert canonical_json(value) == text.encode("utf-8")


@pytest.mark.parametrize(
    "value",
    [
        float("nan"),
        float("inf"),
        -float("inf"),
        -0.0,
        {"a": [-0.0]},
        {1: "non-string key"},
        ("tuple",),
        b"bytes",
        {"x": {1, 2}},
        "lone \ud800 surrogate",
    ],
)
def test_refuses_what_has_no_canonical_form(value: object) -> None:
    with pytest.raises(ValueError):
        canonical_json(value)


json_values = st.recursive(
    st.none()
    | st.booleans()
    | st.integers(-(2**70), 2**70)
    | st.floats(allow_nan=False, allow_infinity=False).filter(lambda x: str(x) != "-0.0")
    | st.text(),
    lambda inner: st.lists(inner, max_size=4)
    | st.dictionaries(st.text(max_size=8), inner, max_size=4),
    max_leaves=20,
)


@given(json_values)
def test_parses_back_to_the_same_value(value: object) -> None:
    data = canonical_json(value)
    assert json.loads(data) == value
    assert canonical_json(json.loads(data)) == data


def test_identical_bytes_in_another_process() -> None:
    here = canonical_json(make_batch(groups=3, text='ünïcødé "q" \n\t 😀'))
    script = (
        "import sys\n"
        "from node.rollouts import canonical_json\n"
        "from tests.rollouts.factories import make_batch\n"
        "sys.stdout.buffer.write(canonical_json(make_batch(groups=3, "
        "text='ünïcødé \"q\" \\n\\t 😀')))\n"
    )
    other = subprocess.run(
        [sys.executable, "-c", script],
        capture_output=True,
        check=True,
        env={"PYTHONHASHSEED": "12345", "PYTHONIOENCODING": "latin-1", "LC_ALL": "C"},
        cwd=Path(__file__).resolve().parents[2],
    )
    assert other.stdout == here

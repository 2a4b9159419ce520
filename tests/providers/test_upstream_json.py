"""An upstream body reads exactly as the json module reads it, whichever parser reads it."""

from __future__ import annotations

import json
import math
from typing import Any

import pytest
from hypothesis import given
from hypothesis import strategies as st

from routing.providers import MalformedResponse
from routing.providers.base import load_json_body

BODIES = [
    b'{"id":"chatcmpl-1","choices":[{"index":0,"message":{"role":"assistant","content":"Hi"}}],"usage":{}}',
    b'{"seed": 123456789012345678901234567890}',  # past 64 bits: an int, never a float
    b'{"n": -9223372036854775809}',  # one past the smallest 64-bit int: 19 digits
    b'{"n": 18446744073709551616}',
    b'{"n": 9223372036854775807, "m": -9223372036854775808}',
    b'{"id": "call_12345678901234567890", "n": 1}',  # a long digit run inside a string
    b'{"a": 1, "a": 2}',
    b'{"x": NaN, "y": Infinity, "z": -Infinity}',
    b'{"big": 1e400, "small": 5e-324, "neg": -0.0, "zero": -0}',
    b'{"text": "\\ud800 lone"}',
    b'{"text": "\\ud83d\\ude00 pair", "raw": "\xc3\xa9"}',
    b'\xef\xbb\xbf{"bom": true}',
    '{"utf16": "yes"}'.encode("utf-16"),
    b'  [1, 2.5, "three", null, true, false, {}]  ',
    b'{"x": 0.1, "y": 1E2, "z": 3.141592653589793}',
]


def _same(left: Any, right: Any) -> bool:
    """Equal values of equal types, NaN equal to NaN (json reads it, and NaN != NaN)."""
    if type(left) is not type(right):
        return False
    if isinstance(left, float) and math.isnan(left):
        return math.isnan(right)
    if isinstance(left, dict):
        return list(left) == list(right) and all(_same(left[k], right[k]) for k in left)
    if isinstance(left, list):
        return len(left) == len(right) and all(_same(a, b) for a, b in zip(left, right, strict=True))
    return bool(left == right)


@pytest.mark.parametrize("body", BODIES)
def test_a_body_reads_as_the_json_module_reads_it(body: bytes) -> None:
    assert _same(load_json_body(body), json.loads(body))


@pytest.mark.parametrize("body", [b"", b"{", b'{"a": 1,}', b"\xff\xfe\x00", b"{'a': 1}"])
def test_what_is_not_json_is_a_malformed_response(body: bytes) -> None:
    with pytest.raises(MalformedResponse):
        load_json_body(body)


_values = st.recursive(
    st.none() | st.booleans() | st.integers(min_value=-(2**80), max_value=2**80)
    | st.floats(allow_nan=True, allow_infinity=True) | st.text(),
    lambda children: st.lists(children, max_size=4) | st.dictionaries(st.text(max_size=8), children, max_size=4),
    max_leaves=20,
)


@given(_values)
def test_any_value_the_json_module_writes_reads_back_the_same(value: Any) -> None:
    body = json.dumps(value).encode()
    assert _same(load_json_body(body), json.loads(body))

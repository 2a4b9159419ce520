"""compact_json: the bytes the json module's compact encoding would send, for every value it could encode."""

from __future__ import annotations

import json
from typing import Any

import pytest

from routing.core.compact_json import compact_json


def stdlib(value: Any) -> bytes:
    return json.dumps(value, ensure_ascii=False, separators=(",", ":")).encode()


@pytest.mark.parametrize("value", [
    {"model": "gpt", "messages": [{"role": "user", "content": "Grüße, 世界 \u2028 \"quoted\" \\ \n"}], "n": 1},
    {"temperature": 0.7, "top_p": 1.0, "seed": -3, "stop": None, "stream": False, "tools": []},
    [1, 2.5, "x", {"a": {"b": [True, False, None]}}],
    {"emoji": "\U0001F600", "control": "\x00\x1f"},
])
def test_it_sends_the_bytes_the_json_module_sends(value: Any) -> None:
    assert compact_json(value) == stdlib(value)


@pytest.mark.parametrize("value", [{1: "an integer key"}, {"big": 2**70}, {"small": -(2**70)}])
def test_what_orjson_refuses_is_encoded_by_the_json_module(value: Any) -> None:
    assert compact_json(value) == stdlib(value)


def test_what_neither_can_encode_is_a_type_error() -> None:
    with pytest.raises(TypeError):
        compact_json({"a": object()})

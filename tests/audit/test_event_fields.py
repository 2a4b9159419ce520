"""Field coercions of ``prepare_event`` that keep a shortcut for the common case: the shortcut answers what the
general rule answers."""

from __future__ import annotations

from typing import Any

import pytest

from audit.delivery import event as event_module
from audit.delivery.event import _MASKED_TEXTS_MAX, _int, _text, _usage, prepare_event
from audit.delivery.redact import mask_secrets
from tests.audit.events import make_event

SECRET_REASON = "upstream said: invalid api_key=sk-proj-abcdefghijklmnop1234"


def test_a_repeated_free_text_is_masked_every_time_and_capped_per_field() -> None:
    for _ in range(3):
        assert _text(SECRET_REASON, 200) == mask_secrets(SECRET_REASON)
        assert "sk-proj" not in _text(SECRET_REASON, 200)
    assert _text(SECRET_REASON, 10) == mask_secrets(SECRET_REASON)[:10]  # the same text under another cap
    assert _text(SECRET_REASON, 200) == mask_secrets(SECRET_REASON)


def test_the_table_of_masked_texts_stays_bounded() -> None:
    for i in range(_MASKED_TEXTS_MAX + 500):
        assert _text(f"reason number {i}", 200) == f"reason number {i}"
    assert len(event_module._MASKED_TEXTS) <= _MASKED_TEXTS_MAX


def test_a_long_free_text_is_masked_without_being_kept() -> None:
    long_text = "x " * 300 + SECRET_REASON
    before = len(event_module._MASKED_TEXTS)
    assert _text(long_text, 2000) == mask_secrets(long_text)
    assert len(event_module._MASKED_TEXTS) == before


@pytest.mark.parametrize("count", [0, 1, 1000, 2**62 - 1, 2**62, -1, -(2**62), 2**70, True, False, 3.9, float("nan"),
                                   float("inf"), " 42 ", "x", None, [1], {"a": 1}])
def test_a_usage_count_is_kept_or_coerced_as_the_general_rule_says(count: Any) -> None:
    usage = _usage({"input_tokens": count, "output_tokens": 5})
    assert usage["input_tokens"] == max(0, _int(count) or 0)
    assert usage == {"input_tokens": max(0, _int(count) or 0), "output_tokens": 5, "cached_input_tokens": 0,
                     "reasoning_tokens": 0}


def test_an_attempt_reason_with_a_key_is_masked_in_the_prepared_event() -> None:
    raw = make_event("reasons-1")
    raw["attempts"][0]["reason"] = SECRET_REASON
    for _ in range(2):
        prepared = prepare_event(raw, store_bodies=False, max_bytes=100)
        assert "sk-proj" not in prepared["attempts"][0]["reason"]

"""Token usage between the formats: cached input is inside OpenAI's prompt_tokens, outside Anthropic's
input_tokens; thinking is outside Gemini's candidatesTokenCount."""

from __future__ import annotations

from typing import Any

import pytest

from routing.core.answer import Usage, cost_usd
from routing.providers.common.usage import (
    anthropic_usage,
    openai_usage,
    usage_from_anthropic,
    usage_from_gemini,
    usage_from_openai,
)

CASES: list[tuple[str, dict[str, Any], Usage]] = [
    ("openai", {"prompt_tokens": 1200, "completion_tokens": 40, "total_tokens": 1240,
                "prompt_tokens_details": {"cached_tokens": 1024},
                "completion_tokens_details": {"reasoning_tokens": 16}},
     Usage(input_tokens=1200, output_tokens=40, cached_input_tokens=1024, reasoning_tokens=16)),
    ("openai", {"prompt_tokens": 10, "completion_tokens": 2}, Usage(10, 2)),
    ("openai", {"prompt_tokens": None, "completion_tokens": "7", "prompt_tokens_details": None}, Usage()),
    ("anthropic", {"input_tokens": 26, "cache_read_input_tokens": 1024, "cache_creation_input_tokens": 150,
                   "output_tokens": 40, "output_tokens_details": {"thinking_tokens": 16}},
     Usage(input_tokens=1200, output_tokens=40, cached_input_tokens=1024, cache_creation_tokens=150,
           reasoning_tokens=16)),
    ("anthropic", {"input_tokens": 10, "output_tokens": 2, "cache_read_input_tokens": None}, Usage(10, 2)),
    ("gemini", {"promptTokenCount": 1200, "cachedContentTokenCount": 1024, "candidatesTokenCount": 24,
                "thoughtsTokenCount": 16, "totalTokenCount": 1240},
     Usage(input_tokens=1200, output_tokens=40, cached_input_tokens=1024, reasoning_tokens=16)),
    ("gemini", {"promptTokenCount": 100, "toolUsePromptTokenCount": 20, "candidatesTokenCount": 5},
     Usage(input_tokens=120, output_tokens=5)),
]
READERS = {"openai": usage_from_openai, "anthropic": usage_from_anthropic, "gemini": usage_from_gemini}


@pytest.mark.parametrize(("shape", "wire", "usage"), CASES)
def test_it_reads_usage(shape: str, wire: dict[str, Any], usage: Usage) -> None:
    assert READERS[shape](wire) == usage


@pytest.mark.parametrize("usage", [c[2] for c in CASES])
def test_it_writes_usage_that_reads_back_the_same(usage: Usage) -> None:
    assert usage_from_openai(openai_usage(usage)) == usage
    assert usage_from_anthropic(anthropic_usage(usage)) == usage


def test_anthropic_input_tokens_exclude_the_cached_ones_and_openai_prompt_tokens_include_them() -> None:
    usage = Usage(input_tokens=1200, output_tokens=40, cached_input_tokens=1000, cache_creation_tokens=150)
    assert anthropic_usage(usage)["input_tokens"] == 50
    assert anthropic_usage(usage)["cache_read_input_tokens"] == 1000
    assert openai_usage(usage)["prompt_tokens"] == 1200
    assert openai_usage(usage)["prompt_tokens_details"] == {"cached_tokens": 1000, "cache_write_tokens": 150}
    assert openai_usage(usage)["total_tokens"] == 1240


def test_a_stream_combines_message_start_and_message_delta_usage() -> None:
    start = usage_from_anthropic({"input_tokens": 25, "cache_read_input_tokens": 2000,
                                  "cache_creation_input_tokens": 100, "output_tokens": 1})
    assert usage_from_anthropic({"output_tokens": 89}, start) == Usage(2125, 89, 2000, 100)
    # newer API versions repeat the (cumulative) input counts in message_delta
    assert usage_from_anthropic({"input_tokens": 30, "cache_read_input_tokens": 2000, "output_tokens": 90}, start) \
        == Usage(2130, 90, 2000, 100)


def test_cached_tokens_are_priced_at_the_cached_price_whatever_the_source() -> None:
    from_anthropic = usage_from_anthropic({"input_tokens": 0, "cache_read_input_tokens": 1_000_000,
                                           "output_tokens": 0})
    from_openai = usage_from_openai({"prompt_tokens": 1_000_000, "completion_tokens": 0,
                                     "prompt_tokens_details": {"cached_tokens": 1_000_000}})
    for usage in (from_anthropic, from_openai):
        assert cost_usd(usage, input_price=3.0, output_price=15.0, cached_input_price=0.3) == pytest.approx(0.3)


@pytest.mark.parametrize("odd", [True, False, -3, 0, 2.5, "12", None, [4], {"n": 4}])
def test_a_count_that_is_not_a_positive_json_integer_counts_zero(odd: Any) -> None:
    wire = {"prompt_tokens": odd, "completion_tokens": 7,
            "prompt_tokens_details": {"cached_tokens": odd}, "completion_tokens_details": {"reasoning_tokens": odd}}
    assert usage_from_openai(wire) == Usage(input_tokens=0, output_tokens=7)
    assert usage_from_anthropic({"input_tokens": odd, "output_tokens": odd}) == Usage()

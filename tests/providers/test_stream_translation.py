"""Cross-format streams: each provider's recorded stream to each client shape, split at awkward places."""

from __future__ import annotations

import json
import re
from typing import Any

import pytest

from routing.core.answer import Usage
from routing.providers import get_adapter
from routing.providers.common.thinking_ids import ThinkingBlock, id_with_thinking
from routing.providers.common.tool_call_ids import signature_from_id
from tests.providers.support import (
    ANTHROPIC_STREAM,
    GEMINI_SIGNATURE,
    GEMINI_STREAM,
    OPENAI_REASONING_STREAM,
    OPENAI_TOOLS_STREAM,
    anthropic_frames,
    feed_split,
    openai_frames,
    split_strategies,
)

CREATED = 1700000001
SIGNED_THINKING = ThinkingBlock("thinking", "Let me think", "EqQBCgIYAh")
_RANDOM_ID = re.compile(r"(call|toolu)_[0-9a-f]{24}(_ts_[A-Za-z0-9_-]+)?|chatcmpl-[0-9a-f]{32}|msg_[0-9a-f]{32}")


def run(kind: str, inbound: str, data: bytes, wants_usage: bool = True) -> tuple[Any, list[list[bytes]]]:
    """Translate under every split strategy; the frames must not depend on where the bytes were cut."""
    results = []
    translator = None
    for cuts in split_strategies(data).values():
        translator = get_adapter(kind).stream_translator(
            inbound=inbound, public_model="pub", client_wants_usage=wants_usage, created=CREATED  # type: ignore[arg-type]
        )
        results.append(feed_split(translator, data, cuts))
    texts = [_RANDOM_ID.sub("ID", b"".join(frames).decode()) for frames in results]
    assert all(text == texts[0] for text in texts)
    return translator, results


def deltas(events: list[Any]) -> list[dict[str, Any]]:
    return [e["choices"][0]["delta"] for e in events if e != "[DONE]" and e["choices"]]


def test_anthropic_stream_to_an_openai_client() -> None:
    translator, results = run("anthropic", "openai", ANTHROPIC_STREAM)
    events = openai_frames(results[0])
    assert events[-1] == "[DONE]"
    assert {e["id"] for e in events[:-1]} == {"chatcmpl-01X"}
    assert {(e["model"], e["created"], e["object"]) for e in events[:-1]} == {("pub", CREATED, "chat.completion.chunk")}
    assert deltas(events) == [
        {"role": "assistant", "content": ""},
        {"reasoning_content": "Let me think"},
        {"content": "Checking "},
        {"content": "both."},
        # The signed thinking block rides in the id of the call it preceded; the next call's id is plain.
        {"tool_calls": [{"index": 0, "id": id_with_thinking("toolu_01A", [SIGNED_THINKING]), "type": "function",
                         "function": {"name": "get_weather", "arguments": ""}}]},
        {"tool_calls": [{"index": 0, "function": {"arguments": ""}}]},
        {"tool_calls": [{"index": 0, "function": {"arguments": '{"city": "Pa'}}]},
        {"tool_calls": [{"index": 0, "function": {"arguments": 'ris"}'}}]},
        {"tool_calls": [{"index": 1, "id": "toolu_01B", "type": "function",
                         "function": {"name": "get_time", "arguments": ""}}]},
        {"tool_calls": [{"index": 1, "function": {"arguments": '{"tz": "CET"}'}}]},
        {},
    ]
    assert [e["choices"][0]["finish_reason"] for e in events[:-1] if e["choices"]][-1] == "tool_calls"
    usage_event = events[-2]
    assert usage_event["choices"] == []
    assert usage_event["usage"] == {
        "prompt_tokens": 2125, "completion_tokens": 89, "total_tokens": 2214,
        "prompt_tokens_details": {"cached_tokens": 2000, "cache_write_tokens": 100},
        "completion_tokens_details": {"reasoning_tokens": 30},
    }
    assert translator.usage == Usage(2125, 89, 2000, 100, 30)
    assert [c.arguments for c in translator.answer.tool_calls] == ['{"city": "Paris"}', '{"tz": "CET"}']


def test_anthropic_stream_to_an_openai_client_without_usage() -> None:
    translator, results = run("anthropic", "openai", ANTHROPIC_STREAM, wants_usage=False)
    events = openai_frames(results[0])
    assert all("usage" not in e for e in events if e != "[DONE]")
    assert translator.usage.cached_input_tokens == 2000  # still counted for cost


def test_openai_tool_stream_to_an_anthropic_client() -> None:
    translator, results = run("openai", "anthropic", OPENAI_TOOLS_STREAM)
    events = anthropic_frames(results[0])
    assert [name for name, _ in events] == [
        "message_start",
        "content_block_start", "content_block_delta", "content_block_delta", "content_block_stop",
        "content_block_start", "content_block_delta", "content_block_stop",
        "message_delta", "message_stop",
    ]
    start = events[0][1]["message"]
    assert (start["id"], start["model"], start["role"], start["content"]) == ("msg_abc", "pub", "assistant", [])
    blocks = [p["content_block"] for n, p in events if n == "content_block_start"]
    assert blocks == [
        {"type": "tool_use", "id": "toolu_A", "name": "get_weather", "input": {}},
        {"type": "tool_use", "id": "toolu_B", "name": "get_time", "input": {}},
    ]
    assert [p["index"] for n, p in events if n.startswith("content_block")] == [0, 0, 0, 0, 1, 1, 1]
    json_parts = [p["delta"]["partial_json"] for n, p in events if n == "content_block_delta"]
    assert json_parts == ['{"ci', 'ty": "Paris"}', '{"tz": "CET"}']
    assert events[-2][1] == {
        "type": "message_delta",
        "delta": {"stop_reason": "tool_use", "stop_sequence": None},
        "usage": {"input_tokens": 176, "cache_creation_input_tokens": 0, "cache_read_input_tokens": 1024,
                  "output_tokens": 40, "output_tokens_details": {"thinking_tokens": 16}},
    }
    assert translator.answer.finish_reason == "tool_calls"


def test_openai_reasoning_stream_to_an_anthropic_client() -> None:
    _, results = run("azure_openai", "anthropic", OPENAI_REASONING_STREAM)
    events = anthropic_frames(results[0])
    blocks = [p["content_block"]["type"] for n, p in events if n == "content_block_start"]
    assert blocks == ["thinking", "text"]
    delta_payloads = [p["delta"] for n, p in events if n == "content_block_delta"]
    assert delta_payloads == [{"type": "thinking_delta", "thinking": "Let me think."},
                              {"type": "text_delta", "text": "42"}]
    assert events[-2][1]["delta"]["stop_reason"] == "max_tokens"


@pytest.mark.parametrize("inbound", ["openai", "anthropic"])
def test_gemini_stream_to_either_client(inbound: str) -> None:
    translator, results = run("gemini", inbound, GEMINI_STREAM)
    assert translator.complete
    assert translator.usage == Usage(input_tokens=50, output_tokens=50, cached_input_tokens=32, reasoning_tokens=30)
    answer = translator.answer
    assert (answer.text, answer.reasoning_text, answer.finish_reason) == (
        "Checking both.", "Thinking about it", "tool_calls")
    assert [(c.name, json.loads(c.arguments)) for c in answer.tool_calls] == [
        ("get_weather", {"city": "Paris"}), ("get_time", {"tz": "CET"})]
    first_id, second_id = (c.id for c in answer.tool_calls)
    assert signature_from_id(first_id) == GEMINI_SIGNATURE
    assert signature_from_id(second_id) is None
    if inbound == "openai":
        events = openai_frames(results[0])
        assert events[-1] == "[DONE]"
        assert events[-2]["usage"]["prompt_tokens_details"] == {"cached_tokens": 32}
        calls = [d["tool_calls"] for d in deltas(events) if "tool_calls" in d]
        assert [[c["index"] for c in group] for group in calls] == [[0, 1]]
        assert {e["id"] for e in events[:-1]} == {"chatcmpl-resp-1"}
    else:
        events = anthropic_frames(results[0])
        blocks = [p["content_block"]["type"] for n, p in events if n == "content_block_start"]
        assert blocks == ["thinking", "text", "tool_use", "tool_use"]
        assert events[-2][1]["delta"]["stop_reason"] == "tool_use"
        assert events[-2][1]["usage"]["cache_read_input_tokens"] == 32
        assert events[-2][1]["usage"]["input_tokens"] == 18


def test_a_gemini_prompt_block_ends_the_stream_as_content_filter() -> None:
    blocked = b'data: {"promptFeedback": {"blockReason": "SAFETY"}, "usageMetadata": {"promptTokenCount": 9}}\r\n\r\n'
    translator, results = run("gemini", "openai", blocked)
    assert translator.complete
    assert translator.answer.finish_reason == "content_filter"
    assert openai_frames(results[0])[-3]["choices"][0]["finish_reason"] == "content_filter"


def test_gemini_malformed_function_call_is_unknown_to_validation_but_stop_to_the_client() -> None:
    data = b'data: {"candidates": [{"content": {"parts": []}, "finishReason": "MALFORMED_FUNCTION_CALL"}]}\n\n'
    translator, results = run("gemini", "openai", data)
    assert translator.answer.finish_reason == "unknown"
    finishes = [e["choices"][0]["finish_reason"] for e in openai_frames(results[0]) if e != "[DONE]"]
    assert finishes[-1] == "stop"

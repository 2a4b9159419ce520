"""Non-streaming responses from each provider kind, for each client shape."""

from __future__ import annotations

import json
from typing import Any

import anthropic.types
import openai.types.chat
import pytest

from routing.core.answer import Answer, ToolCall, Usage
from routing.providers import MalformedResponse, get_adapter
from routing.providers.common.thinking_ids import ThinkingBlock, id_with_thinking
from routing.providers.common.tool_call_ids import signature_from_id
from tests.providers.support import GEMINI_SIGNATURE

CREATED = 1700000002

OPENAI_COMPLETION = {
    "id": "chatcmpl-1", "object": "chat.completion", "created": 1700000000, "model": "gpt-4o-mini-2024-07-18",
    "system_fingerprint": "fp_1",
    "choices": [{"index": 0, "logprobs": None, "finish_reason": "tool_calls", "message": {
        "role": "assistant", "content": "Hi", "refusal": None, "reasoning_content": "hmm",
        "tool_calls": [{"id": "call_1", "type": "function", "function": {"name": "w", "arguments": '{"city":"Oslo"}'}}],
    }}],
    "usage": {"prompt_tokens": 1200, "completion_tokens": 20, "total_tokens": 1220,
              "prompt_tokens_details": {"cached_tokens": 1024}, "completion_tokens_details": {"reasoning_tokens": 8}},
}
ANTHROPIC_MESSAGE = {
    "id": "msg_01", "type": "message", "role": "assistant", "model": "claude-sonnet-4-5-20250929",
    "content": [{"type": "thinking", "thinking": "hmm", "signature": "sig"}, {"type": "text", "text": "Hi"},
                {"type": "tool_use", "id": "toolu_1", "name": "w", "input": {"city": "Oslo"}}],
    "stop_reason": "tool_use", "stop_sequence": None,
    "usage": {"input_tokens": 126, "cache_read_input_tokens": 1024, "cache_creation_input_tokens": 50,
              "output_tokens": 20, "output_tokens_details": {"thinking_tokens": 8}},
}
GEMINI_RESPONSE = {
    "candidates": [{"index": 0, "finishReason": "STOP", "content": {"role": "model", "parts": [
        {"text": "hmm", "thought": True}, {"text": "Hi"},
        {"functionCall": {"name": "w", "args": {"city": "Oslo"}}, "thoughtSignature": GEMINI_SIGNATURE}]}}],
    "usageMetadata": {"promptTokenCount": 1200, "candidatesTokenCount": 12, "thoughtsTokenCount": 8,
                      "cachedContentTokenCount": 1024, "totalTokenCount": 1220},
    "responseId": "r1", "modelVersion": "gemini-2.5-flash",
}
UPSTREAM = {"openai": OPENAI_COMPLETION, "azure_openai": OPENAI_COMPLETION, "anthropic": ANTHROPIC_MESSAGE,
            "gemini": GEMINI_RESPONSE}
USAGE = {
    "openai": Usage(input_tokens=1200, output_tokens=20, cached_input_tokens=1024, reasoning_tokens=8),
    "azure_openai": Usage(input_tokens=1200, output_tokens=20, cached_input_tokens=1024, reasoning_tokens=8),
    "anthropic": Usage(input_tokens=1200, output_tokens=20, cached_input_tokens=1024, cache_creation_tokens=50,
                       reasoning_tokens=8),
    "gemini": Usage(input_tokens=1200, output_tokens=20, cached_input_tokens=1024, reasoning_tokens=8),
}


def parse(kind: str, inbound: str, upstream: Any) -> Any:
    return get_adapter(kind).parse_response(status=200, data=json.dumps(upstream).encode(),
                                            inbound=inbound, public_model="pub", created=CREATED)  # type: ignore[arg-type]


@pytest.mark.parametrize("kind", list(UPSTREAM))
@pytest.mark.parametrize("inbound", ["openai", "anthropic"])
def test_every_provider_answers_every_client_shape(kind: str, inbound: str) -> None:
    parsed = parse(kind, inbound, UPSTREAM[kind])
    assert parsed.usage == USAGE[kind]
    answer = parsed.answer
    assert (answer.text, answer.reasoning_text, answer.finish_reason) == ("Hi", "hmm", "tool_calls")
    assert [(c.name, json.loads(c.arguments)) for c in answer.tool_calls] == [("w", {"city": "Oslo"})]
    body = parsed.client_body
    assert body["model"] == "pub"
    if inbound == "openai":
        completion = openai.types.chat.ChatCompletion.model_validate(body)
        message = completion.choices[0].message
        assert (message.content, completion.choices[0].finish_reason) == ("Hi", "tool_calls")
        assert message.tool_calls is not None
        assert message.tool_calls[0].function.name == "w"
        assert body["choices"][0]["message"]["reasoning_content"] == "hmm"
        assert completion.usage is not None
        assert completion.usage.prompt_tokens == 1200
        assert completion.usage.prompt_tokens_details is not None
        assert completion.usage.prompt_tokens_details.cached_tokens == 1024
    else:
        message = anthropic.types.Message.model_validate(body)
        assert [b.type for b in message.content] == ["thinking", "text", "tool_use"]
        assert message.stop_reason == "tool_use"
        assert message.content[2].input == {"city": "Oslo"}  # type: ignore[union-attr]
        usage = message.usage
        assert usage.input_tokens + (usage.cache_read_input_tokens or 0) + (usage.cache_creation_input_tokens or 0) \
            == 1200
        assert usage.cache_read_input_tokens == 1024


def test_the_openai_pass_through_changes_only_the_model() -> None:
    body = parse("openai", "openai", OPENAI_COMPLETION).client_body
    assert body == {**OPENAI_COMPLETION, "model": "pub"}


def test_the_anthropic_pass_through_changes_only_the_model() -> None:
    assert parse("anthropic", "anthropic", ANTHROPIC_MESSAGE).client_body == {**ANTHROPIC_MESSAGE, "model": "pub"}


def test_anthropic_to_an_openai_client_exactly() -> None:
    assert parse("anthropic", "openai", ANTHROPIC_MESSAGE).client_body == {
        "id": "chatcmpl-01", "object": "chat.completion", "created": CREATED, "model": "pub",
        "choices": [{"index": 0, "finish_reason": "tool_calls", "logprobs": None, "message": {
            "role": "assistant", "content": "Hi", "reasoning_content": "hmm",
            # The signed thinking block rides in the id of the tool call it preceded (thinking_ids).
            "tool_calls": [{"id": id_with_thinking("toolu_1", [ThinkingBlock("thinking", "hmm", "sig")]),
                            "type": "function", "function": {"name": "w", "arguments": '{"city": "Oslo"}'}}]}}],
        "usage": {"prompt_tokens": 1200, "completion_tokens": 20, "total_tokens": 1220,
                  "prompt_tokens_details": {"cached_tokens": 1024, "cache_write_tokens": 50},
                  "completion_tokens_details": {"reasoning_tokens": 8}},
    }


def test_openai_to_an_anthropic_client_exactly() -> None:
    assert parse("openai", "anthropic", OPENAI_COMPLETION).client_body == {
        "id": "msg_1", "type": "message", "role": "assistant", "model": "pub",
        "content": [{"type": "thinking", "thinking": "hmm", "signature": ""}, {"type": "text", "text": "Hi"},
                    {"type": "tool_use", "id": "toolu_1", "name": "w", "input": {"city": "Oslo"}}],
        "stop_reason": "tool_use", "stop_sequence": None,
        "usage": {"input_tokens": 176, "cache_creation_input_tokens": 0, "cache_read_input_tokens": 1024,
                  "output_tokens": 20, "output_tokens_details": {"thinking_tokens": 8}},
    }


def test_gemini_tool_calls_carry_their_thought_signature_in_the_id() -> None:
    body = parse("gemini", "openai", GEMINI_RESPONSE).client_body
    call_id = body["choices"][0]["message"]["tool_calls"][0]["id"]
    assert signature_from_id(call_id) == GEMINI_SIGNATURE
    assert body["id"] == "chatcmpl-r1"


@pytest.mark.parametrize(
    ("kind", "reason", "openai_finish", "anthropic_stop", "normalised"),
    [
        ("anthropic", "end_turn", "stop", "end_turn", "stop"),
        ("anthropic", "stop_sequence", "stop", "stop_sequence", "stop"),
        ("anthropic", "max_tokens", "length", "max_tokens", "length"),
        ("anthropic", "refusal", "content_filter", "refusal", "content_filter"),
        ("anthropic", "pause_turn", "stop", "pause_turn", "unknown"),
        ("openai", "stop", "stop", "end_turn", "stop"),
        ("openai", "length", "length", "max_tokens", "length"),
        ("openai", "content_filter", "content_filter", "refusal", "content_filter"),
        ("gemini", "STOP", "stop", "end_turn", "stop"),
        ("gemini", "MAX_TOKENS", "length", "max_tokens", "length"),
        ("gemini", "SAFETY", "content_filter", "refusal", "content_filter"),
        ("gemini", "RECITATION", "content_filter", "refusal", "content_filter"),
        ("gemini", "MALFORMED_FUNCTION_CALL", "stop", "end_turn", "unknown"),
    ],
)
def test_it_maps_stop_reasons(kind: str, reason: str, openai_finish: str, anthropic_stop: str,
                              normalised: str) -> None:
    if kind == "anthropic":
        upstream: dict[str, Any] = {**ANTHROPIC_MESSAGE, "content": [{"type": "text", "text": "x"}],
                                    "stop_reason": reason}
    elif kind == "openai":
        upstream = {**OPENAI_COMPLETION, "choices": [{"index": 0, "finish_reason": reason,
                                                      "message": {"role": "assistant", "content": "x"}}]}
    else:
        upstream = {"candidates": [{"finishReason": reason, "content": {"parts": [{"text": "x"}]}}]}
    for inbound, expected in (("openai", openai_finish), ("anthropic", anthropic_stop)):
        parsed = parse(kind, inbound, upstream)
        body = parsed.client_body
        wire = body["choices"][0]["finish_reason"] if inbound == "openai" else body["stop_reason"]
        assert wire == expected
        assert parsed.answer.finish_reason == normalised


def test_an_openai_refusal_reaches_an_anthropic_client_as_a_refusal() -> None:
    upstream = {**OPENAI_COMPLETION, "choices": [{"index": 0, "finish_reason": "stop", "message": {
        "role": "assistant", "content": None, "refusal": "I can't help with that."}}]}
    body = parse("openai", "anthropic", upstream).client_body
    assert body["content"] == [{"type": "text", "text": "I can't help with that."}]
    assert body["stop_reason"] == "refusal"


def test_a_blocked_gemini_prompt_is_an_empty_content_filtered_answer() -> None:
    parsed = parse("gemini", "openai", {"promptFeedback": {"blockReason": "SAFETY"}})
    assert parsed.answer == Answer(text="", finish_reason="content_filter")
    assert parsed.client_body["choices"][0]["finish_reason"] == "content_filter"


def test_several_gemini_candidates_become_several_choices() -> None:
    upstream = {"candidates": [
        {"index": 0, "finishReason": "STOP", "content": {"parts": [{"text": "one"}]}},
        {"index": 1, "finishReason": "MAX_TOKENS", "content": {"parts": [{"text": "two"}]}},
    ]}
    parsed = parse("gemini", "openai", upstream)
    choices = parsed.client_body["choices"]
    assert [(c["index"], c["message"]["content"], c["finish_reason"]) for c in choices] == [
        (0, "one", "stop"), (1, "two", "length")]
    assert parsed.answer.text == "one"


@pytest.mark.parametrize(
    ("kind", "inbound", "data"),
    [
        ("openai", "openai", b"<html>bad gateway</html>"),
        ("openai", "openai", b'{"object": "chat.completion"}'),
        ("openai", "anthropic", b'{"choices": []}'),
        ("azure_openai", "openai", b'{"choices": [{"index": 0}]}'),
        ("anthropic", "anthropic", b'{"type": "message"}'),
        ("anthropic", "openai", b"[]"),
        ("gemini", "openai", b'{"candidates": []}'),
        ("gemini", "anthropic", b'{"candidates": ["x"]}'),
    ],
)
def test_an_unreadable_envelope_is_a_malformed_response(kind: str, inbound: str, data: bytes) -> None:
    with pytest.raises(MalformedResponse):
        get_adapter(kind).parse_response(status=200, data=data, inbound=inbound,  # type: ignore[arg-type]
                                         public_model="pub")


def test_tool_arguments_that_are_not_json_cannot_become_an_anthropic_tool_use() -> None:
    upstream = {**OPENAI_COMPLETION, "choices": [{"index": 0, "finish_reason": "tool_calls", "message": {
        "role": "assistant", "content": None, "tool_calls": [
            {"id": "c", "type": "function", "function": {"name": "w", "arguments": '{"city": '}}]}}]}
    with pytest.raises(MalformedResponse):
        parse("openai", "anthropic", upstream)
    answer = parse("openai", "openai", upstream).answer  # an OpenAI client gets it as sent; validation decides
    assert answer.tool_calls == (ToolCall(id="c", name="w", arguments='{"city": '),)


def test_parse_response_is_for_success_bodies_only() -> None:
    with pytest.raises(ValueError, match="parse_error"):
        get_adapter("openai").parse_response(status=500, data=b"{}", inbound="openai", public_model="pub")

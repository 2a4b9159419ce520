"""The Cohere Chat v2 adapter: requests both ways (OpenAI and Anthropic clients), answers, streams, errors."""

from __future__ import annotations

import json
from typing import Any

import pytest

from routing.core.answer import FINISH_LENGTH, FINISH_STOP, FINISH_TOOL_CALLS, FINISH_UNKNOWN
from routing.core.table import CAPABILITIES, ModelSpec, ProviderSpec
from routing.providers import CapabilityError, MalformedResponse, RequestShapeError, get_adapter
from tests.providers.support import anthropic_frames, feed_split, openai_frames, split_strategies, sse

PROVIDER = ProviderSpec(name="co", kind="cohere", base_url="https://api.cohere.com")
MODEL = ModelSpec(name="cohere/public", provider="co", upstream="command-a-03-2025",
                  capabilities=frozenset(CAPABILITIES))
ADAPTER = get_adapter("cohere")
CITY = {"type": "object", "properties": {"city": {"type": "string"}}}
WEATHER = {"type": "function", "function": {"name": "get_weather", "description": "Weather in a city",
                                            "parameters": CITY}}
TIME = {"type": "function", "function": {"name": "get_time", "parameters": {"type": "object"}}}


def build(body: dict[str, Any], *, inbound: str = "openai", stream: bool = False) -> dict[str, Any]:
    request = ADAPTER.build_request(provider=PROVIDER, model=MODEL, body=body, inbound=inbound,  # type: ignore[arg-type]
                                    stream=stream, api_key="co-secret")
    assert request.url == "https://api.cohere.com/v2/chat"
    assert request.headers["Authorization"] == "Bearer co-secret"
    assert "co-secret" not in repr(request)
    return request.json


# -- requests -------------------------------------------------------------------------------------------


def test_an_openai_body_becomes_a_cohere_chat_with_renamed_sampling_fields() -> None:
    payload = build({
        "model": "cohere/public",
        "messages": [{"role": "developer", "content": "Be brief."}, {"role": "user", "content": "Hi"}],
        "max_completion_tokens": 100, "temperature": 0.3, "top_p": 0.9, "stop": "END", "seed": 4,
        "frequency_penalty": 0.1, "presence_penalty": 0.2, "user": "u1", "parallel_tool_calls": True,
    }, stream=True)

    assert payload == {
        "model": "command-a-03-2025",
        "messages": [{"role": "system", "content": "Be brief."}, {"role": "user", "content": "Hi"}],
        "stream": True, "max_tokens": 100, "temperature": 0.3, "p": 0.9, "stop_sequences": ["END"], "seed": 4,
        "frequency_penalty": 0.1, "presence_penalty": 0.2,
    }


def test_tool_calls_and_results_keep_their_ids_and_text_beside_calls_is_the_tool_plan() -> None:
    payload = build({
        "model": "m",
        "messages": [
            {"role": "user", "content": [{"type": "text", "text": "Weather?"},
                                         {"type": "image_url", "image_url": {"url": "https://x/y.png"}}]},
            {"role": "assistant", "content": "Let me look.", "tool_calls": [
                {"id": "call_1", "type": "function",
                 "function": {"name": "get_weather", "arguments": '{"city":"Paris"}'}}]},
            {"role": "tool", "tool_call_id": "call_1", "content": [{"type": "text", "text": "sunny"}]},
        ],
        "tools": [WEATHER], "tool_choice": "required",
    })

    assert payload["messages"][0]["content"] == [{"type": "text", "text": "Weather?"},
                                                 {"type": "image_url", "image_url": {"url": "https://x/y.png"}}]
    assert payload["messages"][1] == {"role": "assistant", "tool_plan": "Let me look.", "tool_calls": [
        {"id": "call_1", "type": "function", "function": {"name": "get_weather", "arguments": '{"city":"Paris"}'}}]}
    assert payload["messages"][2] == {"role": "tool", "tool_call_id": "call_1", "content": "sunny"}
    assert payload["tools"] == [WEATHER]
    assert payload["tool_choice"] == "REQUIRED"


@pytest.mark.parametrize(("choice", "expected_tools", "expected_choice"), [
    ("auto", ["get_weather", "get_time"], None),
    ("none", ["get_weather", "get_time"], "NONE"),
    ({"type": "function", "function": {"name": "get_time"}}, ["get_time"], "REQUIRED"),
])
def test_tool_choice_maps_to_required_or_none_and_a_named_function_is_sent_alone(
        choice: Any, expected_tools: list[str], expected_choice: str | None) -> None:
    payload = build({"model": "m", "messages": [{"role": "user", "content": "x"}], "tools": [WEATHER, TIME],
                     "tool_choice": choice})

    assert [tool["function"]["name"] for tool in payload["tools"]] == expected_tools
    assert payload.get("tool_choice") == expected_choice


def test_a_json_schema_goes_in_response_format_as_a_json_object() -> None:
    schema = {"type": "object", "properties": {"a": {"type": "integer"}}}
    payload = build({"model": "m", "messages": [{"role": "user", "content": "x"}],
                     "response_format": {"type": "json_schema", "json_schema": {"name": "s", "schema": schema}}})

    assert payload["response_format"] == {"type": "json_object", "json_schema": schema}


def test_reasoning_effort_becomes_a_thinking_budget() -> None:
    payload = build({"model": "m", "messages": [{"role": "user", "content": "x"}], "reasoning_effort": "low"})

    assert payload["thinking"] == {"type": "enabled", "token_budget": 2048}


def test_an_anthropic_body_is_translated_through_the_openai_form() -> None:
    payload = build({
        "model": "m", "max_tokens": 64, "system": "Be brief.", "top_k": 5, "stop_sequences": ["##"],
        "messages": [
            {"role": "user", "content": "Weather?"},
            {"role": "assistant", "content": [{"type": "tool_use", "id": "toolu_1", "name": "get_weather",
                                               "input": {"city": "Oslo"}}]},
            {"role": "user", "content": [{"type": "tool_result", "tool_use_id": "toolu_1", "content": "rain"}]},
        ],
        "tools": [{"name": "get_weather", "input_schema": {"type": "object"}}],
        "tool_choice": {"type": "any"},
    }, inbound="anthropic")

    assert payload["messages"][0] == {"role": "system", "content": "Be brief."}
    assert payload["messages"][2]["tool_calls"][0]["id"] == "call_1"  # toolu_1 back in the OpenAI shape
    assert json.loads(payload["messages"][2]["tool_calls"][0]["function"]["arguments"]) == {"city": "Oslo"}
    assert payload["messages"][3] == {"role": "tool", "tool_call_id": "call_1", "content": "rain"}
    assert payload["max_tokens"] == 64
    assert payload["k"] == 5
    assert payload["stop_sequences"] == ["##"]
    assert payload["tool_choice"] == "REQUIRED"


@pytest.mark.parametrize(("extra", "param", "error"), [
    ({"n": 2}, "n", CapabilityError),
    ({"logprobs": True}, "logprobs", CapabilityError),
    ({"logit_bias": {"1": 2}}, "logit_bias", CapabilityError),
    ({"web_search_options": {}}, "web_search_options", CapabilityError),
    ({"response_format": {"type": "xml"}}, "response_format.type", RequestShapeError),
    ({"tool_choice": {"type": "function", "function": {"name": "nope"}}, "tools": [WEATHER]},
     "tool_choice.function.name", RequestShapeError),
    ({"messages": [{"role": "user", "content": [{"type": "input_audio", "input_audio": {}}]}]},
     "messages[0].content[0].type", CapabilityError),
    ({"messages": [{"role": "wizard", "content": "x"}]}, "messages[0].role", RequestShapeError),
])
def test_what_cohere_cannot_take_is_refused_before_sending_naming_the_field(
        extra: dict[str, Any], param: str, error: type[Exception]) -> None:
    body = {"model": "m", "messages": [{"role": "user", "content": "x"}], **extra}

    with pytest.raises(error) as raised:
        build(body)

    assert raised.value.param == param  # type: ignore[attr-defined]


# -- answers --------------------------------------------------------------------------------------------

COHERE_TOOL_ANSWER = {
    "id": "5a50480a-cf52-46f0-af01-53d18539bd31",
    "finish_reason": "TOOL_CALL",
    "message": {"role": "assistant", "tool_plan": "I will check the weather.", "tool_calls": [
        {"id": "get_weather_1byjy32y4hvq", "type": "function",
         "function": {"name": "get_weather", "arguments": "{\"city\":\"Paris\"}"}}]},
    "usage": {"billed_units": {"input_tokens": 37, "output_tokens": 21},
              "tokens": {"input_tokens": 1010, "output_tokens": 53}, "cached_tokens": 12},
}


def test_an_answer_reaches_an_openai_client_with_billed_units_as_usage() -> None:
    parsed = ADAPTER.parse_response(status=200, data=json.dumps(COHERE_TOOL_ANSWER).encode(), inbound="openai",
                                    public_model="cohere/public", created=7)

    choice = parsed.client_body["choices"][0]
    assert parsed.client_body["model"] == "cohere/public"
    assert parsed.client_body["id"] == "chatcmpl-5a50480a-cf52-46f0-af01-53d18539bd31"
    assert choice["finish_reason"] == "tool_calls"
    assert choice["message"]["content"] == "I will check the weather."
    assert choice["message"]["tool_calls"][0]["id"] == "get_weather_1byjy32y4hvq"
    assert (parsed.usage.input_tokens, parsed.usage.output_tokens, parsed.usage.cached_input_tokens) == (37, 21, 12)
    assert parsed.client_body["usage"]["prompt_tokens"] == 37
    assert parsed.answer.finish_reason == FINISH_TOOL_CALLS
    assert parsed.answer.tool_calls[0].name == "get_weather"


def test_an_answer_reaches_an_anthropic_client_as_a_message() -> None:
    parsed = ADAPTER.parse_response(status=200, data=json.dumps(COHERE_TOOL_ANSWER).encode(), inbound="anthropic",
                                    public_model="cohere/public", created=7)

    body = parsed.client_body
    assert body["type"] == "message"
    assert body["stop_reason"] == "tool_use"
    assert body["content"][0] == {"type": "text", "text": "I will check the weather."}
    assert body["content"][1]["type"] == "tool_use"
    assert body["content"][1]["input"] == {"city": "Paris"}


def test_token_counts_are_used_when_billed_units_are_absent_and_thinking_is_reasoning() -> None:
    answer = {"id": "x", "finish_reason": "MAX_TOKENS", "message": {"role": "assistant", "content": [
        {"type": "thinking", "thinking": "Hmm."}, {"type": "text", "text": "Par"}]},
        "usage": {"tokens": {"input_tokens": 9, "output_tokens": 4}}}
    parsed = ADAPTER.parse_response(status=200, data=json.dumps(answer).encode(), inbound="openai",
                                    public_model="p", created=1)

    message = parsed.client_body["choices"][0]["message"]
    assert message == {"role": "assistant", "content": "Par", "reasoning_content": "Hmm."}
    assert parsed.client_body["choices"][0]["finish_reason"] == "length"
    assert (parsed.usage.input_tokens, parsed.usage.output_tokens) == (9, 4)
    assert parsed.answer.finish_reason == FINISH_LENGTH


@pytest.mark.parametrize(("reason", "finish", "wire"), [
    ("COMPLETE", FINISH_STOP, "stop"), ("STOP_SEQUENCE", FINISH_STOP, "stop"),
    ("MAX_TOKENS", FINISH_LENGTH, "length"), ("TOOL_CALL", FINISH_TOOL_CALLS, "tool_calls"),
    ("ERROR", FINISH_UNKNOWN, "stop"), ("TIMEOUT", FINISH_UNKNOWN, "stop"),
])
def test_finish_reasons_are_mapped(reason: str, finish: str, wire: str) -> None:
    answer = {"id": "x", "finish_reason": reason, "message": {"role": "assistant", "content": []}}
    parsed = ADAPTER.parse_response(status=200, data=json.dumps(answer).encode(), inbound="openai",
                                    public_model="p", created=1)

    assert parsed.answer.finish_reason == finish
    assert parsed.client_body["choices"][0]["finish_reason"] == wire


def test_an_answer_without_a_message_is_malformed() -> None:
    with pytest.raises(MalformedResponse):
        ADAPTER.parse_response(status=200, data=b'{"id": "x"}', inbound="openai", public_model="p")


# -- errors ---------------------------------------------------------------------------------------------


def test_a_cohere_error_body_is_read_and_a_token_overflow_is_a_context_overflow() -> None:
    overflow = ADAPTER.parse_error(status=400, data=json.dumps({
        "id": "e1", "message": "too many tokens: the total number of tokens in the prompt cannot exceed 128000 - "
                               "received 130000."}).encode())
    rate = ADAPTER.parse_error(status=429, data=b'{"id": "e2", "message": "You are using a Trial key"}')
    garbage = ADAPTER.parse_error(status=502, data=b"<html>bad gateway</html>")

    assert overflow.is_context_overflow
    assert overflow.message.startswith("too many tokens")
    assert rate.message == "You are using a Trial key"
    assert not rate.is_context_overflow
    assert "bad gateway" in garbage.message


# -- streams --------------------------------------------------------------------------------------------

USAGE = {"billed_units": {"input_tokens": 20, "output_tokens": 9}, "tokens": {"input_tokens": 520, "output_tokens": 9}}

TEXT_STREAM = sse(
    {"type": "message-start", "id": "abc-1", "delta": {"message": {"role": "assistant", "content": [],
                                                                   "tool_plan": "", "tool_calls": []}}},
    {"type": "content-start", "index": 0, "delta": {"message": {"content": {"type": "text", "text": ""}}}},
    {"type": "content-delta", "index": 0, "delta": {"message": {"content": {"text": "Hello"}}}},
    {"type": "content-delta", "index": 0, "delta": {"message": {"content": {"text": " wörld"}}}},
    {"type": "content-end", "index": 0},
    {"type": "message-end", "delta": {"finish_reason": "COMPLETE", "usage": USAGE}},
    named=True,
)

TOOL_STREAM = sse(
    {"type": "message-start", "id": "abc-2", "delta": {"message": {"role": "assistant"}}},
    {"type": "tool-plan-delta", "delta": {"message": {"tool_plan": "Checking both."}}},
    {"type": "tool-call-start", "index": 0, "delta": {"message": {"tool_calls": {
        "id": "get_weather_1", "type": "function", "function": {"name": "get_weather", "arguments": ""}}}}},
    {"type": "tool-call-delta", "index": 0, "delta": {"message": {"tool_calls": {"function": {"arguments": '{"ci'}}}}},
    {"type": "tool-call-delta", "index": 0, "delta": {"message": {"tool_calls": {
        "function": {"arguments": 'ty": "Paris"}'}}}}},
    {"type": "tool-call-end", "index": 0},
    {"type": "tool-call-start", "index": 1, "delta": {"message": {"tool_calls": {
        "id": "get_time_2", "type": "function", "function": {"name": "get_time", "arguments": '{"tz": "CET"}'}}}}},
    {"type": "tool-call-end", "index": 1},
    {"type": "message-end", "delta": {"finish_reason": "TOOL_CALL", "usage": USAGE}},
    named=True,
)


def translator(inbound: str, wants_usage: bool = True) -> Any:
    return ADAPTER.stream_translator(inbound=inbound, public_model="cohere/public",  # type: ignore[arg-type]
                                     client_wants_usage=wants_usage, created=5)


@pytest.mark.parametrize("strategy", ["whole", "every byte", "random", "mid line ending"])
def test_a_text_stream_reaches_an_openai_client_chunk_by_chunk(strategy: str) -> None:
    stream = translator("openai")
    frames = openai_frames(feed_split(stream, TEXT_STREAM, split_strategies(TEXT_STREAM)[strategy]))

    assert frames[-1] == "[DONE]"
    chunks = frames[:-1]
    assert all(chunk["model"] == "cohere/public" and chunk["id"] == "chatcmpl-abc-1" for chunk in chunks)
    text = "".join(c["choices"][0]["delta"].get("content") or "" for c in chunks if c["choices"])
    assert text == "Hello wörld"
    assert [c["choices"][0]["finish_reason"] for c in chunks if c["choices"]][-1] == "stop"
    assert chunks[-1]["choices"] == []
    assert chunks[-1]["usage"]["prompt_tokens"] == 20
    assert stream.complete
    assert stream.answer.text == "Hello wörld"
    assert stream.answer.finish_reason == FINISH_STOP
    assert (stream.usage.input_tokens, stream.usage.output_tokens) == (20, 9)


def test_the_usage_chunk_is_withheld_from_a_client_that_did_not_ask_but_still_counted() -> None:
    stream = translator("openai", wants_usage=False)
    frames = openai_frames(feed_split(stream, TEXT_STREAM, []))

    assert all("usage" not in frame or frame.get("usage") is None for frame in frames[:-1])
    assert stream.usage.output_tokens == 9


def test_a_tool_stream_reaches_an_openai_client_with_numbered_calls() -> None:
    stream = translator("openai")
    chunks = [c for c in openai_frames(feed_split(stream, TOOL_STREAM, [])) if c != "[DONE]" and c["choices"]]

    deltas = [c["choices"][0]["delta"] for c in chunks]
    assert "".join(d.get("content") or "" for d in deltas) == "Checking both."
    calls = [call for d in deltas for call in d.get("tool_calls", [])]
    assert [c["index"] for c in calls] == [0, 0, 0, 1]
    assert calls[0]["id"] == "get_weather_1"
    assert calls[3]["function"]["name"] == "get_time"
    assert chunks[-1]["choices"][0]["finish_reason"] == "tool_calls"
    answer = stream.answer
    assert [(c.name, json.loads(c.arguments)) for c in answer.tool_calls] == [
        ("get_weather", {"city": "Paris"}), ("get_time", {"tz": "CET"})]
    assert answer.finish_reason == FINISH_TOOL_CALLS


def test_a_tool_stream_reaches_an_anthropic_client_as_content_blocks() -> None:
    stream = translator("anthropic")
    events = anthropic_frames(feed_split(stream, TOOL_STREAM, split_strategies(TOOL_STREAM)["random"]))

    names = [name for name, _ in events]
    assert names[0] == "message_start"
    assert names[-1] == "message_stop"
    starts = [payload["content_block"] for name, payload in events if name == "content_block_start"]
    assert [block["type"] for block in starts] == ["text", "tool_use", "tool_use"]
    assert starts[1]["id"] == "toolu_gm-Z2V0X3dlYXRoZXJfMQ"  # Cohere's get_weather_1, whole, in the toolu_ shape
    delta = next(payload for name, payload in events if name == "message_delta")
    assert delta["delta"]["stop_reason"] == "tool_use"
    assert delta["usage"]["output_tokens"] == 9
    assert stream.complete


def test_a_message_end_with_error_is_a_failure_and_a_cut_stream_is_incomplete() -> None:
    failing = translator("openai")
    failing.feed(sse({"type": "message-start", "id": "x"},
                     {"type": "content-delta", "index": 0, "delta": {"message": {"content": {"text": "Hi"}}}},
                     {"type": "message-end", "delta": {"finish_reason": "ERROR", "error": "internal error"}},
                     named=True))
    failing.finish()
    cut = translator("openai")
    cut.feed(TEXT_STREAM[: TEXT_STREAM.index(b"event: message-end")])
    cut.finish()

    assert not failing.complete
    assert failing.failure is not None
    assert failing.failure.message == "internal error"
    assert not cut.complete
    assert cut.failure is None
    assert cut.answer.text == "Hello wörld"


def test_an_event_that_is_not_json_is_malformed() -> None:
    stream = translator("openai")

    with pytest.raises(MalformedResponse):
        stream.feed(b"event: content-delta\ndata: {not json\n\n")

"""OpenAI chat requests sent to an Anthropic model: the translation table, then what is refused."""

from __future__ import annotations

from typing import Any

import pytest

from routing.providers import CapabilityError, RequestShapeError, TranslationError, get_adapter
from routing.providers.anthropic.upstream_request import JSON_OBJECT_INSTRUCTION
from tests.providers.support import PROVIDERS, model

USER = {"role": "user", "content": "hi"}
TOOL = {"type": "function", "function": {"name": "get_weather", "description": "Weather now",
                                         "parameters": {"type": "object", "properties": {"city": {"type": "string"}}}}}
ANTHROPIC_TOOL = {"name": "get_weather", "description": "Weather now",
                  "input_schema": {"type": "object", "properties": {"city": {"type": "string"}}}}


def translate(body: dict[str, Any], **model_options: Any) -> dict[str, Any]:
    request = get_adapter("anthropic").build_request(
        provider=PROVIDERS["anthropic"], model=model("anthropic", **model_options), body={"model": "pub", **body},
        inbound="openai", stream=False, api_key="k",
    )
    return request.json


CASES: list[tuple[str, dict[str, Any], dict[str, Any]]] = [
    (
        "system and developer messages become the top-level system; max_tokens defaults to 4096",
        {"messages": [{"role": "system", "content": "Be brief."}, {"role": "developer", "content": [
            {"type": "text", "text": "No emoji."}]}, USER]},
        {"system": [{"type": "text", "text": "Be brief."}, {"type": "text", "text": "No emoji."}],
         "messages": [{"role": "user", "content": [{"type": "text", "text": "hi"}]}], "max_tokens": 4096},
    ),
    (
        "max_completion_tokens becomes max_tokens; sampling and stop carried",
        {"messages": [USER], "max_completion_tokens": 300, "temperature": 0.3, "top_p": 0.9, "stop": "END",
         "user": "u-1", "seed": 7, "store": True, "metadata": {"k": "v"}},
        {"messages": [{"role": "user", "content": [{"type": "text", "text": "hi"}]}], "max_tokens": 300,
         "temperature": 0.3, "top_p": 0.9, "stop_sequences": ["END"], "metadata": {"user_id": "u-1"}},
    ),
    (
        "images as base64 and URL sources, a PDF and a text file as documents",
        {"messages": [{"role": "user", "content": [
            {"type": "text", "text": "look"},
            {"type": "image_url", "image_url": {"url": "data:image/png;base64,iVBOR", "detail": "high"}},
            {"type": "image_url", "image_url": {"url": "https://x.test/cat.jpg"}},
            {"type": "file", "file": {"filename": "a.pdf", "file_data": "data:application/pdf;base64,JVBER"}},
            {"type": "file", "file": {"file_data": "data:text/plain;base64,aGVsbG8="}},
        ]}], "max_tokens": 10},
        {"messages": [{"role": "user", "content": [
            {"type": "text", "text": "look"},
            {"type": "image", "source": {"type": "base64", "media_type": "image/png", "data": "iVBOR"}},
            {"type": "image", "source": {"type": "url", "url": "https://x.test/cat.jpg"}},
            {"type": "document", "source": {"type": "base64", "media_type": "application/pdf", "data": "JVBER"},
             "title": "a.pdf"},
            {"type": "document", "source": {"type": "text", "media_type": "text/plain", "data": "hello"}},
        ]}], "max_tokens": 10},
    ),
    (
        "tools, required tool choice without parallel calls",
        {"messages": [USER], "tools": [TOOL], "tool_choice": "required", "parallel_tool_calls": False,
         "max_tokens": 10},
        {"messages": [{"role": "user", "content": [{"type": "text", "text": "hi"}]}], "max_tokens": 10,
         "tools": [ANTHROPIC_TOOL], "tool_choice": {"type": "any", "disable_parallel_tool_use": True}},
    ),
    (
        "a forced function; a function without parameters gets an empty object schema",
        {"messages": [USER], "tools": [{"type": "function", "function": {"name": "ping", "strict": True}}],
         "tool_choice": {"type": "function", "function": {"name": "ping"}}, "max_tokens": 10},
        {"messages": [{"role": "user", "content": [{"type": "text", "text": "hi"}]}], "max_tokens": 10,
         "tools": [{"name": "ping", "input_schema": {"type": "object", "properties": {}}, "strict": True}],
         "tool_choice": {"type": "tool", "name": "ping"}},
    ),
    (
        "parallel tool calls and their results: tool_use blocks, one user turn of tool_result blocks",
        {"messages": [
            USER,
            {"role": "assistant", "content": "", "tool_calls": [
                {"id": "call_A", "type": "function", "function": {"name": "w", "arguments": '{"city": "Oslo"}'}},
                {"id": "call_B", "type": "function", "function": {"name": "t", "arguments": ""}}]},
            {"role": "tool", "tool_call_id": "call_A", "content": "3 C"},
            {"role": "tool", "tool_call_id": "call_B", "content": [{"type": "text", "text": "noon"}]},
            {"role": "user", "content": "thanks"},
        ], "tools": [TOOL], "max_tokens": 10},
        {"messages": [
            {"role": "user", "content": [{"type": "text", "text": "hi"}]},
            {"role": "assistant", "content": [
                {"type": "tool_use", "id": "call_A", "name": "w", "input": {"city": "Oslo"}},
                {"type": "tool_use", "id": "call_B", "name": "t", "input": {}}]},
            {"role": "user", "content": [
                {"type": "tool_result", "tool_use_id": "call_A", "content": "3 C"},
                {"type": "tool_result", "tool_use_id": "call_B", "content": [{"type": "text", "text": "noon"}]},
                {"type": "text", "text": "thanks"}]},
        ], "max_tokens": 10, "tools": [ANTHROPIC_TOOL]},
    ),
    (
        "json_schema becomes output_config.format",
        {"messages": [USER], "max_tokens": 10, "response_format": {"type": "json_schema", "json_schema": {
            "name": "r", "schema": {"type": "object", "properties": {"a": {"type": "string"}}}, "strict": True}}},
        {"messages": [{"role": "user", "content": [{"type": "text", "text": "hi"}]}], "max_tokens": 10,
         "output_config": {"format": {"type": "json_schema",
                                      "schema": {"type": "object", "properties": {"a": {"type": "string"}}}}}},
    ),
    (
        "json_object becomes an instruction in the system prompt",
        {"messages": [USER], "max_tokens": 10, "response_format": {"type": "json_object"}},
        {"messages": [{"role": "user", "content": [{"type": "text", "text": "hi"}]}], "max_tokens": 10,
         "system": [{"type": "text", "text": JSON_OBJECT_INSTRUCTION}]},
    ),
    (
        "reasoning effort becomes a thinking budget; max_tokens grows to leave the answer its room",
        {"messages": [USER], "max_completion_tokens": 1000, "reasoning_effort": "low"},
        {"messages": [{"role": "user", "content": [{"type": "text", "text": "hi"}]}], "max_tokens": 3048,
         "thinking": {"type": "enabled", "budget_tokens": 2048}},
    ),
    (
        "reasoning effort none disables thinking",
        {"messages": [USER], "max_tokens": 50, "reasoning_effort": "none"},
        {"messages": [{"role": "user", "content": [{"type": "text", "text": "hi"}]}], "max_tokens": 50,
         "thinking": {"type": "disabled"}},
    ),
    (
        "an assistant text turn keeps its text; an empty one is omitted",
        {"messages": [USER, {"role": "assistant", "content": [{"type": "text", "text": "Hello"}]},
                      {"role": "assistant", "content": ""}, {"role": "user", "content": "again"}], "max_tokens": 5},
        {"messages": [{"role": "user", "content": [{"type": "text", "text": "hi"}]},
                      {"role": "assistant", "content": [{"type": "text", "text": "Hello"}]},
                      {"role": "user", "content": [{"type": "text", "text": "again"}]}], "max_tokens": 5},
    ),
]


@pytest.mark.parametrize(("name", "body", "expected"), CASES, ids=[c[0] for c in CASES])
def test_it_translates(name: str, body: dict[str, Any], expected: dict[str, Any]) -> None:
    assert translate(body) == {"model": "claude-sonnet-4-5", **expected}


def test_it_defaults_max_tokens_to_the_models_limit() -> None:
    assert translate({"messages": [USER]}, max_output_tokens=8192)["max_tokens"] == 8192


def test_it_caps_the_grown_max_tokens_at_the_models_limit_and_shrinks_the_budget() -> None:
    out = translate({"messages": [USER], "max_tokens": 4000, "reasoning_effort": "high"}, max_output_tokens=10000)
    assert (out["max_tokens"], out["thinking"]["budget_tokens"]) == (10000, 9999)


def test_it_refuses_thinking_when_the_models_limit_leaves_no_room_for_it() -> None:
    with pytest.raises(CapabilityError) as raised:
        translate({"messages": [USER], "max_tokens": 600, "reasoning_effort": "low"}, max_output_tokens=1000)
    assert (raised.value.capability, raised.value.param) == ("reasoning", "max_tokens")


REFUSALS: list[tuple[dict[str, Any], type[TranslationError], str, str]] = [
    ({"n": 2}, CapabilityError, "n", "n"),
    ({"messages": [{"role": "user", "content": [{"type": "text", "text": "x"}, {"type": "input_audio",
      "input_audio": {"data": "AAA", "format": "wav"}}]}]}, CapabilityError, "audio", "messages[0].content[1]"),
    ({"modalities": ["text", "audio"]}, CapabilityError, "audio", "modalities"),
    ({"messages": [{"role": "user", "content": [{"type": "file", "file": {"file_id": "file-1"}}]}]},
     CapabilityError, "file", "messages[0].content[0].file.file_id"),
    ({"messages": [{"role": "user", "content": [{"type": "file", "file": {
        "file_data": "data:application/zip;base64,UEs="}}]}]},
     CapabilityError, "file", "messages[0].content[0].file.file_data"),
    ({"messages": [{"role": "user", "content": [{"type": "image_url", "image_url": {
        "url": "data:image/bmp;base64,Qk0="}}]}]}, CapabilityError, "image", "messages[0].content[0].image_url.url"),
    ({"messages": [{"role": "user", "content": [{"type": "image_url", "image_url": {
        "url": "data:image/png,raw"}}]}]}, RequestShapeError, "", "messages[0].content[0].image_url.url"),
    ({"temperature": 1.5}, CapabilityError, "temperature", "temperature"),
    ({"logprobs": True}, CapabilityError, "logprobs", "logprobs"),
    ({"presence_penalty": 0.5}, CapabilityError, "presence_penalty", "presence_penalty"),
    ({"logit_bias": {"42": 5}}, CapabilityError, "logit_bias", "logit_bias"),
    ({"web_search_options": {}}, CapabilityError, "web_search_options", "web_search_options"),
    ({"functions": [{"name": "f"}]}, CapabilityError, "functions", "functions"),
    ({"tools": [TOOL], "tool_choice": "required", "reasoning_effort": "low"}, CapabilityError, "tool_choice",
     "tool_choice"),
    ({"reasoning_effort": "low", "temperature": 0.2}, CapabilityError, "temperature", "temperature"),
    ({"reasoning_effort": "extreme"}, RequestShapeError, "", "reasoning_effort"),
    ({"messages": [USER, {"role": "assistant", "tool_calls": [{"id": "c", "type": "function", "function": {
        "name": "f", "arguments": "{oops"}}]}]}, RequestShapeError, "", "messages[1].tool_calls[0].function.arguments"),
    ({"messages": [{"role": "user", "content": [{"type": "video", "video": {}}]}]}, RequestShapeError, "",
     "messages[0].content[0].type"),
    ({"messages": [{"role": "function", "name": "f", "content": "x"}]}, RequestShapeError, "", "messages[0].role"),
    ({"messages": [{"role": "tool", "content": "x"}]}, RequestShapeError, "", "messages[0].tool_call_id"),
    ({"messages": "hi"}, RequestShapeError, "", "messages"),
    ({"messages": [USER], "top_p": "high"}, RequestShapeError, "", "top_p"),
]


@pytest.mark.parametrize(("extra", "error", "capability", "param"), REFUSALS,
                         ids=[r[3] + ":" + (r[2] or "shape") for r in REFUSALS])
def test_it_refuses_before_sending(
    extra: dict[str, Any], error: type[TranslationError], capability: str, param: str
) -> None:
    body = {"messages": [USER], **extra}
    with pytest.raises(error) as raised:
        translate(body)
    assert type(raised.value) is error
    assert raised.value.param == param
    assert raised.value.status == 400
    if isinstance(raised.value, CapabilityError):
        assert raised.value.capability == capability

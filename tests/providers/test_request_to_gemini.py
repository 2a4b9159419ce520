"""Requests of both client shapes sent to Gemini: the translation table, then the refusals."""

from __future__ import annotations

from typing import Any

import pytest

from routing.providers import CapabilityError, RequestShapeError, TranslationError, get_adapter
from routing.providers.common.tool_call_ids import SKIP_SIGNATURE, new_tool_call_id
from tests.providers.support import GEMINI_SIGNATURE, PROVIDERS, model

USER = {"role": "user", "content": "hi"}
SCHEMA = {"type": "object", "properties": {"city": {"type": "string"}}, "additionalProperties": False}
SIGNED_ID = new_tool_call_id(GEMINI_SIGNATURE)


def translate(body: dict[str, Any], inbound: str = "openai") -> dict[str, Any]:
    request = get_adapter("gemini").build_request(
        provider=PROVIDERS["gemini"], model=model("gemini"), body={"model": "pub", **body},
        inbound=inbound, stream=False, api_key="k",  # type: ignore[arg-type]
    )
    return request.json


OPENAI_CASES: list[tuple[str, dict[str, Any], dict[str, Any]]] = [
    (
        "system instruction, user and model roles, generation settings",
        {"messages": [{"role": "system", "content": "Be brief."}, USER, {"role": "assistant", "content": "Hello"},
                      {"role": "user", "content": "again"}],
         "temperature": 0.5, "top_p": 0.8, "max_completion_tokens": 256, "stop": ["END"], "n": 2, "seed": 3,
         "presence_penalty": 0.1, "frequency_penalty": 0.2, "user": "u", "parallel_tool_calls": False},
        {"contents": [{"role": "user", "parts": [{"text": "hi"}]}, {"role": "model", "parts": [{"text": "Hello"}]},
                      {"role": "user", "parts": [{"text": "again"}]}],
         "systemInstruction": {"parts": [{"text": "Be brief."}]},
         "generationConfig": {"temperature": 0.5, "topP": 0.8, "seed": 3, "presencePenalty": 0.1,
                              "frequencyPenalty": 0.2, "maxOutputTokens": 256, "stopSequences": ["END"],
                              "candidateCount": 2}},
    ),
    (
        "images, audio and files as inline or file data",
        {"messages": [{"role": "user", "content": [
            {"type": "image_url", "image_url": {"url": "data:image/webp;base64,UklG"}},
            {"type": "image_url", "image_url": {"url": "https://x.test/a.png"}},
            {"type": "image_url", "image_url": {"url": "https://x.test/photo"}},
            {"type": "input_audio", "input_audio": {"data": "UklGR", "format": "wav"}},
            {"type": "file", "file": {"file_data": "data:application/pdf;base64,JVBER", "filename": "a.pdf"}},
        ]}]},
        {"contents": [{"role": "user", "parts": [
            {"inlineData": {"mimeType": "image/webp", "data": "UklG"}},
            {"fileData": {"mimeType": "image/png", "fileUri": "https://x.test/a.png"}},
            {"fileData": {"mimeType": "image/jpeg", "fileUri": "https://x.test/photo"}},
            {"inlineData": {"mimeType": "audio/wav", "data": "UklGR"}},
            {"inlineData": {"mimeType": "application/pdf", "data": "JVBER"}},
        ]}]},
    ),
    (
        "tools as JSON-schema declarations; a forced function",
        {"messages": [USER], "tools": [{"type": "function", "function": {"name": "w", "description": "weather",
                                                                         "parameters": SCHEMA}}],
         "tool_choice": {"type": "function", "function": {"name": "w"}}},
        {"contents": [{"role": "user", "parts": [{"text": "hi"}]}],
         "tools": [{"functionDeclarations": [{"name": "w", "description": "weather", "parametersJsonSchema": SCHEMA}]}],
         "toolConfig": {"functionCallingConfig": {"mode": "ANY", "allowedFunctionNames": ["w"]}}},
    ),
    (
        "calls and results: names looked up by id, signatures restored, results of parallel calls in one turn",
        {"messages": [
            USER,
            {"role": "assistant", "content": None, "tool_calls": [
                {"id": SIGNED_ID, "type": "function", "function": {"name": "w", "arguments": '{"city":"Oslo"}'}},
                {"id": "call_2", "type": "function", "function": {"name": "t", "arguments": "{}"}}]},
            {"role": "tool", "tool_call_id": SIGNED_ID, "content": '{"temp": 3}'},
            {"role": "tool", "tool_call_id": "call_2", "content": "noon"},
            {"role": "assistant", "tool_calls": [
                {"id": "toolu_X", "type": "function", "function": {"name": "t", "arguments": ""}}]},
            {"role": "tool", "tool_call_id": "toolu_X", "content": [{"type": "text", "text": "[1, 2]"}]},
        ]},
        {"contents": [
            {"role": "user", "parts": [{"text": "hi"}]},
            {"role": "model", "parts": [
                {"functionCall": {"name": "w", "args": {"city": "Oslo"}}, "thoughtSignature": GEMINI_SIGNATURE},
                {"functionCall": {"name": "t", "args": {}}}]},
            {"role": "user", "parts": [
                {"functionResponse": {"name": "w", "response": {"temp": 3}}},
                {"functionResponse": {"name": "t", "response": {"content": "noon"}}}]},
            {"role": "model", "parts": [
                {"functionCall": {"name": "t", "args": {}}, "thoughtSignature": SKIP_SIGNATURE}]},
            {"role": "user", "parts": [{"functionResponse": {"name": "t", "response": {"content": "[1, 2]"}}}]},
        ]},
    ),
    (
        "json_schema response format and reasoning effort",
        {"messages": [USER], "response_format": {"type": "json_schema", "json_schema": {"name": "r", "schema": SCHEMA}},
         "reasoning_effort": "medium"},
        {"contents": [{"role": "user", "parts": [{"text": "hi"}]}],
         "generationConfig": {"responseMimeType": "application/json", "responseJsonSchema": SCHEMA,
                              "thinkingConfig": {"thinkingBudget": 8192, "includeThoughts": True}}},
    ),
    (
        "json_object mode; reasoning off; tool_choice none",
        {"messages": [USER], "response_format": {"type": "json_object"}, "reasoning_effort": "none",
         "tool_choice": "none"},
        {"contents": [{"role": "user", "parts": [{"text": "hi"}]}],
         "generationConfig": {"responseMimeType": "application/json", "thinkingConfig": {"thinkingBudget": 0}},
         "toolConfig": {"functionCallingConfig": {"mode": "NONE"}}},
    ),
]


@pytest.mark.parametrize(("name", "body", "expected"), OPENAI_CASES, ids=[c[0] for c in OPENAI_CASES])
def test_it_translates_openai_requests(name: str, body: dict[str, Any], expected: dict[str, Any]) -> None:
    assert translate(body) == expected


def test_it_translates_anthropic_requests_through_the_openai_form() -> None:
    body = {
        "max_tokens": 500, "system": "Be brief.", "top_k": 40, "stop_sequences": ["END"],
        "thinking": {"type": "enabled", "budget_tokens": 2048},
        "tools": [{"name": "w", "input_schema": SCHEMA}], "tool_choice": {"type": "auto"},
        "messages": [
            {"role": "user", "content": [{"type": "text", "text": "hi"}, {"type": "image", "source": {
                "type": "base64", "media_type": "image/gif", "data": "R0lG"}}]},
            {"role": "assistant", "content": [{"type": "tool_use", "id": "toolu_1", "name": "w",
                                               "input": {"city": "Oslo"}}]},
            {"role": "user", "content": [{"type": "tool_result", "tool_use_id": "toolu_1", "content": "3 C"}]},
        ],
    }
    assert translate(body, inbound="anthropic") == {
        "contents": [
            {"role": "user", "parts": [{"text": "hi"}, {"inlineData": {"mimeType": "image/gif", "data": "R0lG"}}]},
            {"role": "model", "parts": [{"functionCall": {"name": "w", "args": {"city": "Oslo"}},
                                         "thoughtSignature": SKIP_SIGNATURE}]},
            {"role": "user", "parts": [{"functionResponse": {"name": "w", "response": {"content": "3 C"}}}]},
        ],
        "systemInstruction": {"parts": [{"text": "Be brief."}]},
        "generationConfig": {"topK": 40, "maxOutputTokens": 500, "stopSequences": ["END"],
                             "thinkingConfig": {"thinkingBudget": 2048, "includeThoughts": True}},
        "tools": [{"functionDeclarations": [{"name": "w", "parametersJsonSchema": SCHEMA}]}],
        "toolConfig": {"functionCallingConfig": {"mode": "AUTO"}},
    }


REFUSALS: list[tuple[dict[str, Any], type[TranslationError], str]] = [
    ({"logit_bias": {"1": 1}}, CapabilityError, "logit_bias"),
    ({"logprobs": True, "top_logprobs": 2}, CapabilityError, "logprobs"),
    ({"modalities": ["audio"], "audio": {"voice": "x"}}, CapabilityError, "modalities"),
    ({"messages": [{"role": "user", "content": [{"type": "file", "file": {"file_id": "f"}}]}]}, CapabilityError,
     "messages[0].content[0].file.file_id"),
    ({"tools": [{"type": "custom", "custom": {"name": "c"}}]}, CapabilityError, "tools[0].type"),
    ({"tool_choice": {"type": "allowed_tools", "allowed_tools": {}}}, CapabilityError, "tool_choice.type"),
    ({"messages": [USER, {"role": "tool", "tool_call_id": "nobody", "content": "x"}]}, RequestShapeError,
     "messages[1].tool_call_id"),
    ({"messages": [{"role": "user", "content": [{"type": "image_url", "image_url": {"url": "ftp://x/a.png"}}]}]},
     RequestShapeError, "messages[0].content[0].image_url.url"),
    ({"response_format": {"type": "yaml"}}, RequestShapeError, "response_format.type"),
    ({"n": "two"}, RequestShapeError, "n"),
]


@pytest.mark.parametrize(("extra", "error", "param"), REFUSALS, ids=[r[2] for r in REFUSALS])
def test_it_refuses_before_sending(extra: dict[str, Any], error: type[TranslationError], param: str) -> None:
    with pytest.raises(error) as raised:
        translate({"messages": [USER], **extra})
    assert type(raised.value) is error
    assert raised.value.param == param

"""Anthropic Messages requests sent to OpenAI-format models: the translation table, then the refusals."""

from __future__ import annotations

from typing import Any

import pytest

from routing.core.table import CAPABILITIES
from routing.providers import CapabilityError, RequestShapeError, TranslationError, get_adapter
from tests.providers.support import PROVIDERS, model

USER = {"role": "user", "content": "hi"}
NON_REASONING = frozenset(CAPABILITIES) - {"reasoning"}
SCHEMA = {"type": "object", "properties": {"city": {"type": "string"}}}


def translate(body: dict[str, Any], *, kind: str = "openai", stream: bool = False,
              capabilities: frozenset[str] = NON_REASONING) -> dict[str, Any]:
    request = get_adapter(kind).build_request(
        provider=PROVIDERS[kind], model=model(kind, capabilities=capabilities),
        body={"model": "pub", "max_tokens": 100, **body}, inbound="anthropic", stream=stream, api_key="k",
    )
    return request.json


CASES: list[tuple[str, dict[str, Any], dict[str, Any]]] = [
    (
        "system blocks become one system message; sampling and stop sequences carried; user_id becomes user",
        {"system": [{"type": "text", "text": "Be brief.", "cache_control": {"type": "ephemeral"}},
                    {"type": "text", "text": "No emoji."}],
         "messages": [USER], "temperature": 0.2, "top_p": 0.9, "stop_sequences": ["END"],
         "metadata": {"user_id": "u-1"}, "cache_control": {"type": "ephemeral"}, "service_tier": "auto"},
        {"messages": [{"role": "system", "content": "Be brief.\n\nNo emoji."}, {"role": "user", "content": "hi"}],
         "max_tokens": 100, "stop": ["END"], "temperature": 0.2, "top_p": 0.9, "user": "u-1"},
    ),
    (
        "images and documents become image_url and file parts",
        {"messages": [{"role": "user", "content": [
            {"type": "text", "text": "look"},
            {"type": "image", "source": {"type": "base64", "media_type": "image/png", "data": "iVBOR"}},
            {"type": "image", "source": {"type": "url", "url": "https://x.test/cat.jpg"}},
            {"type": "document", "title": "a.pdf", "source": {"type": "base64", "media_type": "application/pdf",
                                                              "data": "JVBER"}},
            {"type": "document", "source": {"type": "text", "media_type": "text/plain", "data": "plain words"}},
        ]}]},
        {"messages": [{"role": "user", "content": [
            {"type": "text", "text": "look"},
            {"type": "image_url", "image_url": {"url": "data:image/png;base64,iVBOR"}},
            {"type": "image_url", "image_url": {"url": "https://x.test/cat.jpg"}},
            {"type": "file", "file": {"filename": "a.pdf", "file_data": "data:application/pdf;base64,JVBER"}},
            {"type": "text", "text": "plain words"},
        ]}], "max_tokens": 100},
    ),
    (
        "tool use and results: assistant tool_calls, then tool messages, then the rest of the user turn",
        {"messages": [
            USER,
            {"role": "assistant", "content": [
                {"type": "thinking", "thinking": "hmm", "signature": "sig"},
                {"type": "text", "text": "Checking."},
                {"type": "tool_use", "id": "toolu_A", "name": "w", "input": {"city": "Oslo"}},
                {"type": "tool_use", "id": "toolu_B", "name": "t", "input": {}}]},
            {"role": "user", "content": [
                {"type": "tool_result", "tool_use_id": "toolu_A", "content": "3 C"},
                {"type": "tool_result", "tool_use_id": "toolu_B", "is_error": True,
                 "content": [{"type": "text", "text": "clock broken"}]},
                {"type": "text", "text": "and?"}]},
        ]},
        {"messages": [
            {"role": "user", "content": "hi"},
            {"role": "assistant", "content": "Checking.", "tool_calls": [
                {"id": "call_A", "type": "function", "function": {"name": "w", "arguments": '{"city": "Oslo"}'}},
                {"id": "call_B", "type": "function", "function": {"name": "t", "arguments": "{}"}}]},
            {"role": "tool", "tool_call_id": "call_A", "content": "3 C"},
            {"role": "tool", "tool_call_id": "call_B", "content": "Error: clock broken"},
            {"role": "user", "content": "and?"},
        ], "max_tokens": 100},
    ),
    (
        "an image returned by a tool follows the tool messages in a user message",
        {"messages": [
            {"role": "assistant", "content": [{"type": "tool_use", "id": "toolu_A", "name": "shot", "input": {}}]},
            {"role": "user", "content": [{"type": "tool_result", "tool_use_id": "toolu_A", "content": [
                {"type": "text", "text": "done"},
                {"type": "image", "source": {"type": "base64", "media_type": "image/png", "data": "iVB"}}]}]},
        ]},
        {"messages": [
            {"role": "assistant", "content": None, "tool_calls": [
                {"id": "call_A", "type": "function", "function": {"name": "shot", "arguments": "{}"}}]},
            {"role": "tool", "tool_call_id": "call_A", "content": "done"},
            {"role": "user", "content": [
                {"type": "text", "text": "[attachments returned by tool call call_A]"},
                {"type": "image_url", "image_url": {"url": "data:image/png;base64,iVB"}}]},
        ], "max_tokens": 100},
    ),
    (
        "tools; tool_choice any without parallel use becomes required without parallel calls",
        {"messages": [USER], "tools": [{"name": "w", "description": "weather", "input_schema": SCHEMA,
                                        "cache_control": {"type": "ephemeral"}}],
         "tool_choice": {"type": "any", "disable_parallel_tool_use": True}},
        {"messages": [{"role": "user", "content": "hi"}], "max_tokens": 100,
         "tools": [{"type": "function", "function": {"name": "w", "description": "weather", "parameters": SCHEMA}}],
         "tool_choice": "required", "parallel_tool_calls": False},
    ),
    (
        "a forced tool; strict carried",
        {"messages": [USER], "tools": [{"name": "w", "input_schema": SCHEMA, "strict": True}],
         "tool_choice": {"type": "tool", "name": "w"}},
        {"messages": [{"role": "user", "content": "hi"}], "max_tokens": 100,
         "tools": [{"type": "function", "function": {"name": "w", "parameters": SCHEMA, "strict": True}}],
         "tool_choice": {"type": "function", "function": {"name": "w"}}},
    ),
    (
        "output_config.format becomes a strict json_schema response_format",
        {"messages": [USER], "output_config": {"format": {"type": "json_schema", "schema": SCHEMA}}},
        {"messages": [{"role": "user", "content": "hi"}], "max_tokens": 100,
         "response_format": {"type": "json_schema", "json_schema": {"name": "response", "schema": SCHEMA,
                                                                    "strict": True}}},
    ),
]


@pytest.mark.parametrize(("name", "body", "expected"), CASES, ids=[c[0] for c in CASES])
def test_it_translates(name: str, body: dict[str, Any], expected: dict[str, Any]) -> None:
    assert translate(body) == {"model": "gpt-4o-mini", **expected}


@pytest.mark.parametrize(
    ("thinking", "output_config", "effort"),
    [
        ({"type": "enabled", "budget_tokens": 1024}, None, "low"),
        ({"type": "enabled", "budget_tokens": 2048}, None, "low"),
        ({"type": "enabled", "budget_tokens": 4000}, None, "medium"),
        ({"type": "enabled", "budget_tokens": 10000}, None, "high"),
        ({"type": "adaptive"}, None, "medium"),
        ({"type": "adaptive"}, {"effort": "high"}, "high"),
        (None, {"effort": "max"}, "xhigh"),
        ({"type": "disabled"}, None, None),
    ],
)
def test_it_maps_thinking_to_reasoning_effort(
    thinking: dict[str, Any] | None, output_config: dict[str, Any] | None, effort: str | None
) -> None:
    body: dict[str, Any] = {"messages": [USER]}
    if thinking:
        body["thinking"] = thinking
    if output_config:
        body["output_config"] = output_config
    out = translate(body, capabilities=frozenset(CAPABILITIES))
    assert out.get("reasoning_effort") == effort
    assert out["max_completion_tokens"] == 100  # reasoning models refuse max_tokens
    assert "max_tokens" not in out


def test_it_asks_for_usage_on_streams() -> None:
    out = translate({"messages": [USER], "stream": True}, stream=True)
    assert (out["stream"], out["stream_options"]) == (True, {"include_usage": True})


@pytest.mark.parametrize("kind", ["openai", "azure_openai"])
def test_it_refuses_top_k_for_openai_formats_but_gemini_takes_it(kind: str) -> None:
    with pytest.raises(CapabilityError) as raised:
        translate({"messages": [USER], "top_k": 5}, kind=kind)
    assert raised.value.param == "top_k"
    assert translate({"messages": [USER], "top_k": 5}, kind="gemini")["generationConfig"]["topK"] == 5


REFUSALS: list[tuple[dict[str, Any], type[TranslationError], str]] = [
    ({"tools": [{"type": "web_search_20250305", "name": "web_search"}]}, CapabilityError, "tools[0].type"),
    ({"messages": [{"role": "user", "content": [{"type": "image", "source": {"type": "file", "file_id": "f"}}]}]},
     CapabilityError, "messages[0].content[0].source.type"),
    ({"messages": [{"role": "user", "content": [{"type": "document", "source": {
        "type": "url", "url": "https://x.test/a.pdf"}}]}]}, CapabilityError, "messages[0].content[0].source.type"),
    ({"messages": [{"role": "user", "content": [{"type": "document", "citations": {"enabled": True}, "source": {
        "type": "text", "media_type": "text/plain", "data": "x"}}]}]},
     CapabilityError, "messages[0].content[0].citations"),
    ({"messages": [{"role": "user", "content": [{"type": "search_result", "source": "s", "title": "t",
                                                 "content": []}]}]},
     CapabilityError, "messages[0].content[0].type"),
    ({"messages": [{"role": "assistant", "content": [{"type": "server_tool_use", "id": "s", "name": "web_search",
                                                      "input": {}}]}]},
     CapabilityError, "messages[0].content[0].type"),
    ({"container": "c1"}, CapabilityError, "container"),
    ({"mcp_servers": []}, CapabilityError, "mcp_servers"),
    ({"messages": [{"role": "system", "content": "x"}]}, RequestShapeError, "messages[0].role"),
    ({"messages": [{"role": "user", "content": [{"type": "tool_use", "id": "t", "name": "n", "input": {}}]}]},
     RequestShapeError, "messages[0].content[0].type"),
    ({"messages": [{"role": "user", "content": [{"type": "tool_result"}]}]}, RequestShapeError,
     "messages[0].content[0].tool_use_id"),
    ({"system": [{"type": "image"}]}, RequestShapeError, "system[0].type"),
    ({"thinking": {"type": "enabled"}}, RequestShapeError, "thinking.budget_tokens"),
    ({"tool_choice": {"type": "sometimes"}}, RequestShapeError, "tool_choice.type"),
    ({"output_config": {"format": {"type": "xml"}}}, RequestShapeError, "output_config.format.type"),
]


@pytest.mark.parametrize(("extra", "error", "param"), REFUSALS, ids=[r[2] for r in REFUSALS])
@pytest.mark.parametrize("kind", ["openai", "gemini"])
def test_it_refuses_before_sending(extra: dict[str, Any], error: type[TranslationError], param: str,
                                   kind: str) -> None:
    with pytest.raises(error) as raised:
        translate({"messages": [USER], **extra}, kind=kind, capabilities=frozenset(CAPABILITIES))
    assert type(raised.value) is error
    assert raised.value.param == param

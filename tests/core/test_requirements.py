"""Requirements read from OpenAI and Anthropic request bodies."""

from __future__ import annotations

from typing import Any

import pytest

from routing.core.requirements import ATTACHMENT_TOKENS, DeclaredTool, requirements_from_request

WEATHER_SCHEMA = {"type": "object", "properties": {"city": {"type": "string"}}, "required": ["city"]}


def test_it_reads_a_plain_openai_chat() -> None:
    body = {"model": "normal", "messages": [{"role": "user", "content": "x" * 400}], "max_tokens": 256}
    req = requirements_from_request(body, api="openai")
    assert req.modalities == {"text"}
    assert req.estimated_input_tokens == 100
    assert req.max_output_tokens == 256
    assert (req.tools, req.tool_choice, req.response_schema, req.json_required) == ((), "auto", None, False)


def test_it_finds_openai_images_audio_and_files() -> None:
    body = {"messages": [{"role": "user", "content": [
        {"type": "text", "text": "what is this?"},
        {"type": "image_url", "image_url": {"url": "data:image/png;base64," + "A" * 10_000}},
        {"type": "input_audio", "input_audio": {"data": "AAAA", "format": "wav"}},
        {"type": "file", "file": {"file_id": "file-1"}},
    ]}]}
    req = requirements_from_request(body, api="openai")
    assert req.modalities == {"text", "image", "audio", "file"}
    # The base64 payload is not text: only the question and three attachments count.
    assert req.estimated_input_tokens == 4 + 3 * ATTACHMENT_TOKENS


def test_it_reads_openai_tools_tool_choice_and_schema() -> None:
    body = {
        "messages": [{"role": "user", "content": "weather?"}],
        "tools": [
            {"type": "function", "function": {"name": "get_weather", "parameters": WEATHER_SCHEMA}},
            {"type": "custom", "custom": {"name": "run_sql"}},
        ],
        "tool_choice": {"type": "function", "function": {"name": "get_weather"}},
        "response_format": {"type": "json_schema", "json_schema": {"name": "w", "schema": WEATHER_SCHEMA,
                                                                   "strict": True}},
        "max_completion_tokens": 1000,
        "max_tokens": 50,
    }
    req = requirements_from_request(body, api="openai")
    assert req.tools == (DeclaredTool("get_weather", WEATHER_SCHEMA), DeclaredTool("run_sql", None, freeform=True))
    assert (req.tool_choice, req.forced_tool) == ("required", "get_weather")
    assert (req.response_schema, req.json_required, req.strict) == (WEATHER_SCHEMA, True, True)
    assert req.max_output_tokens == 1000  # max_completion_tokens wins over the deprecated max_tokens


@pytest.mark.parametrize(
    ("choice", "expected"),
    [("none", ("none", None)), ("required", ("required", None)), ("auto", ("auto", None)),
     (None, ("auto", None)), ({"type": "function", "function": {"name": "f"}}, ("required", "f"))],
)
def test_it_reads_every_openai_tool_choice(choice: Any, expected: tuple[str, str | None]) -> None:
    body: dict[str, Any] = {"messages": [], "tools": [{"type": "function", "function": {"name": "f"}}]}
    if choice is not None:
        body["tool_choice"] = choice
    req = requirements_from_request(body, api="openai")
    assert (req.tool_choice, req.forced_tool) == expected


def test_it_reads_legacy_openai_functions() -> None:
    body = {"messages": [], "functions": [{"name": "f", "parameters": WEATHER_SCHEMA}], "function_call": "none"}
    req = requirements_from_request(body, api="openai")
    assert req.tools == (DeclaredTool("f", WEATHER_SCHEMA),)
    assert req.tool_choice == "none"


def test_it_reads_openai_json_mode_without_a_schema() -> None:
    req = requirements_from_request({"messages": [], "response_format": {"type": "json_object"}}, api="openai")
    assert (req.json_required, req.response_schema) == (True, None)


def test_it_asks_for_audio_when_an_openai_request_wants_spoken_output() -> None:
    req = requirements_from_request({"messages": [], "modalities": ["text", "audio"]}, api="openai")
    assert "audio" in req.modalities


def test_it_reads_an_anthropic_request() -> None:
    body = {
        "model": "normal",
        "max_tokens": 4096,
        "system": [{"type": "text", "text": "s" * 40}],
        "messages": [
            {"role": "user", "content": [
                {"type": "image", "source": {"type": "base64", "media_type": "image/png", "data": "AAAA"}},
                {"type": "document", "source": {"type": "base64", "media_type": "application/pdf", "data": "A"}},
                {"type": "text", "text": "t" * 40},
            ]},
            {"role": "assistant", "content": [{"type": "tool_use", "id": "tu1", "name": "get_weather",
                                               "input": {"city": "Paris"}}]},
            {"role": "user", "content": [{"type": "tool_result", "tool_use_id": "tu1", "content": [
                {"type": "text", "text": "r" * 40},
                {"type": "image", "source": {"type": "base64", "media_type": "image/png", "data": "AAAA"}},
            ]}]},
        ],
        "tools": [
            {"name": "get_weather", "description": "d", "input_schema": WEATHER_SCHEMA},
            {"type": "bash_20250124", "name": "bash"},
        ],
        "tool_choice": {"type": "tool", "name": "get_weather"},
    }
    req = requirements_from_request(body, api="anthropic")
    assert req.modalities == {"text", "image", "file"}
    assert req.max_output_tokens == 4096
    assert req.tools == (DeclaredTool("get_weather", WEATHER_SCHEMA), DeclaredTool("bash", None))
    assert (req.tool_choice, req.forced_tool) == ("required", "get_weather")
    assert req.estimated_input_tokens > 3 * ATTACHMENT_TOKENS + 30  # three attachments and the text


@pytest.mark.parametrize("field", ["output_format", "output_config"])
def test_it_reads_anthropic_structured_output(field: str) -> None:
    fmt = {"type": "json_schema", "schema": WEATHER_SCHEMA}
    body: dict[str, Any] = {"messages": [], "max_tokens": 10}
    body[field] = fmt if field == "output_format" else {"format": fmt}
    req = requirements_from_request(body, api="anthropic")
    assert (req.response_schema, req.json_required) == (WEATHER_SCHEMA, True)


@pytest.mark.parametrize(
    ("choice", "expected"),
    [({"type": "auto"}, ("auto", None)), ({"type": "any"}, ("required", None)), ({"type": "none"}, ("none", None))],
)
def test_it_reads_every_anthropic_tool_choice(choice: dict[str, str], expected: tuple[str, str | None]) -> None:
    req = requirements_from_request({"messages": [], "tool_choice": choice}, api="anthropic")
    assert (req.tool_choice, req.forced_tool) == expected


def test_it_ignores_malformed_fields_instead_of_failing() -> None:
    body = {"messages": "nope", "tools": [1, {"function": "x"}], "response_format": "json",
            "max_tokens": -3, "tool_choice": 7}
    req = requirements_from_request(body, api="openai")
    assert (req.tools, req.max_output_tokens, req.json_required) == ((), None, False)


def test_it_does_not_recurse_forever_into_nested_content() -> None:
    content: Any = [{"type": "text", "text": "deep"}]
    for _ in range(50):
        content = [{"type": "tool_result", "content": content}]
    req = requirements_from_request({"messages": [{"role": "user", "content": content}]}, api="anthropic")
    assert req.estimated_input_tokens == 0  # too deep to count, and no crash

"""The Anthropic Messages wire format: JSON, named SSE events, cache usage, and the real anthropic SDK."""

from __future__ import annotations

import json

import anthropic
import httpx2 as httpx
import jsonschema
import pytest

from routing.simulator import SimulatorServer
from tests.simulator.wire_helpers import ANTHROPIC_HEADERS, WEATHER_TOOL_SCHEMA, anthropic_body, sse_events

WEATHER_TOOL = {"name": "get_weather", "description": "Weather by city", "input_schema": WEATHER_TOOL_SCHEMA}


def sdk(sim: SimulatorServer) -> anthropic.Anthropic:
    return anthropic.Anthropic(base_url=sim.base_url, api_key="sk-ant-test", max_retries=0)


def post(client: httpx.Client, body: dict[str, object]) -> httpx.Response:
    return client.post("/v1/messages", json=body, headers=ANTHROPIC_HEADERS)


def test_it_answers_a_message(client: httpx.Client) -> None:
    message = post(client, anthropic_body("Hello Claude")).json()

    assert message["type"] == "message"
    assert message["role"] == "assistant"
    assert message["id"].startswith("msg_")
    assert message["model"] == "claude-test"
    assert message["content"] == [{"type": "text", "text": "Simulated answer 1 from claude-test: Hello Claude"}]
    assert message["stop_reason"] == "end_turn"
    assert message["stop_sequence"] is None
    usage = message["usage"]
    assert usage["input_tokens"] == (len("Hello Claude") + 3) // 4 + 3
    assert usage["output_tokens"] == (len(message["content"][0]["text"]) + 3) // 4
    assert usage["cache_read_input_tokens"] == 0
    assert usage["cache_creation_input_tokens"] == 0


def test_it_streams_anthropics_event_sequence(client: httpx.Client) -> None:
    events = sse_events(post(client, anthropic_body("Hello Claude", stream=True)).text)
    names = [name for name, _ in events]

    assert names[:3] == ["message_start", "content_block_start", "ping"]
    assert names[3:-3] == ["content_block_delta"] * 4
    assert names[-3:] == ["content_block_stop", "message_delta", "message_stop"]
    payloads = [json.loads(data) for _, data in events]
    assert all(payload["type"] == name for (name, _), payload in zip(events, payloads, strict=True))
    text = "".join(p["delta"]["text"] for p in payloads if p["type"] == "content_block_delta")
    assert text == "Simulated answer 1 from claude-test: Hello Claude"
    start_usage = payloads[0]["message"]["usage"]
    assert start_usage["input_tokens"] > 0
    assert "cache_read_input_tokens" in start_usage
    assert payloads[-2]["delta"] == {"stop_reason": "end_turn", "stop_sequence": None}
    assert payloads[-2]["usage"]["output_tokens"] == (len(text) + 3) // 4


@pytest.mark.parametrize(
    ("headers", "status", "error_type", "message"),
    [
        ({"anthropic-version": "2023-06-01"}, 401, "authentication_error", "x-api-key header is required"),
        ({"x-api-key": "sk-ant"}, 400, "invalid_request_error", "anthropic-version: header is required"),
    ],
)
def test_it_requires_a_key_and_a_version(client: httpx.Client, headers: dict[str, str], status: int,
                                        error_type: str, message: str) -> None:
    response = client.post("/v1/messages", json=anthropic_body(), headers=headers)

    assert response.status_code == status
    body = response.json()
    assert body["type"] == "error"
    assert body["error"] == {"type": error_type, "message": message}
    assert body["request_id"].startswith("req_")


def test_it_accepts_the_key_as_a_bearer_token(client: httpx.Client) -> None:
    headers = {"authorization": "Bearer sk-ant-test", "anthropic-version": "2023-06-01"}

    assert client.post("/v1/messages", json=anthropic_body(), headers=headers).status_code == 200


@pytest.mark.parametrize(
    ("body", "message"),
    [
        ({"model": "claude-test", "messages": [{"role": "user", "content": "hi"}]}, "max_tokens: Field required"),
        ({"model": "claude-test", "max_tokens": 10}, "messages: Field required"),
        ({"model": "claude-test", "max_tokens": 10, "messages": [{"role": "system", "content": "hi"}]},
         "messages.0.role: Input should be 'user' or 'assistant'"),
        ({**anthropic_body(), "thinking": {"type": "enabled", "budget_tokens": 4096}},
         "`max_tokens` must be greater than `thinking.budget_tokens`."),
    ],
)
def test_it_refuses_an_invalid_body(client: httpx.Client, body: dict[str, object], message: str) -> None:
    response = post(client, body)

    assert response.status_code == 400
    assert response.json()["error"] == {"type": "invalid_request_error", "message": message}


def test_it_stops_at_max_tokens(client: httpx.Client) -> None:
    message = post(client, {**anthropic_body("Tell me everything"), "max_tokens": 4}).json()

    assert message["stop_reason"] == "max_tokens"
    assert message["content"][0]["text"] == "Simulated answer"  # 4 tokens of 4 characters
    assert message["usage"]["output_tokens"] == 4


def test_it_stops_at_a_stop_sequence(client: httpx.Client) -> None:
    message = post(client, {**anthropic_body("alpha beta gamma"), "stop_sequences": ["beta"]}).json()

    assert message["stop_reason"] == "stop_sequence"
    assert message["stop_sequence"] == "beta"
    assert message["content"][0]["text"] == "Simulated answer 1 from claude-test: alpha "


def test_it_reports_cache_writes_then_reads_for_cache_control(client: httpx.Client) -> None:
    system = [{"type": "text", "text": "Policy text. " * 400, "cache_control": {"type": "ephemeral"}}]
    def body(question: str) -> dict[str, object]:
        return {**anthropic_body(question), "system": system,
                "messages": [{"role": "user", "content": "Earlier question"},
                             {"role": "assistant", "content": "Earlier answer"},
                             {"role": "user", "content": question}]}

    first = post(client, body("first")).json()["usage"]
    second = post(client, body("second")).json()["usage"]

    assert first["cache_creation_input_tokens"] > 1024
    assert first["cache_read_input_tokens"] == 0
    assert second["cache_read_input_tokens"] == first["cache_creation_input_tokens"]
    assert second["cache_creation_input_tokens"] == 0
    assert second["input_tokens"] < 20  # only the part after the cached prefix


def test_it_does_not_cache_without_cache_control(client: httpx.Client) -> None:
    body = {**anthropic_body("q"), "system": "Policy text. " * 400}
    post(client, body)

    assert post(client, body).json()["usage"]["cache_read_input_tokens"] == 0


def test_it_counts_images_and_documents(client: httpx.Client) -> None:
    plain = post(client, anthropic_body("Read this")).json()["usage"]["input_tokens"]
    content = [
        {"type": "image", "source": {"type": "base64", "media_type": "image/png", "data": "iVBORw0KGgo="}},
        {"type": "document", "source": {"type": "base64", "media_type": "application/pdf", "data": "JVBERi0="}},
        {"type": "text", "text": "Read this"},
    ]
    message = post(client, {**anthropic_body(), "messages": [{"role": "user", "content": content}]}).json()

    assert message["usage"]["input_tokens"] == plain + 2 * 765
    assert message["content"][0]["text"].endswith(": Read this")


def test_it_uses_a_tool_with_valid_input(client: httpx.Client) -> None:
    message = post(client, {**anthropic_body("Weather?"), "tools": [WEATHER_TOOL]}).json()

    assert message["stop_reason"] == "tool_use"
    block = message["content"][0]
    assert block["type"] == "tool_use"
    assert block["id"].startswith("toolu_")
    assert block["name"] == "get_weather"
    jsonschema.validate(block["input"], WEATHER_TOOL_SCHEMA)


def test_it_answers_structured_output_through_a_forced_tool(client: httpx.Client) -> None:
    record_tool = {"name": "record", "input_schema": {
        "type": "object", "properties": {"total": {"type": "number", "minimum": 10}}, "required": ["total"]}}
    body = {**anthropic_body("Extract"), "tools": [WEATHER_TOOL, record_tool],
            "tool_choice": {"type": "tool", "name": "record"}}
    block = post(client, body).json()["content"][0]

    assert block["name"] == "record"
    jsonschema.validate(block["input"], record_tool["input_schema"])


def test_it_answers_an_output_format_schema_with_valid_json(client: httpx.Client) -> None:
    schema = {"type": "object", "properties": {"tags": {"type": "array", "items": {"type": "string"},
                                                         "minItems": 1}}, "required": ["tags"]}
    body = {**anthropic_body(), "output_format": {"type": "json_schema", "schema": schema}}
    message = post(client, body).json()

    jsonschema.validate(json.loads(message["content"][0]["text"]), schema)


def test_it_answers_a_tool_result_in_text(client: httpx.Client) -> None:
    messages = [
        {"role": "user", "content": "Weather in Oslo?"},
        {"role": "assistant", "content": [{"type": "tool_use", "id": "toolu_1", "name": "get_weather",
                                           "input": {"city": "Oslo", "unit": "celsius", "days": 1}}]},
        {"role": "user", "content": [{"type": "tool_result", "tool_use_id": "toolu_1", "content": "Snow, -3"}]},
    ]
    message = post(client, {**anthropic_body(), "messages": messages, "tools": [WEATHER_TOOL]}).json()

    assert message["stop_reason"] == "end_turn"
    assert message["content"][0]["text"] == "Simulated answer 1 from claude-test: Snow, -3"


def test_it_streams_tool_input_as_partial_json(client: httpx.Client) -> None:
    events = sse_events(post(client, {**anthropic_body(), "tools": [WEATHER_TOOL], "stream": True}).text)
    payloads = [json.loads(data) for _, data in events]

    start = next(p for p in payloads if p["type"] == "content_block_start")
    assert start["content_block"]["type"] == "tool_use"
    assert start["content_block"]["input"] == {}
    partial = "".join(p["delta"]["partial_json"] for p in payloads if p["type"] == "content_block_delta")
    jsonschema.validate(json.loads(partial), WEATHER_TOOL_SCHEMA)
    assert payloads[-2]["delta"]["stop_reason"] == "tool_use"


def test_it_thinks_before_answering_when_thinking_is_enabled(client: httpx.Client) -> None:
    body = {**anthropic_body("Why?"), "max_tokens": 2048, "thinking": {"type": "enabled", "budget_tokens": 1024}}
    message = post(client, body).json()

    thinking, text = message["content"]
    assert thinking["type"] == "thinking"
    assert thinking["thinking"]
    assert thinking["signature"]
    assert text["type"] == "text"
    assert message["usage"]["output_tokens"] == (len(text["text"]) + 3) // 4 + (len(thinking["thinking"]) + 3) // 4


def test_the_anthropic_sdk_reads_a_message(sim: SimulatorServer) -> None:
    message = sdk(sim).messages.create(model="claude-test", max_tokens=100,
                                       messages=[{"role": "user", "content": "Hi"}])

    assert message.content[0].text == "Simulated answer 1 from claude-test: Hi"  # type: ignore[union-attr]
    assert message.usage.input_tokens == 4


def test_the_anthropic_sdk_reads_a_stream_with_thinking_and_usage(sim: SimulatorServer) -> None:
    with sdk(sim).messages.stream(
        model="claude-test", max_tokens=2048, messages=[{"role": "user", "content": "Hi"}],
        thinking={"type": "enabled", "budget_tokens": 1024},
    ) as stream:
        text = "".join(stream.text_stream)
        final = stream.get_final_message()

    assert text == "Simulated answer 1 from claude-test: Hi"
    assert [block.type for block in final.content] == ["thinking", "text"]
    assert final.stop_reason == "end_turn"
    assert final.usage.output_tokens > (len(text) + 3) // 4


def test_the_anthropic_sdk_reads_a_tool_use(sim: SimulatorServer) -> None:
    message = sdk(sim).messages.create(model="claude-test", max_tokens=100, tools=[WEATHER_TOOL],  # type: ignore[list-item]
                                       messages=[{"role": "user", "content": "Weather?"}])

    block = message.content[0]
    assert block.type == "tool_use"
    jsonschema.validate(block.input, WEATHER_TOOL_SCHEMA)  # type: ignore[union-attr]

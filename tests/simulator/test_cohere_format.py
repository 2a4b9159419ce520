"""The Cohere Chat v2 wire format: JSON and SSE answers, billed units and tokens, tools, JSON schema, errors."""

from __future__ import annotations

import json
from typing import Any

import httpx2 as httpx
import jsonschema

from routing.simulator import SimulatorServer
from routing.simulator.wire.cohere import TEMPLATE_TOKENS
from tests.simulator.wire_helpers import WEATHER_TOOL_SCHEMA, sse_events

HEADERS = {"authorization": "Bearer co-test-key"}
WEATHER_TOOLS = [{"type": "function", "function": {"name": "get_weather", "parameters": WEATHER_TOOL_SCHEMA}}]


def body(text: str = "Hello Cohere", model: str = "m", **extra: Any) -> dict[str, Any]:
    return {"model": model, "messages": [{"role": "user", "content": text}], **extra}


def events(response: httpx.Response) -> list[tuple[str | None, dict[str, Any]]]:
    return [(name, json.loads(data)) for name, data in sse_events(response.text)]


def test_it_answers_chat_with_billed_units_and_tokens(client: httpx.Client) -> None:
    answer = client.post("/v2/chat", json=body(), headers=HEADERS).json()

    assert answer["finish_reason"] == "COMPLETE"
    assert answer["message"]["role"] == "assistant"
    assert answer["message"]["content"] == [{"type": "text", "text": "Simulated answer 1 from m: Hello Cohere"}]
    billed, tokens = answer["usage"]["billed_units"], answer["usage"]["tokens"]
    assert billed["input_tokens"] == (len("Hello Cohere") + 3) // 4 + 3
    assert tokens["input_tokens"] == billed["input_tokens"] + TEMPLATE_TOKENS
    assert tokens["output_tokens"] == billed["output_tokens"] > 0


def test_it_streams_typed_events_with_usage_at_message_end(client: httpx.Client) -> None:
    response = client.post("/v2/chat", json=body(stream=True), headers=HEADERS)

    assert response.headers["content-type"].startswith("text/event-stream")
    stream = events(response)
    assert all(name == data["type"] for name, data in stream)
    kinds = [name for name, _ in stream]
    assert kinds[0] == "message-start"
    assert kinds[1] == "content-start"
    assert kinds[-2:] == ["content-end", "message-end"]
    text = "".join(d["delta"]["message"]["content"]["text"] for n, d in stream if n == "content-delta")
    assert text == "Simulated answer 1 from m: Hello Cohere"
    end = stream[-1][1]["delta"]
    assert end["finish_reason"] == "COMPLETE"
    assert end["usage"]["billed_units"]["output_tokens"] == (len(text) + 3) // 4


def test_it_calls_a_tool_with_arguments_valid_against_the_schema(client: httpx.Client) -> None:
    answer = client.post("/v2/chat", json=body(tools=WEATHER_TOOLS, tool_choice="REQUIRED"), headers=HEADERS).json()

    assert answer["finish_reason"] == "TOOL_CALL"
    call = answer["message"]["tool_calls"][0]
    assert call["type"] == "function"
    assert call["function"]["name"] == "get_weather"
    jsonschema.validate(json.loads(call["function"]["arguments"]), WEATHER_TOOL_SCHEMA)


def test_it_streams_a_tool_call_in_fragments(client: httpx.Client) -> None:
    stream = events(client.post("/v2/chat", json=body(tools=WEATHER_TOOLS, stream=True, tool_choice="REQUIRED"),
                                headers=HEADERS))

    kinds = [name for name, _ in stream]
    assert "tool-call-start" in kinds
    assert kinds.index("tool-call-start") < kinds.index("tool-call-delta") < kinds.index("tool-call-end")
    start = next(d for n, d in stream if n == "tool-call-start")["delta"]["message"]["tool_calls"]
    assert start["function"] == {"name": "get_weather", "arguments": ""}
    arguments = "".join(d["delta"]["message"]["tool_calls"]["function"]["arguments"]
                        for n, d in stream if n == "tool-call-delta")
    jsonschema.validate(json.loads(arguments), WEATHER_TOOL_SCHEMA)
    assert stream[-1][1]["delta"]["finish_reason"] == "TOOL_CALL"


def test_it_answers_a_tool_result_in_text(client: httpx.Client) -> None:
    messages = [
        {"role": "user", "content": "Weather?"},
        {"role": "assistant", "tool_plan": "I will look.", "tool_calls": [
            {"id": "c1", "type": "function", "function": {"name": "get_weather", "arguments": "{}"}}]},
        {"role": "tool", "tool_call_id": "c1", "content": "sunny"},
    ]
    answer = client.post("/v2/chat", json={"model": "m", "messages": messages, "tools": WEATHER_TOOLS},
                         headers=HEADERS).json()

    assert answer["finish_reason"] == "COMPLETE"
    assert answer["message"]["content"][0]["text"]


def test_it_answers_json_valid_against_a_schema(client: httpx.Client) -> None:
    schema = {"type": "object", "properties": {"name": {"type": "string"}}, "required": ["name"]}
    answer = client.post("/v2/chat", json=body(response_format={"type": "json_object", "json_schema": schema}),
                         headers=HEADERS).json()

    jsonschema.validate(json.loads(answer["message"]["content"][0]["text"]), schema)


def test_it_reports_max_tokens_when_the_answer_is_cut(client: httpx.Client) -> None:
    answer = client.post("/v2/chat", json=body(max_tokens=2), headers=HEADERS).json()

    assert answer["finish_reason"] == "MAX_TOKENS"


def test_it_refuses_a_request_without_a_key(client: httpx.Client) -> None:
    response = client.post("/v2/chat", json=body())

    assert response.status_code == 401
    assert response.json()["message"] == "no api key supplied"


def test_it_refuses_a_bad_tool_choice_naming_the_field(client: httpx.Client) -> None:
    response = client.post("/v2/chat", json=body(tools=WEATHER_TOOLS, tool_choice="auto"), headers=HEADERS)

    assert response.status_code == 400
    assert "tool_choice" in response.json()["message"]


def test_it_rate_limits_with_retry_after(sim: SimulatorServer, client: httpx.Client) -> None:
    sim.set_fault("m", {"kind": "rate_limit", "retry_after": 3})

    response = client.post("/v2/chat", json=body(), headers=HEADERS)

    assert response.status_code == 429
    assert response.headers["retry-after"] == "3"
    assert "Trial key" in response.json()["message"]


def test_it_words_a_context_overflow_as_too_many_tokens(client: httpx.Client) -> None:
    response = client.post("/v2/chat", json=body("x" * 40000, model="gpt-test"), headers=HEADERS)

    assert response.status_code == 400
    assert response.json()["message"].startswith("too many tokens")


def test_a_stream_error_is_a_message_end_with_finish_reason_error(sim: SimulatorServer,
                                                                  client: httpx.Client) -> None:
    sim.set_fault("m", {"kind": "stream_error", "status": 500, "after_chunks": 1})

    stream = events(client.post("/v2/chat", json=body(stream=True), headers=HEADERS))

    assert stream[-1][0] == "message-end"
    assert stream[-1][1]["delta"]["finish_reason"] == "ERROR"
    assert stream[-1][1]["delta"]["error"]


def test_a_stream_cut_drops_the_connection_before_message_end(sim: SimulatorServer, client: httpx.Client) -> None:
    sim.set_fault("m", {"kind": "stream_cut", "after_chunks": 1})

    with client.stream("POST", "/v2/chat", json=body(stream=True), headers=HEADERS) as response:
        received = b""
        try:
            for piece in response.iter_bytes():
                received += piece
        except httpx.HTTPError:
            pass  # the connection was dropped mid-body, as the fault intends

    assert b"event: message-start" in received
    assert b"event: message-end" not in received


def test_a_malformed_json_answer_is_not_json(sim: SimulatorServer, client: httpx.Client) -> None:
    sim.set_fault("m", {"kind": "malformed_json"})

    response = client.post("/v2/chat", json=body(), headers=HEADERS)

    assert response.status_code == 200
    try:
        json.loads(response.content)
    except ValueError:
        return
    raise AssertionError("the answer parsed as JSON")

"""The OpenAI Responses wire format: the Response object, its SSE event sequence, tools, structured output,
faults, and the real openai SDK (``responses.create``, ``responses.stream``, ``responses.parse``) against it."""

from __future__ import annotations

import json
from typing import Any

import httpx2 as httpx
import jsonschema
import openai
import pydantic
import pytest

from routing.simulator import SimulatorServer
from tests.simulator.wire_helpers import WEATHER_TOOL_SCHEMA, sse_events

WEATHER_TOOL = {"type": "function", "name": "get_weather", "parameters": WEATHER_TOOL_SCHEMA, "strict": True}
CHAT_WEATHER_TOOL = {"type": "function", "function": {"name": "get_weather", "parameters": WEATHER_TOOL_SCHEMA}}
TEXT_EVENTS = [
    "response.created", "response.in_progress", "response.output_item.added", "response.content_part.added",
    *["response.output_text.delta"] * 4,  # the shared simulator's chunk_count
    "response.output_text.done", "response.content_part.done", "response.output_item.done", "response.completed",
]


def body_of(prompt: str | list[dict[str, Any]] = "Hello there", model: str = "gpt-test",
            **extra: Any) -> dict[str, Any]:
    return {"model": model, "input": prompt, **extra}


def sdk(sim: SimulatorServer) -> openai.OpenAI:
    return openai.OpenAI(base_url=sim.base_url + "/v1", api_key="sk-test", max_retries=0)


def stream_events(client: httpx.Client, body: dict[str, Any]) -> list[tuple[str | None, dict[str, Any]]]:
    response = client.post("/v1/responses", json={**body, "stream": True})
    assert response.status_code == 200, response.text
    assert response.headers["content-type"].startswith("text/event-stream")
    return [(name, json.loads(data)) for name, data in sse_events(response.text)]


# -- JSON -------------------------------------------------------------------------------------------


def test_it_answers_with_a_response_object(client: httpx.Client) -> None:
    answer = client.post("/v1/responses", json=body_of("What is the weather?", instructions="Be brief")).json()

    assert answer["id"].startswith("resp_")
    assert answer["object"] == "response"
    assert isinstance(answer["created_at"], int)
    assert answer["status"] == "completed"
    assert answer["model"] == "gpt-test"
    assert answer["instructions"] == "Be brief"
    assert answer["incomplete_details"] is None
    assert answer["error"] is None
    [item] = answer["output"]
    assert item["type"] == "message"
    assert item["id"].startswith("msg_")
    assert item["status"] == "completed"
    assert item["role"] == "assistant"
    assert item["content"] == [{"type": "output_text", "annotations": [], "logprobs": [],
                                "text": "Simulated answer 1 from gpt-test: What is the weather?"}]


def test_it_reports_usage_with_the_details_objects(client: httpx.Client) -> None:
    usage = client.post("/v1/responses", json=body_of("x" * 400)).json()["usage"]

    assert usage["input_tokens"] == 100 + 3  # 400 chars / 4, plus one message's overhead
    answer_chars = len("Simulated answer 1 from gpt-test: ") + 200 + len("...")
    assert usage["output_tokens"] == (answer_chars + 3) // 4
    assert usage["total_tokens"] == usage["input_tokens"] + usage["output_tokens"]
    assert usage["input_tokens_details"]["cached_tokens"] == 0
    assert usage["output_tokens_details"] == {"reasoning_tokens": 0}


def test_it_counts_the_same_input_tokens_as_the_chat_wire(client: httpx.Client) -> None:
    chat = {"model": "gpt-test", "messages": [{"role": "system", "content": "Be brief"},
                                               {"role": "user", "content": "Tell me about Paris"}]}
    responses = body_of("Tell me about Paris", instructions="Be brief")

    chat_usage = client.post("/v1/chat/completions", json=chat).json()["usage"]
    responses_usage = client.post("/v1/responses", json=responses).json()["usage"]

    assert responses_usage["input_tokens"] == chat_usage["prompt_tokens"]


def test_it_serves_responses_under_any_prefix(client: httpx.Client) -> None:
    for path in ("/responses", "/openai/v1/responses", "/v1/responses"):
        response = client.post(path, json=body_of())
        assert response.status_code == 200, path
        assert response.json()["object"] == "response"


def test_it_stops_at_max_output_tokens_as_an_incomplete_response(client: httpx.Client) -> None:
    answer = client.post("/v1/responses", json=body_of("y" * 300, max_output_tokens=16)).json()

    assert answer["status"] == "incomplete"
    assert answer["incomplete_details"] == {"reason": "max_output_tokens"}
    assert answer["max_output_tokens"] == 16
    assert answer["output"][0]["status"] == "incomplete"
    assert len(answer["output"][0]["content"][0]["text"]) == 16 * 4


def test_it_reports_reasoning_tokens_for_a_reasoning_effort(client: httpx.Client) -> None:
    usage = client.post("/v1/responses", json=body_of(reasoning={"effort": "low"})).json()["usage"]

    assert usage["output_tokens_details"]["reasoning_tokens"] == 64


def test_it_answers_a_json_schema_text_format_with_an_instance_of_the_schema(client: httpx.Client) -> None:
    schema = {
        "type": "object",
        "properties": {"name": {"type": "string"}, "total": {"type": "number", "exclusiveMinimum": 0},
                       "lines": {"type": "array", "items": {"type": "string"}, "minItems": 2}},
        "required": ["name", "total", "lines"],
    }
    text = {"format": {"type": "json_schema", "name": "invoice", "schema": schema, "strict": True}}
    answer = client.post("/v1/responses", json=body_of(text=text)).json()

    jsonschema.validate(json.loads(answer["output"][0]["content"][0]["text"]), schema)
    assert answer["text"]["format"]["name"] == "invoice"


def test_it_answers_json_object_mode_with_an_object(client: httpx.Client) -> None:
    answer = client.post("/v1/responses", json=body_of(text={"format": {"type": "json_object"}})).json()

    assert json.loads(answer["output"][0]["content"][0]["text"])["answer"].startswith("Simulated answer 1")


# -- tools: the same decisions as the chat wire ------------------------------------------------------


def test_it_calls_the_first_declared_tool_with_valid_arguments(client: httpx.Client) -> None:
    other = {"type": "function", "name": "other", "parameters": {"type": "object"}}
    answer = client.post("/v1/responses", json=body_of(tools=[WEATHER_TOOL, other])).json()

    [call] = answer["output"]
    assert call["type"] == "function_call"
    assert call["id"].startswith("fc_")
    assert call["call_id"].startswith("call_")
    assert call["name"] == "get_weather"
    assert call["status"] == "completed"
    jsonschema.validate(json.loads(call["arguments"]), WEATHER_TOOL_SCHEMA)


def test_it_calls_the_forced_tool(client: httpx.Client) -> None:
    other = {"type": "function", "name": "other", "parameters": {"type": "object"}}
    choice = {"type": "function", "name": "other"}
    answer = client.post("/v1/responses", json=body_of(tools=[WEATHER_TOOL, other], tool_choice=choice)).json()

    assert answer["output"][0]["name"] == "other"
    assert answer["tool_choice"] == choice


CONVERSATION_WITH_RESULT = [
    {"role": "user", "content": "Weather in Paris?"},
    {"type": "function_call", "call_id": "call_1", "name": "get_weather",
     "arguments": '{"city":"Paris","unit":"celsius","days":1}'},
    {"type": "function_call_output", "call_id": "call_1", "output": "21 degrees and sunny"},
]
CHAT_WITH_RESULT = [
    {"role": "user", "content": "Weather in Paris?"},
    {"role": "assistant", "content": None, "tool_calls": [{
        "id": "call_1", "type": "function",
        "function": {"name": "get_weather", "arguments": '{"city":"Paris","unit":"celsius","days":1}'},
    }]},
    {"role": "tool", "tool_call_id": "call_1", "content": "21 degrees and sunny"},
]


@pytest.mark.parametrize(
    ("with_result", "tool_choice"),
    [(False, None), (False, "none"), (False, "required"), (True, None), (True, "none"), (True, "required"),
     (True, "forced")],
)
def test_it_calls_a_tool_exactly_when_the_chat_wire_does(client: httpx.Client, with_result: bool,
                                                          tool_choice: str | None) -> None:
    chat: dict[str, Any] = {"model": "gpt-test", "tools": [CHAT_WEATHER_TOOL],
                            "messages": CHAT_WITH_RESULT if with_result else CHAT_WITH_RESULT[:1]}
    responses: dict[str, Any] = {"model": "gpt-test", "tools": [WEATHER_TOOL],
                                 "input": CONVERSATION_WITH_RESULT if with_result else "Weather in Paris?"}
    if tool_choice == "forced":
        chat["tool_choice"] = {"type": "function", "function": {"name": "get_weather"}}
        responses["tool_choice"] = {"type": "function", "name": "get_weather"}
    elif tool_choice is not None:
        chat["tool_choice"] = responses["tool_choice"] = tool_choice

    chat_message = client.post("/v1/chat/completions", json=chat).json()["choices"][0]["message"]
    output = client.post("/v1/responses", json=responses).json()["output"]

    chat_called = "tool_calls" in chat_message
    assert (output[0]["type"] == "function_call") is chat_called
    if not chat_called:
        assert output[0]["content"][0]["text"] == chat_message["content"].replace("answer 1", "answer 2")


def test_it_answers_a_function_call_output_in_text(client: httpx.Client) -> None:
    answer = client.post("/v1/responses", json=body_of(CONVERSATION_WITH_RESULT, tools=[WEATHER_TOOL])).json()

    assert answer["output"][0]["type"] == "message"
    assert answer["output"][0]["content"][0]["text"] == "Simulated answer 1 from gpt-test: 21 degrees and sunny"


# -- streams ----------------------------------------------------------------------------------------


def test_it_streams_the_responses_event_sequence_numbered_from_zero(client: httpx.Client) -> None:
    events = stream_events(client, body_of("Stream this please"))

    assert [name for name, _ in events] == TEXT_EVENTS
    assert all(data["type"] == name for name, data in events)
    assert [data["sequence_number"] for _, data in events] == list(range(len(TEXT_EVENTS)))
    created = events[0][1]["response"]
    assert created["status"] == "in_progress"
    assert created["output"] == []
    assert created["usage"] is None
    deltas = [data for name, data in events if name == "response.output_text.delta"]
    text = "".join(delta["delta"] for delta in deltas)
    assert text == "Simulated answer 1 from gpt-test: Stream this please"
    item_id = events[2][1]["item"]["id"]
    assert all(delta["item_id"] == item_id and delta["output_index"] == 0 for delta in deltas)
    assert events[8][1]["text"] == text
    completed = events[-1][1]["response"]
    assert completed["id"] == created["id"]
    assert completed["status"] == "completed"
    assert completed["output"][0]["content"][0]["text"] == text
    assert completed["usage"]["output_tokens"] == (len(text) + 3) // 4


def test_it_streams_function_call_arguments_in_pieces(client: httpx.Client) -> None:
    events = stream_events(client, body_of(tools=[WEATHER_TOOL]))

    names = [name for name, _ in events]
    assert names == [
        "response.created", "response.in_progress", "response.output_item.added",
        *["response.function_call_arguments.delta"] * 4,  # the shared simulator's chunk_count
        "response.function_call_arguments.done", "response.output_item.done", "response.completed",
    ]
    added = events[2][1]["item"]
    assert added["type"] == "function_call"
    assert added["arguments"] == ""
    assert added["name"] == "get_weather"
    arguments = "".join(data["delta"] for name, data in events if name == "response.function_call_arguments.delta")
    assert arguments == events[-3][1]["arguments"]
    jsonschema.validate(json.loads(arguments), WEATHER_TOOL_SCHEMA)
    assert events[-1][1]["response"]["output"][0]["arguments"] == arguments
    assert [data["sequence_number"] for _, data in events] == list(range(len(events)))


def test_a_stream_cut_at_max_output_tokens_ends_with_response_incomplete(client: httpx.Client) -> None:
    events = stream_events(client, body_of("z" * 300, max_output_tokens=16))

    assert events[-1][0] == "response.incomplete"
    assert events[-1][1]["response"]["status"] == "incomplete"
    assert events[-1][1]["response"]["incomplete_details"] == {"reason": "max_output_tokens"}
    assert events[-2][1]["item"]["status"] == "incomplete"


def test_it_records_the_request_with_its_wire_and_stream_flag(sim: SimulatorServer, client: httpx.Client) -> None:
    client.post("/v1/responses", json=body_of(stream=True))
    sim.wait_until_idle()

    [record] = sim.received("gpt-test")
    assert record["wire"] == "openai_responses"
    assert record["stream"] is True
    assert record["outcome"] == "completed"


# -- refusals ---------------------------------------------------------------------------------------


@pytest.mark.parametrize(
    ("body", "param"),
    [
        ({"model": "gpt-test"}, "input"),
        ({"input": "Hi"}, "model"),
        ({"model": "gpt-test", "input": {"role": "user"}}, "input"),
        ({"model": "gpt-test", "input": []}, "input"),
        ({"model": "gpt-test", "input": [{"role": "robot", "content": "Hi"}]}, "input[0].role"),
        ({"model": "gpt-test", "input": [{"type": "function_call_output", "output": "x"}]}, "input[0].call_id"),
        ({"model": "gpt-test", "input": "Hi", "tools": [CHAT_WEATHER_TOOL]}, "tools[0].name"),
        ({"model": "gpt-test", "input": "Hi", "tools": [WEATHER_TOOL], "tool_choice": {"type": "function",
                                                                                     "name": "nope"}},
         "tool_choice"),
        ({"model": "gpt-test", "input": "Hi", "max_output_tokens": 5}, "max_output_tokens"),
        ({"model": "gpt-test", "input": "Hi", "text": {"format": {"type": "json_schema", "name": "x"}}},
         "text.format.schema"),
        ({"model": "gpt-test", "input": "Hi", "previous_response_id": "resp_123"}, "previous_response_id"),
    ],
)
def test_it_refuses_an_invalid_body_naming_the_parameter(client: httpx.Client, body: dict[str, Any],
                                                         param: str) -> None:
    response = client.post("/v1/responses", json=body)

    assert response.status_code == 400
    error = response.json()["error"]
    assert error["type"] == "invalid_request_error"
    assert error["param"] == param


# -- faults -----------------------------------------------------------------------------------------


def test_a_rate_limit_fault_answers_429_with_retry_after_in_openais_envelope(sim: SimulatorServer,
                                                                            client: httpx.Client) -> None:
    sim.set_fault("gpt-test", {"kind": "rate_limit", "retry_after": 3, "times": 1})

    limited = client.post("/v1/responses", json=body_of())
    after = client.post("/v1/responses", json=body_of())

    assert limited.status_code == 429
    assert limited.headers["retry-after"] == "3"
    assert limited.json()["error"]["code"] == "rate_limit_exceeded"
    assert after.status_code == 200


def test_a_context_overflow_names_the_input(sim: SimulatorServer, client: httpx.Client) -> None:
    sim.set_fault("gpt-test", {"kind": "context_overflow"})

    error = client.post("/v1/responses", json=body_of()).json()["error"]

    assert error["code"] == "context_length_exceeded"
    assert error["param"] == "input"
    assert "context window" in error["message"]


def test_a_stream_error_sends_an_error_event_then_response_failed_in_sequence(sim: SimulatorServer,
                                                                              client: httpx.Client) -> None:
    sim.set_fault("gpt-test", {"kind": "stream_error", "after_chunks": 2})

    events = stream_events(client, body_of())

    assert [name for name, _ in events] == [*TEXT_EVENTS[:6], "error", "response.failed"]
    assert [data["sequence_number"] for _, data in events] == list(range(8))
    assert events[-2][1]["code"] == "server_error"
    failed = events[-1][1]["response"]
    assert failed["status"] == "failed"
    assert failed["id"] == events[0][1]["response"]["id"]
    assert failed["error"]["code"] == "server_error"


def test_a_stream_cut_drops_the_connection_before_response_completed(sim: SimulatorServer,
                                                                     client: httpx.Client) -> None:
    sim.set_fault("gpt-test", {"kind": "stream_cut", "after_chunks": 1})
    received: list[str] = []

    def read() -> None:
        with client.stream("POST", "/v1/responses", json=body_of(stream=True)) as response:
            received.extend(response.iter_text())

    with pytest.raises(httpx.RemoteProtocolError):
        read()

    text = "".join(received)
    assert "response.output_text.delta" in text
    assert "response.completed" not in text
    sim.wait_until_idle()
    assert sim.received("gpt-test")[-1]["outcome"] == "cut"


def test_malformed_json_breaks_the_first_delta_of_a_stream(sim: SimulatorServer, client: httpx.Client) -> None:
    sim.set_fault("gpt-test", {"kind": "malformed_json"})

    response = client.post("/v1/responses", json=body_of(stream=True))
    first_delta = next(data for name, data in sse_events(response.text) if name == "response.output_text.delta")

    with pytest.raises(ValueError):
        json.loads(first_delta)


def test_malformed_json_breaks_a_json_answer(sim: SimulatorServer, client: httpx.Client) -> None:
    sim.set_fault("gpt-test", {"kind": "malformed_json"})

    response = client.post("/v1/responses", json=body_of())

    assert response.status_code == 200
    with pytest.raises(ValueError):
        response.json()


def test_a_truncate_fault_makes_the_response_incomplete(sim: SimulatorServer, client: httpx.Client) -> None:
    sim.set_fault("gpt-test", {"kind": "truncate"})

    answer = client.post("/v1/responses", json=body_of()).json()

    assert answer["status"] == "incomplete"
    assert answer["incomplete_details"] == {"reason": "max_output_tokens"}


# -- the real openai SDK ----------------------------------------------------------------------------


def test_the_openai_sdk_reads_a_response(sim: SimulatorServer) -> None:
    response = sdk(sim).responses.create(model="gpt-test", input="Hi", instructions="Be brief")

    assert response.output_text == "Simulated answer 1 from gpt-test: Hi"
    assert response.status == "completed"
    assert response.usage is not None
    assert response.usage.input_tokens == 2 * 3 + (len("Be brief") + len("Hi") + 3) // 4
    assert response.usage.total_tokens == response.usage.input_tokens + response.usage.output_tokens


def test_the_openai_sdk_reads_a_stream_with_stream_true(sim: SimulatorServer) -> None:
    events = list(sdk(sim).responses.create(model="gpt-test", input="Hi", stream=True))

    assert [event.type for event in events] == TEXT_EVENTS
    text = "".join(event.delta for event in events if event.type == "response.output_text.delta")
    assert text == "Simulated answer 1 from gpt-test: Hi"
    final = events[-1]
    assert final.type == "response.completed"
    assert final.response.usage is not None
    assert final.response.usage.output_tokens == (len(text) + 3) // 4


def test_the_openai_sdk_stream_helper_assembles_the_final_response(sim: SimulatorServer) -> None:
    with sdk(sim).responses.stream(model="gpt-test", input="Hi") as stream:
        deltas = [event.delta for event in stream if event.type == "response.output_text.delta"]
        final = stream.get_final_response()

    assert "".join(deltas) == final.output_text == "Simulated answer 1 from gpt-test: Hi"


def test_the_openai_sdk_reads_a_streamed_function_call(sim: SimulatorServer) -> None:
    with sdk(sim).responses.stream(model="gpt-test", input="Weather?", tools=[WEATHER_TOOL]) as stream:  # type: ignore[list-item]
        final = stream.get_final_response()

    [call] = final.output
    assert call.type == "function_call"
    assert call.name == "get_weather"
    jsonschema.validate(json.loads(call.arguments), WEATHER_TOOL_SCHEMA)


def test_the_openai_sdk_parses_structured_output(sim: SimulatorServer) -> None:
    class Place(pydantic.BaseModel):
        city: str
        population: int

    response = sdk(sim).responses.parse(model="gpt-test", input="City?", text_format=Place)

    assert isinstance(response.output_parsed, Place)


def test_the_openai_sdk_raises_its_rate_limit_error(sim: SimulatorServer) -> None:
    sim.set_fault("gpt-test", {"kind": "rate_limit", "retry_after": 1})

    with pytest.raises(openai.RateLimitError) as caught:
        sdk(sim).responses.create(model="gpt-test", input="Hi")

    assert caught.value.code == "rate_limit_exceeded"


"""The OpenAI chat-completions wire format: JSON, SSE, usage, and the real openai SDK against it."""

from __future__ import annotations

import json

import httpx2 as httpx
import jsonschema
import openai
import pytest

from routing.simulator import SimulatorServer
from tests.simulator.wire_helpers import WEATHER_TOOL_SCHEMA, openai_body, openai_stream_text, sse_events, sse_json

WEATHER_TOOL = {"type": "function", "function": {"name": "get_weather", "parameters": WEATHER_TOOL_SCHEMA}}


def sdk(sim: SimulatorServer) -> openai.OpenAI:
    return openai.OpenAI(base_url=sim.base_url + "/v1", api_key="sk-test", max_retries=0)


def test_it_answers_with_an_echo_and_a_counter(client: httpx.Client) -> None:
    first = client.post("/v1/chat/completions", json=openai_body("What is the weather?")).json()
    second = client.post("/v1/chat/completions", json=openai_body("What is the weather?")).json()

    assert first["object"] == "chat.completion"
    assert first["id"].startswith("chatcmpl-")
    assert first["model"] == "gpt-test"
    assert first["choices"][0]["message"] == {
        "role": "assistant",
        "content": "Simulated answer 1 from gpt-test: What is the weather?",
        "refusal": None,
        "annotations": [],
    }
    assert first["choices"][0]["finish_reason"] == "stop"
    assert second["choices"][0]["message"]["content"].startswith("Simulated answer 2 from gpt-test")


def test_it_reports_usage_estimated_from_characters(client: httpx.Client) -> None:
    text = "x" * 400
    usage = client.post("/v1/chat/completions", json=openai_body(text)).json()["usage"]

    assert usage["prompt_tokens"] == 100 + 3  # 400 chars / 4, plus one message's overhead
    answer_chars = len("Simulated answer 1 from gpt-test: ") + 200 + len("...")
    assert usage["completion_tokens"] == (answer_chars + 3) // 4
    assert usage["total_tokens"] == usage["prompt_tokens"] + usage["completion_tokens"]
    assert usage["prompt_tokens_details"] == {"cached_tokens": 0, "audio_tokens": 0}
    assert usage["completion_tokens_details"]["reasoning_tokens"] == 0


def test_it_streams_chunks_then_usage_then_done(client: httpx.Client) -> None:
    body = openai_body("Stream this please", stream=True, stream_options={"include_usage": True})
    response = client.post("/v1/chat/completions", json=body)

    assert response.headers["content-type"].startswith("text/event-stream")
    events = sse_events(response.text)
    assert events[-1] == (None, "[DONE]")
    chunks = sse_json(response.text)
    assert all(chunk["object"] == "chat.completion.chunk" for chunk in chunks)
    assert chunks[0]["choices"][0]["delta"] == {"role": "assistant", "content": "", "refusal": None}
    assert openai_stream_text(chunks) == "Simulated answer 1 from gpt-test: Stream this please"
    assert len([c for c in chunks if c["choices"] and c["choices"][0]["delta"].get("content")]) == 4
    finish = [c["choices"][0]["finish_reason"] for c in chunks if c["choices"]]
    assert finish[-1] == "stop"
    assert set(finish[:-1]) == {None}
    assert all("usage" in c and c["usage"] is None for c in chunks[:-1])
    assert chunks[-1]["choices"] == []
    assert chunks[-1]["usage"]["completion_tokens"] > 0
    assert "cached_tokens" in chunks[-1]["usage"]["prompt_tokens_details"]
    assert "reasoning_tokens" in chunks[-1]["usage"]["completion_tokens_details"]


def test_it_streams_without_usage_unless_asked(client: httpx.Client) -> None:
    chunks = sse_json(client.post("/v1/chat/completions", json=openai_body(stream=True)).text)

    assert all("usage" not in chunk for chunk in chunks)
    assert chunks[-1]["choices"][0]["finish_reason"] == "stop"


def test_it_serves_chat_completions_under_any_prefix(client: httpx.Client) -> None:
    response = client.post("/openai/v1/chat/completions", json=openai_body())

    assert response.status_code == 200
    assert response.json()["object"] == "chat.completion"


def test_it_lists_the_configured_models(client: httpx.Client) -> None:
    listing = client.get("/v1/models").json()

    assert listing["object"] == "list"
    assert {"gpt-test", "claude-test", "locked"} <= {model["id"] for model in listing["data"]}


def test_it_truncates_at_max_tokens_and_reports_length(client: httpx.Client) -> None:
    answer = client.post("/v1/chat/completions", json=openai_body("A long question " * 5, max_tokens=3)).json()

    assert answer["choices"][0]["finish_reason"] == "length"
    assert answer["choices"][0]["message"]["content"] == "Simulated an"  # 3 tokens of 4 characters
    assert answer["usage"]["completion_tokens"] == 3


def test_it_honours_max_completion_tokens_in_streams(client: httpx.Client) -> None:
    body = openai_body(max_completion_tokens=2, stream=True)
    chunks = sse_json(client.post("/v1/chat/completions", json=body).text)

    assert openai_stream_text(chunks) == "Simulate"  # 2 tokens of 4 characters
    assert chunks[-1]["choices"][0]["finish_reason"] == "length"


def test_it_stops_at_a_stop_sequence(client: httpx.Client) -> None:
    answer = client.post("/v1/chat/completions", json=openai_body("one two three", stop=["two"])).json()

    assert answer["choices"][0]["message"]["content"] == "Simulated answer 1 from gpt-test: one "
    assert answer["choices"][0]["finish_reason"] == "stop"


def test_it_answers_every_requested_choice(client: httpx.Client) -> None:
    answer = client.post("/v1/chat/completions", json=openai_body(n=3)).json()
    single = client.post("/v1/chat/completions", json=openai_body()).json()

    assert [choice["index"] for choice in answer["choices"]] == [0, 1, 2]
    assert answer["usage"]["completion_tokens"] == 3 * single["usage"]["completion_tokens"]


def test_it_reports_reasoning_tokens_for_a_reasoning_effort(client: httpx.Client) -> None:
    plain = client.post("/v1/chat/completions", json=openai_body()).json()["usage"]
    high = client.post("/v1/chat/completions", json=openai_body(reasoning_effort="high")).json()["usage"]

    assert high["completion_tokens_details"]["reasoning_tokens"] == 1024
    assert high["completion_tokens"] == plain["completion_tokens"] + 1024


def test_it_reports_cached_tokens_for_a_repeated_long_prefix(client: httpx.Client) -> None:
    system = "You are a careful assistant. " * 200  # about 1,450 tokens: above the 1,024-token minimum
    def body(question: str) -> dict[str, object]:
        return {"model": "gpt-test", "messages": [
            {"role": "system", "content": system}, {"role": "user", "content": question},
        ]}

    first = client.post("/v1/chat/completions", json=body("first question")).json()["usage"]
    second = client.post("/v1/chat/completions", json=body("another question")).json()["usage"]

    assert first["prompt_tokens_details"]["cached_tokens"] == 0
    cached = second["prompt_tokens_details"]["cached_tokens"]
    assert cached % 128 == 0
    assert 1024 <= cached <= second["prompt_tokens"]


def test_it_counts_images_in_the_input(client: httpx.Client) -> None:
    image = {"type": "image_url", "image_url": {"url": "data:image/png;base64,iVBORw0KGgo="}}
    text_only = client.post("/v1/chat/completions", json=openai_body("Describe")).json()["usage"]
    content = [{"type": "text", "text": "Describe"}, image]
    body = {"model": "gpt-test", "messages": [{"role": "user", "content": content}]}
    with_image = client.post("/v1/chat/completions", json=body).json()

    assert with_image["choices"][0]["message"]["content"].endswith(": Describe")
    assert with_image["usage"]["prompt_tokens"] == text_only["prompt_tokens"] + 765


@pytest.mark.parametrize(
    ("body", "param"),
    [
        ({"model": "gpt-test"}, "messages"),
        ({"model": "gpt-test", "messages": []}, "messages"),
        ({"messages": [{"role": "user", "content": "hi"}]}, "model"),
        ({"model": "gpt-test", "messages": [{"role": "robot", "content": "hi"}]}, "messages[0].role"),
        ({"model": "gpt-test", "messages": [{"role": "user", "content": "hi"}], "tool_choice": "required"},
         "tool_choice"),
    ],
)
def test_it_refuses_an_invalid_body_naming_the_parameter(client: httpx.Client, body: dict[str, object],
                                                          param: str) -> None:
    response = client.post("/v1/chat/completions", json=body)

    assert response.status_code == 400
    error = response.json()["error"]
    assert error["type"] == "invalid_request_error"
    assert error["param"] == param


def test_it_refuses_a_body_that_is_not_json(client: httpx.Client) -> None:
    response = client.post("/v1/chat/completions", content=b"{not json", headers={"content-type": "application/json"})

    assert response.status_code == 400
    assert "could not parse the JSON body" in response.json()["error"]["message"]


def test_it_answers_an_unknown_path_with_invalid_url(client: httpx.Client) -> None:
    response = client.post("/v1/completions-of-some-kind", json={})

    assert response.status_code == 404
    assert response.json()["error"]["message"] == "Invalid URL (POST /v1/completions-of-some-kind)"


def test_it_calls_the_first_declared_tool_with_valid_arguments(client: httpx.Client) -> None:
    other = {"type": "function", "function": {"name": "other", "parameters": {"type": "object"}}}
    answer = client.post("/v1/chat/completions", json=openai_body(tools=[WEATHER_TOOL, other])).json()

    choice = answer["choices"][0]
    assert choice["finish_reason"] == "tool_calls"
    assert choice["message"]["content"] is None
    call = choice["message"]["tool_calls"][0]
    assert call["type"] == "function"
    assert call["id"].startswith("call_")
    assert call["function"]["name"] == "get_weather"
    jsonschema.validate(json.loads(call["function"]["arguments"]), WEATHER_TOOL_SCHEMA)


def test_it_calls_the_forced_tool(client: httpx.Client) -> None:
    other = {"type": "function", "function": {"name": "other", "parameters": {"type": "object"}}}
    choice = {"type": "function", "function": {"name": "other"}}
    answer = client.post("/v1/chat/completions", json=openai_body(tools=[WEATHER_TOOL, other], tool_choice=choice))

    assert answer.json()["choices"][0]["message"]["tool_calls"][0]["function"]["name"] == "other"


def test_it_answers_in_text_when_tool_choice_is_none(client: httpx.Client) -> None:
    answer = client.post("/v1/chat/completions", json=openai_body(tools=[WEATHER_TOOL], tool_choice="none")).json()

    assert answer["choices"][0]["finish_reason"] == "stop"
    assert "tool_calls" not in answer["choices"][0]["message"]


def test_it_answers_a_tool_result_in_text(client: httpx.Client) -> None:
    messages = [
        {"role": "user", "content": "Weather in Paris?"},
        {"role": "assistant", "content": None, "tool_calls": [{
            "id": "call_1", "type": "function",
            "function": {"name": "get_weather", "arguments": '{"city":"Paris","unit":"celsius","days":1}'},
        }]},
        {"role": "tool", "tool_call_id": "call_1", "content": "21 degrees and sunny"},
    ]
    body = {"model": "gpt-test", "messages": messages, "tools": [WEATHER_TOOL]}
    answer = client.post("/v1/chat/completions", json=body)

    message = answer.json()["choices"][0]["message"]
    assert message["content"] == "Simulated answer 1 from gpt-test: 21 degrees and sunny"
    assert "tool_calls" not in message


def test_it_streams_tool_call_arguments_in_pieces(client: httpx.Client) -> None:
    chunks = sse_json(client.post("/v1/chat/completions", json=openai_body(tools=[WEATHER_TOOL], stream=True)).text)

    opening = chunks[0]["choices"][0]["delta"]["tool_calls"][0]
    assert opening["function"] == {"name": "get_weather", "arguments": ""}
    arguments = "".join(
        c["choices"][0]["delta"]["tool_calls"][0]["function"]["arguments"] for c in chunks[1:-1]
    )
    jsonschema.validate(json.loads(arguments), WEATHER_TOOL_SCHEMA)
    assert chunks[-1]["choices"][0]["finish_reason"] == "tool_calls"


def test_it_answers_a_json_schema_response_format_with_valid_json(client: httpx.Client) -> None:
    schema = {
        "type": "object",
        "properties": {"name": {"type": "string"}, "total": {"type": "number", "exclusiveMinimum": 0},
                       "lines": {"type": "array", "items": {"type": "string"}, "minItems": 2}},
        "required": ["name", "total", "lines"],
    }
    response_format = {"type": "json_schema", "json_schema": {"name": "invoice", "schema": schema, "strict": True}}
    answer = client.post("/v1/chat/completions", json=openai_body(response_format=response_format)).json()

    jsonschema.validate(json.loads(answer["choices"][0]["message"]["content"]), schema)


def test_it_answers_json_object_mode_with_an_object(client: httpx.Client) -> None:
    answer = client.post("/v1/chat/completions", json=openai_body(response_format={"type": "json_object"})).json()

    assert json.loads(answer["choices"][0]["message"]["content"])["answer"].startswith("Simulated answer 1")


def test_the_openai_sdk_reads_a_completion(sim: SimulatorServer) -> None:
    completion = sdk(sim).chat.completions.create(model="gpt-test", messages=[{"role": "user", "content": "Hi"}])

    assert completion.choices[0].message.content == "Simulated answer 1 from gpt-test: Hi"
    assert completion.usage is not None
    assert completion.usage.prompt_tokens == 4


def test_the_openai_sdk_reads_a_stream_with_usage(sim: SimulatorServer) -> None:
    stream = sdk(sim).chat.completions.create(
        model="gpt-test", messages=[{"role": "user", "content": "Hi"}], stream=True,
        stream_options={"include_usage": True},
    )
    chunks = list(stream)

    text = "".join(c.choices[0].delta.content or "" for c in chunks if c.choices)
    assert text == "Simulated answer 1 from gpt-test: Hi"
    assert chunks[-1].usage is not None
    assert chunks[-1].usage.completion_tokens == (len(text) + 3) // 4


def test_the_openai_sdk_reads_a_tool_call(sim: SimulatorServer) -> None:
    completion = sdk(sim).chat.completions.create(
        model="gpt-test", messages=[{"role": "user", "content": "Weather?"}], tools=[WEATHER_TOOL],  # type: ignore[list-item]
    )

    call = completion.choices[0].message.tool_calls[0]  # type: ignore[index]
    jsonschema.validate(json.loads(call.function.arguments), WEATHER_TOOL_SCHEMA)  # type: ignore[union-attr]


def test_the_openai_sdk_parses_structured_output(sim: SimulatorServer) -> None:
    schema = {"type": "object", "properties": {"city": {"type": "string"}}, "required": ["city"],
              "additionalProperties": False}
    completion = sdk(sim).chat.completions.create(
        model="gpt-test", messages=[{"role": "user", "content": "City?"}],
        response_format={"type": "json_schema", "json_schema": {"name": "place", "schema": schema, "strict": True}},
    )

    jsonschema.validate(json.loads(completion.choices[0].message.content or ""), schema)

"""The Gemini generateContent wire format: JSON, SSE and streamed arrays, usageMetadata, keys, function calls."""

from __future__ import annotations

import json

import httpx2 as httpx
import jsonschema
import pytest

from tests.simulator.wire_helpers import GEMINI_HEADERS, WEATHER_TOOL_SCHEMA, gemini_body, gemini_path, sse_json

WEATHER_TOOLS = [{"functionDeclarations": [{"name": "get_weather", "parameters": WEATHER_TOOL_SCHEMA}]}]


def test_it_answers_generate_content(client: httpx.Client) -> None:
    answer = client.post(gemini_path(), json=gemini_body("Hello Gemini"), headers=GEMINI_HEADERS).json()

    candidate = answer["candidates"][0]
    assert candidate["content"] == {"parts": [{"text": "Simulated answer 1 from gemini-test: Hello Gemini"}],
                                    "role": "model"}
    assert candidate["finishReason"] == "STOP"
    usage = answer["usageMetadata"]
    assert usage["promptTokenCount"] == (len("Hello Gemini") + 3) // 4 + 3
    assert usage["totalTokenCount"] == usage["promptTokenCount"] + usage["candidatesTokenCount"]
    assert answer["modelVersion"] == "gemini-test"


def test_it_streams_sse_events_with_the_finish_and_usage_last(client: httpx.Client) -> None:
    response = client.post(gemini_path(stream=True), json=gemini_body("Hello Gemini"), headers=GEMINI_HEADERS)

    assert "\r\n\r\n" in response.text
    events = sse_json(response.text)
    text = "".join(part["text"] for e in events for part in e["candidates"][0]["content"]["parts"])
    assert text == "Simulated answer 1 from gemini-test: Hello Gemini"
    assert all("finishReason" not in e["candidates"][0] for e in events[:-1])
    assert events[-1]["candidates"][0]["finishReason"] == "STOP"
    assert events[-1]["usageMetadata"]["candidatesTokenCount"] == (len(text) + 3) // 4


def test_it_streams_a_json_array_without_alt_sse(client: httpx.Client) -> None:
    response = client.post(gemini_path(stream=True, sse=False), json=gemini_body(), headers=GEMINI_HEADERS)

    pieces = json.loads(response.text)
    assert isinstance(pieces, list)
    assert len(pieces) == 5
    assert pieces[-1]["candidates"][0]["finishReason"] == "STOP"


def test_it_accepts_the_key_as_a_query_parameter(client: httpx.Client) -> None:
    response = client.post(gemini_path() + "?key=query-key", json=gemini_body())

    assert response.status_code == 200


def test_it_refuses_a_request_without_a_key_as_google_does(client: httpx.Client) -> None:
    response = client.post(gemini_path(), json=gemini_body())

    assert response.status_code == 403
    assert response.json()["error"]["status"] == "PERMISSION_DENIED"


def test_it_calls_a_declared_function_with_valid_args(client: httpx.Client) -> None:
    answer = client.post(gemini_path(), json=gemini_body(tools=WEATHER_TOOLS), headers=GEMINI_HEADERS).json()

    call = answer["candidates"][0]["content"]["parts"][0]["functionCall"]
    assert call["name"] == "get_weather"
    jsonschema.validate(call["args"], WEATHER_TOOL_SCHEMA)


def test_it_answers_in_text_when_function_calling_is_off(client: httpx.Client) -> None:
    body = gemini_body(tools=WEATHER_TOOLS, toolConfig={"functionCallingConfig": {"mode": "NONE"}})
    answer = client.post(gemini_path(), json=body, headers=GEMINI_HEADERS).json()

    assert "text" in answer["candidates"][0]["content"]["parts"][0]


def test_it_answers_a_response_schema_with_valid_json(client: httpx.Client) -> None:
    schema = {"type": "OBJECT", "properties": {"rating": {"type": "INTEGER", "minimum": 1}}, "required": ["rating"]}
    config = {"responseMimeType": "application/json", "responseSchema": schema}
    answer = client.post(gemini_path(), json=gemini_body(generationConfig=config), headers=GEMINI_HEADERS).json()

    value = json.loads(answer["candidates"][0]["content"]["parts"][0]["text"])
    jsonschema.validate(value, {"type": "object", "properties": {"rating": {"type": "integer", "minimum": 1}},
                                "required": ["rating"]})


@pytest.mark.parametrize("stream", [False, True])
def test_it_stops_at_max_output_tokens(client: httpx.Client, stream: bool) -> None:
    body = gemini_body("Long question", generationConfig={"maxOutputTokens": 2})
    response = client.post(gemini_path(stream=stream), json=body, headers=GEMINI_HEADERS)

    final = sse_json(response.text)[-1] if stream else response.json()
    assert final["candidates"][0]["finishReason"] == "MAX_TOKENS"
    assert final["usageMetadata"]["candidatesTokenCount"] == 2


def test_it_reports_thoughts_when_thinking_is_configured(client: httpx.Client) -> None:
    config = {"thinkingConfig": {"thinkingBudget": 100, "includeThoughts": True}}
    answer = client.post(gemini_path(), json=gemini_body(generationConfig=config), headers=GEMINI_HEADERS).json()

    thought, text = answer["candidates"][0]["content"]["parts"]
    assert thought["thought"] is True
    assert text["text"].startswith("Simulated answer")
    usage = answer["usageMetadata"]
    assert usage["thoughtsTokenCount"] == (len(thought["text"]) + 3) // 4
    assert usage["totalTokenCount"] == usage["promptTokenCount"] + usage["candidatesTokenCount"] + \
        usage["thoughtsTokenCount"]


def test_it_counts_inline_images(client: httpx.Client) -> None:
    plain = client.post(gemini_path(), json=gemini_body("Look"), headers=GEMINI_HEADERS).json()
    parts = [{"inlineData": {"mimeType": "image/png", "data": "iVBORw0KGgo="}}, {"text": "Look"}]
    body = {"contents": [{"role": "user", "parts": parts}]}
    with_image = client.post(gemini_path(), json=body, headers=GEMINI_HEADERS).json()

    assert with_image["usageMetadata"]["promptTokenCount"] == plain["usageMetadata"]["promptTokenCount"] + 765


def test_it_refuses_a_request_without_contents(client: httpx.Client) -> None:
    response = client.post(gemini_path(), json={"contents": []}, headers=GEMINI_HEADERS)

    assert response.status_code == 400
    assert response.json()["error"]["status"] == "INVALID_ARGUMENT"


def test_it_lists_models_in_geminis_shape(client: httpx.Client) -> None:
    listing = client.get("/v1beta/models", headers=GEMINI_HEADERS).json()

    names = {model["name"] for model in listing["models"]}
    assert "models/gemini-test" in names


def test_it_streams_thoughts_before_the_answer(client: httpx.Client) -> None:
    config = {"thinkingConfig": {"thinkingBudget": 100, "includeThoughts": True}}
    response = client.post(gemini_path(stream=True), json=gemini_body("Why?", generationConfig=config),
                           headers=GEMINI_HEADERS)

    parts = [part for event in sse_json(response.text) for part in event["candidates"][0]["content"]["parts"]]
    thoughts = [part for part in parts if part.get("thought")]
    answer = "".join(part["text"] for part in parts if not part.get("thought"))
    assert thoughts
    assert parts[: len(thoughts)] == thoughts
    assert answer == "Simulated answer 1 from gemini-test: Why?"

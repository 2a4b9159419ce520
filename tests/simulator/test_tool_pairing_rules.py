"""The simulator refuses what OpenAI and Gemini refuse in a tool loop, with each provider's error shape and wording:
OpenAI's pairing of tool messages (chat) and function call outputs (Responses) with the calls they answer, and
Gemini 3's thought signatures on function calls."""

from __future__ import annotations

from typing import Any

import httpx2 as httpx

from tests.simulator.wire_helpers import GEMINI_HEADERS, WEATHER_TOOL_SCHEMA, gemini_body, gemini_path

CHAT_TOOLS = [{"type": "function", "function": {"name": "get_weather", "parameters": WEATHER_TOOL_SCHEMA}}]
RESPONSES_TOOLS = [{"type": "function", "name": "get_weather", "parameters": WEATHER_TOOL_SCHEMA}]
GEMINI_TOOLS = [{"functionDeclarations": [{"name": "get_weather", "parameters": WEATHER_TOOL_SCHEMA}]}]
CALL = {"id": "call_1", "type": "function", "function": {"name": "get_weather", "arguments": '{"city": "Oslo"}'}}


def chat(client: httpx.Client, messages: list[Any]) -> httpx.Response:
    return client.post("/v1/chat/completions", json={"model": "gpt-test", "tools": CHAT_TOOLS, "messages": messages})


def openai_refusal(response: httpx.Response) -> tuple[str, str | None]:
    assert response.status_code == 400, response.text
    error = response.json()["error"]
    assert error["type"] == "invalid_request_error"
    return error["message"], error["param"]


def test_chat_accepts_a_tool_message_answering_the_call_before_it(client: httpx.Client) -> None:
    messages = [{"role": "user", "content": "Weather in Oslo?"},
                {"role": "assistant", "content": None, "tool_calls": [CALL]},
                {"role": "tool", "tool_call_id": "call_1", "content": "18 C"}]
    assert chat(client, messages).status_code == 200


def test_chat_refuses_a_tool_message_with_no_call_before_it(client: httpx.Client) -> None:
    messages = [{"role": "user", "content": "Weather?"}, {"role": "tool", "tool_call_id": "call_1", "content": "18 C"}]
    message, param = openai_refusal(chat(client, messages))
    assert message == ("Invalid parameter: messages with role 'tool' must be a response to a preceeding message with "
                       "'tool_calls'.")
    assert param == "messages.[1].role"


def test_chat_refuses_a_tool_message_answering_an_id_the_call_did_not_have(client: httpx.Client) -> None:
    messages = [{"role": "user", "content": "Weather?"}, {"role": "assistant", "content": None, "tool_calls": [CALL]},
                {"role": "tool", "tool_call_id": "call_9", "content": "18 C"}]
    message, param = openai_refusal(chat(client, messages))
    assert message == "Invalid parameter: 'tool_call_id' of 'call_9' not found in 'tool_calls' of previous message."
    assert param == "messages.[2].tool_call_id"


def test_chat_refuses_a_tool_call_left_unanswered(client: httpx.Client) -> None:
    second = {**CALL, "id": "call_2"}
    messages = [{"role": "user", "content": "Weather?"},
                {"role": "assistant", "content": None, "tool_calls": [CALL, second]},
                {"role": "tool", "tool_call_id": "call_1", "content": "18 C"},
                {"role": "user", "content": "And tomorrow?"}]
    message, param = openai_refusal(chat(client, messages))
    assert message.endswith("The following tool_call_ids did not have response messages: call_2")
    assert message.startswith("An assistant message with 'tool_calls' must be followed by tool messages")
    assert param == "messages.[1].role"


def test_chat_refuses_a_tool_message_without_its_id(client: httpx.Client) -> None:
    messages = [{"role": "user", "content": "Weather?"}, {"role": "assistant", "content": None, "tool_calls": [CALL]},
                {"role": "tool", "content": "18 C"}]
    assert openai_refusal(chat(client, messages))[1] == "messages.[2].tool_call_id"


def responses(client: httpx.Client, items: list[Any]) -> httpx.Response:
    return client.post("/v1/responses", json={"model": "gpt-test", "tools": RESPONSES_TOOLS, "input": items})


FUNCTION_CALL = {"type": "function_call", "call_id": "call_1", "name": "get_weather", "arguments": '{"city": "Oslo"}'}


def test_responses_accepts_an_output_answering_a_call_of_the_same_input(client: httpx.Client) -> None:
    items = [{"role": "user", "content": "Weather?"}, FUNCTION_CALL,
             {"type": "function_call_output", "call_id": "call_1", "output": "18 C"}]
    assert responses(client, items).status_code == 200


def test_responses_refuses_an_output_whose_call_is_not_in_the_input(client: httpx.Client) -> None:
    items = [{"role": "user", "content": "Weather?"},
             {"type": "function_call_output", "call_id": "call_7", "output": "18 C"}]
    assert openai_refusal(responses(client, items)) == (
        "No tool call found for function call output with call_id call_7.", "input")


def test_responses_refuses_a_call_without_its_output(client: httpx.Client) -> None:
    items = [{"role": "user", "content": "Weather?"}, FUNCTION_CALL, {"role": "user", "content": "Well?"}]
    assert openai_refusal(responses(client, items)) == ("No tool output found for function call call_1.", "input")


def gemini(client: httpx.Client, contents: list[Any]) -> httpx.Response:
    return client.post(gemini_path(), json={"contents": contents, "tools": GEMINI_TOOLS}, headers=GEMINI_HEADERS)


def gemini_call_part(client: httpx.Client) -> dict[str, Any]:
    answer = client.post(gemini_path(), json=gemini_body("Weather in Oslo?", tools=GEMINI_TOOLS),
                         headers=GEMINI_HEADERS).json()
    [part] = [p for p in answer["candidates"][0]["content"]["parts"] if "functionCall" in p]
    return dict(part)


def gemini_loop(part: dict[str, Any]) -> list[Any]:
    return [{"role": "user", "parts": [{"text": "Weather in Oslo?"}]}, {"role": "model", "parts": [part]},
            {"role": "user", "parts": [{"functionResponse": {"name": "get_weather", "response": {"t": "18 C"}}}]}]


def gemini_refusal(response: httpx.Response) -> str:
    assert response.status_code == 400, response.text
    error = response.json()["error"]
    assert error["code"] == 400
    assert error["status"] == "INVALID_ARGUMENT"
    message: str = error["message"]
    return message


def test_gemini_signs_a_function_call_and_accepts_it_back(client: httpx.Client) -> None:
    part = gemini_call_part(client)
    assert part["thoughtSignature"]
    assert gemini(client, gemini_loop(part)).status_code == 200


def test_gemini_signs_a_streamed_function_call(client: httpx.Client) -> None:
    response = client.post(gemini_path(stream=True), json=gemini_body("Weather in Oslo?", tools=GEMINI_TOOLS),
                           headers=GEMINI_HEADERS)
    assert '"thoughtSignature"' in response.text


def test_gemini_refuses_a_current_turn_call_without_its_signature(client: httpx.Client) -> None:
    part = {k: v for k, v in gemini_call_part(client).items() if k != "thoughtSignature"}
    message = gemini_refusal(gemini(client, gemini_loop(part)))
    assert message.startswith("Function call is missing a thought_signature in functionCall parts.")
    assert "function call `default_api:get_weather` , position 2." in message


def test_gemini_refuses_a_signature_it_did_not_issue_for_that_call(client: httpx.Client) -> None:
    part = gemini_call_part(client)
    moved = {**part, "functionCall": {"name": "get_time", "args": {}}}
    assert gemini_refusal(gemini(client, gemini_loop(moved))) == "Corrupted thought signature."
    forged = {**part, "thoughtSignature": "bm90IGEgc2lnbmF0dXJl"}
    assert gemini_refusal(gemini(client, gemini_loop(forged))) == "Corrupted thought signature."


def test_gemini_takes_the_documented_sentinel_and_leaves_earlier_turns_unchecked(client: httpx.Client) -> None:
    part = gemini_call_part(client)
    sentinel = {**part, "thoughtSignature": "skip_thought_signature_validator"}
    assert gemini(client, gemini_loop(sentinel)).status_code == 200
    unsigned = {k: v for k, v in part.items() if k != "thoughtSignature"}
    earlier = [*gemini_loop(unsigned), {"role": "model", "parts": [{"text": "18 C in Oslo."}]},
               {"role": "user", "parts": [{"text": "Thanks!"}]}]
    assert gemini(client, earlier).status_code == 200

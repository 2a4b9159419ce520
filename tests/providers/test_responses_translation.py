"""The Responses API both ways: a Responses request -> the chat body every adapter reads; a chat answer -> a
Response object; a chat stream -> Responses events (read by the real openai SDK over a mock transport); and an
OpenAI Responses upstream passed through with the gateway's id and the public model name."""

from __future__ import annotations

import json
from collections.abc import Iterator
from contextlib import contextmanager
from typing import Any

import httpx2
import openai
import pytest

from routing.core.features import extract_features
from routing.core.table import ProviderSpec
from routing.providers import CapabilityError, RequestShapeError, TranslationError, get_adapter
from routing.providers.common.thinking_ids import split_payload
from routing.providers.responses_api.calls import (
    ResponsesCall,
    build_responses_request,
    parse_responses_answer,
    responses_stream_translator,
)
from routing.providers.responses_api.ids import (
    item_id,
    new_response_id,
    read_response_id,
    response_id_key,
    response_id_of_item,
)
from routing.providers.responses_api.inbound_request import answer_items, parse_responses_request
from routing.providers.responses_api.request_to_chat import responses_to_chat
from tests.providers.support import (
    ANTHROPIC_STREAM,
    GEMINI_STREAM,
    OPENAI_REASONING_STREAM,
    OPENAI_TOOLS_STREAM,
    PROVIDERS,
    feed_split,
    model,
)

SCHEMA = {"type": "object", "properties": {"city": {"type": "string"}}, "required": ["city"],
          "additionalProperties": False}
WEATHER_TOOL = {"type": "function", "name": "get_weather", "description": "Weather of a city",
                "parameters": SCHEMA, "strict": True}
ID_KEY = response_id_key("test-secret")


def call_for(body: dict[str, Any], earlier: list[dict[str, Any]] | None = None) -> ResponsesCall:
    request = parse_responses_request(body)
    conversation = [*(earlier or []), *request.items]
    response_id = new_response_id(1_700_000_000.0, scope="1", stored=True, key=ID_KEY)
    return ResponsesCall(request=request, response_id=response_id, created=1_700_000_000,
                         conversation=conversation, chat=responses_to_chat(request, conversation))


# -- request -> chat -------------------------------------------------------------------------------------------


def test_it_turns_a_string_input_and_instructions_into_system_and_user_messages() -> None:
    chat = call_for({"model": "normal", "input": "Hello", "instructions": "Be brief."}).chat
    assert chat == {"model": "normal", "messages": [{"role": "system", "content": "Be brief."},
                                                   {"role": "user", "content": "Hello"}]}


def test_it_translates_every_kind_of_input_item() -> None:
    chat = call_for({"model": "m", "input": [
        {"role": "developer", "content": "Use metric units."},
        {"type": "message", "role": "user", "content": [
            {"type": "input_text", "text": "What is in this picture, and the weather?"},
            {"type": "input_image", "image_url": "https://example.com/a.png", "detail": "low"}]},
        {"type": "reasoning", "id": "rs_1", "summary": []},
        {"type": "message", "role": "assistant", "content": [{"type": "output_text", "text": "Let me check."}]},
        {"type": "function_call", "call_id": "call_1", "name": "get_weather", "arguments": '{"city":"Oslo"}'},
        {"type": "function_call", "call_id": "call_2", "name": "get_weather", "arguments": '{"city":"Rome"}'},
        {"type": "function_call_output", "call_id": "call_1", "output": "4 C"},
        {"type": "function_call_output", "call_id": "call_2", "output": [{"type": "input_text", "text": "20 C"}]},
        {"role": "user", "content": [{"type": "input_file", "filename": "a.pdf",
                                      "file_data": "data:application/pdf;base64,JVBE"}]},
    ]}).chat
    assert chat["messages"] == [
        {"role": "system", "content": "Use metric units."},
        {"role": "user", "content": [
            {"type": "text", "text": "What is in this picture, and the weather?"},
            {"type": "image_url", "image_url": {"url": "https://example.com/a.png", "detail": "low"}}]},
        {"role": "assistant", "content": "Let me check.", "tool_calls": [
            {"id": "call_1", "type": "function", "function": {"name": "get_weather", "arguments": '{"city":"Oslo"}'}},
            {"id": "call_2", "type": "function", "function": {"name": "get_weather", "arguments": '{"city":"Rome"}'}}]},
        {"role": "tool", "tool_call_id": "call_1", "content": "4 C"},
        {"role": "tool", "tool_call_id": "call_2", "content": "20 C"},
        {"role": "user", "content": [{"type": "file", "file": {"file_data": "data:application/pdf;base64,JVBE",
                                                               "filename": "a.pdf"}}]},
    ]


def test_it_translates_tools_formats_reasoning_and_sampling() -> None:
    chat = call_for({
        "model": "m", "input": "hi", "tools": [WEATHER_TOOL],
        "tool_choice": {"type": "function", "name": "get_weather"},
        "parallel_tool_calls": False, "max_output_tokens": 300, "temperature": 0.2, "top_p": 0.9, "user": "u-1",
        "metadata": {"routing_policy": "fast"}, "store": False, "reasoning": {"effort": "high", "summary": "auto"},
        "text": {"format": {"type": "json_schema", "name": "city", "schema": SCHEMA, "strict": True},
                 "verbosity": "low"},
        "stream": True, "prompt_cache_key": "pk", "truncation": "disabled",
    }).chat
    assert chat == {
        "model": "m", "messages": [{"role": "user", "content": "hi"}], "max_completion_tokens": 300,
        "temperature": 0.2, "top_p": 0.9, "user": "u-1", "metadata": {"routing_policy": "fast"},
        "prompt_cache_key": "pk",
        "tools": [{"type": "function", "function": {"name": "get_weather", "description": "Weather of a city",
                                                    "parameters": SCHEMA, "strict": True}}],
        "parallel_tool_calls": False, "tool_choice": {"type": "function", "function": {"name": "get_weather"}},
        "response_format": {"type": "json_schema", "json_schema": {"name": "city", "schema": SCHEMA, "strict": True}},
        "reasoning_effort": "high", "verbosity": "low", "stream": True,
    }
    json_object = call_for({"model": "m", "input": "hi", "text": {"format": {"type": "json_object"}}}).chat
    assert json_object["response_format"] == {"type": "json_object"}
    plain = call_for({"model": "m", "input": "hi", "text": {"format": {"type": "text"}}}).chat
    assert "response_format" not in plain


def test_routing_sees_tools_schema_and_images_in_the_translated_body() -> None:
    chat = call_for({"model": "normal", "tools": [WEATHER_TOOL], "text": {"format": {
        "type": "json_schema", "name": "c", "schema": SCHEMA}}, "input": [{"role": "user", "content": [
            {"type": "input_text", "text": "look"}, {"type": "input_image", "image_url": "https://x/y.png"}]}]}).chat
    features = extract_features(chat, "openai")
    assert features.tool_names == ("get_weather",)
    assert features.structured_output == "json_schema"
    assert features.output_schema == SCHEMA
    assert features.attachments == ("image",)
    assert features.latest_user_text == "look"


def test_a_previous_conversation_goes_before_the_new_input() -> None:
    earlier = [{"type": "message", "role": "user", "content": "My name is Ada."},
               {"type": "message", "role": "assistant", "content": [{"type": "output_text", "text": "Hi Ada."}]}]
    chat = call_for({"model": "m", "input": "What is my name?"}, earlier).chat
    assert [m["role"] for m in chat["messages"]] == ["user", "assistant", "user"]
    assert chat["messages"][1]["content"] == "Hi Ada."


@pytest.mark.parametrize(("body", "param", "error"), [
    ({"input": "x"}, "model", RequestShapeError),
    ({"model": "m"}, "input", RequestShapeError),
    ({"model": "m", "input": []}, "input", RequestShapeError),
    ({"model": "m", "input": 5}, "input", RequestShapeError),
    ({"model": "m", "input": "x", "tools": [{"type": "web_search"}]}, "tools[0].type", CapabilityError),
    ({"model": "m", "input": "x", "tools": [{"type": "file_search", "vector_store_ids": []}]}, "tools[0].type",
     CapabilityError),
    ({"model": "m", "input": "x", "tools": [{"type": "function"}]}, "tools[0].name", RequestShapeError),
    ({"model": "m", "input": "x", "background": True}, "background", CapabilityError),
    ({"model": "m", "input": "x", "conversation": "conv_1"}, "conversation", CapabilityError),
    ({"model": "m", "input": "x", "prompt": {"id": "pmpt_1"}}, "prompt", CapabilityError),
    ({"model": "m", "input": [{"type": "computer_call_output", "call_id": "c1"}]}, "input[0].type", CapabilityError),
    ({"model": "m", "input": [{"type": "item_reference"}]}, "input[0].id", RequestShapeError),
    ({"model": "m", "input": [{"role": "tool", "content": "x"}]}, "input[0].role", RequestShapeError),
    ({"model": "m", "input": [{"role": "user", "content": [{"type": "output_text", "text": "x"}]}]},
     "input[0].content[0].type", RequestShapeError),
    ({"model": "m", "input": [{"role": "user", "content": [{"type": "input_image", "file_id": "file-1"}]}]},
     "input[0].content[0].file_id", CapabilityError),
    ({"model": "m", "input": [{"role": "user", "content": [{"type": "input_text"}]}]},
     "input[0].content[0].text", RequestShapeError),
    ({"model": "m", "input": [{"type": "function_call_output", "output": "x"}]}, "input[0].call_id",
     RequestShapeError),
    ({"model": "m", "input": [{"content": "no role"}]}, "input[0].type", RequestShapeError),
    ({"model": "m", "input": "x", "text": {"format": {"type": "xml"}}}, "text.format.type", RequestShapeError),
    ({"model": "m", "input": "x", "text": {"format": {"type": "json_schema", "name": "n"}}}, "text.format.schema",
     RequestShapeError),
    ({"model": "m", "input": "x", "reasoning": {"effort": "maximal"}}, "reasoning.effort", RequestShapeError),
    ({"model": "m", "input": "x", "max_output_tokens": 0}, "max_output_tokens", RequestShapeError),
    ({"model": "m", "input": "x", "stream": "yes"}, "stream", RequestShapeError),
    ({"model": "m", "input": "x", "store": 1}, "store", RequestShapeError),
    ({"model": "m", "input": "x", "temperature": "hot"}, "temperature", RequestShapeError),
    ({"model": "m", "input": "x", "tool_choice": {"type": "web_search_preview"}}, "tool_choice.type",
     CapabilityError),
    ({"model": "m", "input": "x", "tool_choice": "sometimes"}, "tool_choice", RequestShapeError),
    ({"model": "m", "input": "x", "metadata": {"n": 1}}, "metadata.n", RequestShapeError),
    ({"model": "m", "input": "x", "previous_response_id": ""}, "previous_response_id", RequestShapeError),
    ({"model": "m", "input": "x", "top_logprobs": 5}, "top_logprobs", CapabilityError),
])
def test_it_refuses_what_it_cannot_serve_naming_the_field(body: dict[str, Any], param: str,
                                                          error: type[TranslationError]) -> None:
    with pytest.raises(error) as raised:
        parse_responses_request(body)
    assert raised.value.param == param


def test_a_refusal_of_the_chat_translation_names_the_clients_own_field() -> None:
    earlier = [{"type": "message", "role": "user", "content": "stored turn"}]
    call = call_for({"model": "m", "instructions": "sys", "tools": [WEATHER_TOOL], "input": [
        {"role": "user", "content": [{"type": "input_text", "text": "a"}, {"type": "input_image",
                                                                           "image_url": "https://x/y.png"}]},
        {"type": "function_call", "call_id": "c1", "name": "get_weather", "arguments": "{}"},
        {"type": "function_call_output", "call_id": "c1", "output": [{"type": "input_text", "text": "t"},
                                                                     {"type": "input_image", "image_url": "u"}]}]},
        earlier)
    assert [call.client_param(p) for p in (
        "messages[0].content", "messages[1].content", "messages[2].content[1]", "messages[3].tool_calls[0]",
        "messages[4].content[1]", "tools[0].function.parameters", "response_format.json_schema",
        "max_completion_tokens", "reasoning_effort", "temperature", None)] == [
        "instructions", "previous_response_id", "input[0].content[1]", "input[1]", "input[2].output[1]",
        "tools[0].parameters", "text.format", "max_output_tokens", "reasoning.effort", "temperature", None]


def test_an_anthropic_refusal_of_a_responses_request_names_its_field() -> None:
    call = call_for({"model": "pub", "input": "x", "temperature": 1.5})
    with pytest.raises(CapabilityError) as raised:
        build_responses_request(provider=PROVIDERS["anthropic"], model=model("anthropic"), call=call, stream=False,
                                api_key="k")
    assert call.client_param(raised.value.param) == "temperature"


# -- the upstream request --------------------------------------------------------------------------------------


def test_an_openai_provider_gets_a_responses_call_with_the_whole_conversation_and_nothing_stored() -> None:
    earlier = [{"type": "message", "role": "user", "content": "first"}]
    call = call_for({"model": "pub", "input": "second", "previous_response_id": "resp_x", "store": True,
                     "instructions": "be kind", "tools": [WEATHER_TOOL]}, earlier)
    built = build_responses_request(provider=PROVIDERS["openai"], model=model("openai"), call=call, stream=True,
                                    api_key="sk-test")
    assert built.url == "http://127.0.0.1:18001/v1/responses"
    assert built.headers["Authorization"] == "Bearer sk-test"
    assert built.json["model"] == "gpt-4o-mini"
    assert built.json["input"] == [*earlier, {"type": "message", "role": "user", "content": "second"}]
    assert built.json["store"] is False
    assert built.json["stream"] is True
    assert "previous_response_id" not in built.json
    assert "stream_options" not in build_responses_request(
        provider=PROVIDERS["openai"], model=model("openai"), call=call_for(
            {"model": "pub", "input": "x", "stream_options": {"include_obfuscation": False}}),
        stream=False, api_key="k").json
    assert built.json["instructions"] == "be kind"
    assert built.json["tools"] == [WEATHER_TOOL]


@pytest.mark.parametrize("kind", ["anthropic", "gemini", "azure_openai"])
def test_every_other_kind_gets_its_own_chat_request(kind: str) -> None:
    call = call_for({"model": "pub", "input": "hello", "instructions": "be brief", "max_output_tokens": 50})
    built = build_responses_request(provider=PROVIDERS[kind], model=model(kind), call=call, stream=False,
                                    api_key="k")
    expected = get_adapter(kind).build_request(provider=PROVIDERS[kind], model=model(kind), body=call.chat,
                                               inbound="openai", stream=False, api_key="k")
    assert (built.url, built.json) == (expected.url, expected.json)
    assert "responses" not in built.url


def test_the_client_headers_a_host_reads_reach_a_translated_request_only() -> None:
    call = call_for({"model": "pub", "input": "hello"})
    headers = {"X-Title": "my app", "Authorization": "Bearer gateway-key", "anthropic-beta": "x"}
    openrouter = ProviderSpec(name="or", kind="openrouter", base_url="")
    built = build_responses_request(provider=openrouter, model=model("openai"), call=call, stream=False,
                                    api_key="k", client_headers=headers)
    assert built.headers["X-Title"] == "my app"
    assert built.headers["Authorization"] == "Bearer k"
    native = build_responses_request(provider=PROVIDERS["openai"], model=model("openai"), call=call, stream=False,
                                     api_key="k", client_headers=headers)
    assert set(native.headers) == {"Authorization", "Content-Type"}


def test_an_image_to_a_text_only_openai_model_is_refused_before_sending() -> None:
    call = call_for({"model": "pub", "input": [{"role": "user", "content": [
        {"type": "input_image", "image_url": "https://x/y.png"}]}]})
    with pytest.raises(CapabilityError) as raised:
        build_responses_request(provider=PROVIDERS["openai"], model=model("openai", frozenset({"text"})), call=call,
                                stream=False, api_key="k")
    assert raised.value.capability == "image"


# -- chat answer -> Response -----------------------------------------------------------------------------------


ANTHROPIC_TOOL_ANSWER = {
    "id": "msg_01", "type": "message", "role": "assistant", "model": "claude-sonnet-4-5", "stop_reason": "tool_use",
    "content": [{"type": "thinking", "thinking": "The user wants weather.", "signature": "s"},
                {"type": "text", "text": "Checking."},
                {"type": "tool_use", "id": "toolu_1", "name": "get_weather", "input": {"city": "Oslo"}}],
    "usage": {"input_tokens": 40, "cache_read_input_tokens": 10, "output_tokens": 25},
}


def test_an_anthropic_answer_becomes_a_response_with_reasoning_message_and_function_call() -> None:
    call = call_for({"model": "pub", "input": "weather in Oslo?", "tools": [WEATHER_TOOL], "metadata": {"a": "b"}})
    parsed = parse_responses_answer(kind="anthropic", status=200, data=json.dumps(ANTHROPIC_TOOL_ANSWER).encode(),
                                    public_model="pub", call=call)
    body = parsed.client_body
    assert body["id"] == call.response_id
    assert body["id"].startswith("resp_")
    assert (body["object"], body["status"], body["model"], body["incomplete_details"]) == (
        "response", "completed", "pub", None)
    assert [item["type"] for item in body["output"]] == ["reasoning", "message", "function_call"]
    reasoning, message, function_call = body["output"]
    assert reasoning["content"] == [{"type": "reasoning_text", "text": "The user wants weather."}]
    assert message["role"] == "assistant"
    assert message["content"][0]["type"] == "output_text"
    assert message["content"][0]["text"] == "Checking."
    assert (function_call["call_id"], function_call["name"], json.loads(function_call["arguments"])) == (
        "toolu_1", "get_weather", {"city": "Oslo"})
    assert body["usage"] == {"input_tokens": 50, "input_tokens_details": {"cached_tokens": 10, "cache_write_tokens": 0},
                             "output_tokens": 25,
                             "output_tokens_details": {"reasoning_tokens": 0}, "total_tokens": 75}
    assert (body["metadata"], body["store"], body["tools"]) == ({"a": "b"}, True, [WEATHER_TOOL])
    # The signed thinking is the reasoning item's encrypted_content; the answer's call id carries it as chat does.
    assert reasoning["encrypted_content"] == split_payload(parsed.answer.tool_calls[0].id)[1] != ""
    assert split_payload(parsed.answer.tool_calls[0].id)[0] == "toolu_1"
    # What the conversation keeps of it: the signed thinking, the text and the call, as input items the next turn
    # sends back.
    assert answer_items(parsed.answer) == [
        {"type": "reasoning", "summary": [], "encrypted_content": reasoning["encrypted_content"]},
        {"type": "message", "role": "assistant", "content": [{"type": "output_text", "text": "Checking."}]},
        {"type": "function_call", "call_id": "toolu_1", "name": "get_weather", "arguments": '{"city": "Oslo"}'}]
    # The openai SDK reads it.
    response = openai.types.responses.Response.model_validate(body)
    assert response.output_text == "Checking."


def test_a_truncated_chat_answer_is_an_incomplete_response() -> None:
    completion = {"id": "c1", "object": "chat.completion", "created": 1, "model": "x", "choices": [
        {"index": 0, "message": {"role": "assistant", "content": "partial"}, "finish_reason": "length"}],
                  "usage": {"prompt_tokens": 3, "completion_tokens": 5, "total_tokens": 8}}
    call = call_for({"model": "pub", "input": "x", "max_output_tokens": 5})
    body = parse_responses_answer(kind="azure_openai", status=200, data=json.dumps(completion).encode(),
                                  public_model="pub", call=call).client_body
    assert (body["status"], body["incomplete_details"], body["max_output_tokens"]) == (
        "incomplete", {"reason": "max_output_tokens"}, 5)


def test_an_openai_response_passes_with_the_gateways_id_and_the_public_model() -> None:
    upstream = {"id": "resp_upstream", "object": "response", "created_at": 5, "status": "completed", "model": "gpt-x",
                "store": False, "previous_response_id": None, "output": [
                    {"type": "reasoning", "id": "rs_1", "summary": [{"type": "summary_text", "text": "think"}]},
                    {"type": "message", "id": "msg_1", "role": "assistant", "status": "completed",
                     "content": [{"type": "output_text", "text": "Hello", "annotations": []}]},
                    {"type": "function_call", "id": "fc_1", "call_id": "call_9", "name": "f", "arguments": "{}",
                     "status": "completed"}],
                "usage": {"input_tokens": 9, "input_tokens_details": {"cached_tokens": 4}, "output_tokens": 7,
                          "output_tokens_details": {"reasoning_tokens": 2}, "total_tokens": 16}}
    call = call_for({"model": "pub", "input": "x", "previous_response_id": "resp_prev"})
    parsed = parse_responses_answer(kind="openai", status=200, data=json.dumps(upstream).encode(), public_model="pub",
                                    call=call)
    assert parsed.client_body["id"] == call.response_id
    assert (parsed.client_body["model"], parsed.client_body["store"], parsed.client_body["previous_response_id"]) == (
        "pub", True, "resp_prev")
    assert parsed.client_body["output"] == upstream["output"]
    assert (parsed.answer.text, parsed.answer.reasoning_text, parsed.answer.finish_reason) == (
        "Hello", "think", "tool_calls")
    assert [(c.id, c.name) for c in parsed.answer.tool_calls] == [("call_9", "f")]
    assert (parsed.usage.input_tokens, parsed.usage.cached_input_tokens, parsed.usage.output_tokens,
            parsed.usage.reasoning_tokens) == (9, 4, 7, 2)


def test_a_gateway_response_id_carries_its_creation_time_and_a_mac_for_its_key() -> None:
    made = new_response_id(1_800_000_000.5, scope="7", stored=False, key=ID_KEY)
    assert len(made) == len("resp_") + 40
    info = read_response_id(made, scope="7", keys=[response_id_key("old-secret"), ID_KEY])
    assert info is not None
    assert (info.created_unix, info.stored, info.legacy) == (1_800_000_000.5, False, False)
    assert read_response_id(made, scope="8", keys=[ID_KEY]) is None  # another key's
    assert read_response_id(made, scope="7", keys=[response_id_key("other-secret")]) is None
    assert read_response_id("resp_upstream", scope="7", keys=[ID_KEY]) is None
    legacy = read_response_id("resp_0000000003e8" + "0" * 36, scope="7", keys=[ID_KEY])
    assert legacy is not None
    assert (legacy.created_unix, legacy.stored, legacy.legacy) == (1.0, True, True)


def test_an_output_item_id_the_gateway_makes_names_its_response() -> None:
    response_id = new_response_id(1_800_000_000.5, scope="7", stored=True, key=ID_KEY)
    made = {item_id(prefix, response_id) for prefix in ("msg", "fc", "rs", "msg")}
    assert len(made) == 4  # unique within the response
    assert {response_id_of_item(made_id) for made_id in made} == {response_id}
    assert all(made_id.startswith(("msg_", "fc_", "rs_")) and len(made_id) <= 60 for made_id in made)
    # A provider's ids and the ids of the form the gateway made before say nothing of a response.
    for other in ("msg_67ccd3acc8d48190a77525dc6de64b4104becd8f2a8d8ed8", "fc_" + "0" * 48, "msg_abc",
                  "call_" + response_id[5:] + "abcdef", item_id("msg", "resp_upstream")):
        assert response_id_of_item(other) is None, other


# -- streams ---------------------------------------------------------------------------------------------------


def serve(body: bytes) -> httpx2.Client:
    def handler(request: httpx2.Request) -> httpx2.Response:
        return httpx2.Response(200, headers={"content-type": "text/event-stream"}, content=body)

    return httpx2.Client(transport=httpx2.MockTransport(handler))


@contextmanager
def openai_client(body: bytes) -> Iterator[openai.OpenAI]:
    with serve(body) as http, openai.OpenAI(api_key="k", base_url="http://gw.test/v1", http_client=http) as client:
        yield client


def events_of(body: bytes) -> list[dict[str, Any]]:
    return [json.loads(line[6:]) for line in body.decode().splitlines() if line.startswith("data: ")]


RECORDINGS = {"azure_openai": OPENAI_TOOLS_STREAM, "anthropic": ANTHROPIC_STREAM, "gemini": GEMINI_STREAM}


@pytest.mark.parametrize("kind", list(RECORDINGS))
def test_a_chat_stream_becomes_responses_events_the_sdk_accumulates(kind: str) -> None:
    call = call_for({"model": "pub", "input": "hi", "stream": True, "tools": [WEATHER_TOOL]})
    translator = responses_stream_translator(kind=kind, public_model="pub", call=call)
    body = b"".join(feed_split(translator, RECORDINGS[kind], [7, 100, 101, 555]))
    answer, usage = translator.answer, translator.usage
    events = events_of(body)
    assert [e["sequence_number"] for e in events] == list(range(len(events)))
    assert events[0]["type"] == "response.created"
    assert events[1]["type"] == "response.in_progress"
    assert events[-1]["type"] == ("response.completed" if answer.finish_reason == "tool_calls"
                                  else "response.incomplete")
    assert {e["response"]["id"] for e in events if "response" in e} == {call.response_id}
    with openai_client(body) as client, client.responses.stream(model="pub", input="hi") as stream:
        deltas = [e.delta for e in stream if e.type == "response.output_text.delta"]
        final = stream.get_final_response() if answer.finish_reason == "tool_calls" else None
    assert "".join(deltas) == answer.text
    last = events[-1]["response"]
    assert last["usage"]["input_tokens"] == usage.input_tokens
    assert last["usage"]["output_tokens"] == usage.output_tokens
    calls = [(i["call_id"], i["name"], i["arguments"]) for i in last["output"] if i["type"] == "function_call"]
    assert calls == [(split_payload(c.id)[0], c.name, c.arguments) for c in answer.tool_calls]
    texts = "".join(p["text"] for i in last["output"] if i["type"] == "message" for p in i["content"])
    assert texts == answer.text
    reasoning = "".join(p["text"] for i in last["output"] if i["type"] == "reasoning" for p in i["content"])
    assert reasoning == answer.reasoning_text
    if final is not None:
        assert final.id == call.response_id
        assert final.model == "pub"
        assert final.output_text == answer.text
        assert [(o.call_id, o.name) for o in final.output if o.type == "function_call"] == [
            (split_payload(c.id)[0], c.name) for c in answer.tool_calls]


def test_a_long_run_of_text_deltas_is_translated_whole() -> None:
    """An OpenAI-format translator may hand over a run of like deltas as one piece: every delta is read."""
    def chunk(delta: dict[str, Any], finish: str | None = None) -> str:
        return json.dumps({"id": "c", "object": "chat.completion.chunk", "created": 1, "model": "up",
                           "choices": [{"index": 0, "delta": delta, "finish_reason": finish}]})

    words = [f"w{i} " for i in range(60)]
    usage = {"id": "c", "object": "chat.completion.chunk", "created": 1, "model": "up", "choices": [],
             "usage": {"prompt_tokens": 3, "completion_tokens": 60, "total_tokens": 63}}
    stream = "".join(f"data: {event}\n\n" for event in [
        chunk({"role": "assistant", "content": ""}), *(chunk({"content": w}) for w in words), chunk({}, "stop"),
        json.dumps(usage), "[DONE]"]).encode()
    call = call_for({"model": "pub", "input": "hi", "stream": True})
    translator = responses_stream_translator(kind="vllm", public_model="pub", call=call)
    events = events_of(b"".join(feed_split(translator, stream, [400, 401, 2000])))
    assert "".join(e["delta"] for e in events if e["type"] == "response.output_text.delta") == "".join(words)
    assert events[-1]["type"] == "response.completed"
    assert events[-1]["response"]["usage"]["output_tokens"] == 60


def test_a_truncated_stream_ends_with_response_incomplete() -> None:
    call = call_for({"model": "pub", "input": "hi", "stream": True, "max_output_tokens": 10})
    translator = responses_stream_translator(kind="azure_openai", public_model="pub", call=call)
    events = events_of(b"".join(feed_split(translator, OPENAI_REASONING_STREAM, [50])))
    assert translator.answer.finish_reason == "length"
    assert events[-1]["type"] == "response.incomplete"
    assert events[-1]["response"]["incomplete_details"] == {"reason": "max_output_tokens"}
    assert "response.reasoning_text.delta" in [e["type"] for e in events]


def test_a_stream_that_fails_midway_ends_with_error_and_response_failed() -> None:
    call = call_for({"model": "pub", "input": "hi", "stream": True})
    translator = responses_stream_translator(kind="anthropic", public_model="pub", call=call)
    cut = ANTHROPIC_STREAM.index(b"event: content_block_stop")
    body = b"".join(translator.feed(ANTHROPIC_STREAM[:cut]) + translator.error_frames("api_error", "upstream died"))
    events = events_of(body)
    assert [e["type"] for e in events[-2:]] == ["error", "response.failed"]
    assert events[-2]["message"] == "upstream died"
    assert events[-1]["response"]["status"] == "failed"
    assert events[-1]["response"]["error"] == {"code": "server_error", "message": "upstream died"}
    assert [e["sequence_number"] for e in events] == list(range(len(events)))
    with openai_client(body) as client:
        seen = [e.type for e in client.responses.create(model="pub", input="hi", stream=True)]
    assert seen[-2:] == ["error", "response.failed"]


def _responses_sse(*events: dict[str, Any]) -> bytes:
    out = []
    for number, event in enumerate(events):
        out.append(f"event: {event['type']}\ndata: {json.dumps({**event, 'sequence_number': number})}\n\n")
    return "".join(out).encode()


def _upstream_response(status: str, output: list[dict[str, Any]], usage: dict[str, Any] | None) -> dict[str, Any]:
    return {"id": "resp_up", "object": "response", "created_at": 1, "status": status, "model": "gpt-up",
            "output": output, "store": False, "previous_response_id": None, "usage": usage, "error": None,
            "incomplete_details": None, "tools": [], "parallel_tool_calls": True, "tool_choice": "auto"}


MESSAGE = {"id": "msg_up", "type": "message", "status": "completed", "role": "assistant",
           "content": [{"type": "output_text", "text": "Hello there", "annotations": []}]}
CALL = {"id": "fc_up", "type": "function_call", "status": "completed", "call_id": "call_up", "name": "get_weather",
        "arguments": '{"city":"Oslo"}'}
USAGE = {"input_tokens": 12, "input_tokens_details": {"cached_tokens": 2}, "output_tokens": 8,
         "output_tokens_details": {"reasoning_tokens": 0}, "total_tokens": 20}
OPENAI_RESPONSES_STREAM = _responses_sse(
    {"type": "response.created", "response": _upstream_response("in_progress", [], None)},
    {"type": "response.in_progress", "response": _upstream_response("in_progress", [], None)},
    {"type": "response.output_item.added", "output_index": 0, "item": {**MESSAGE, "content": [],
                                                                     "status": "in_progress"}},
    {"type": "response.content_part.added", "item_id": "msg_up", "output_index": 0, "content_index": 0,
     "part": {"type": "output_text", "text": "", "annotations": []}},
    {"type": "response.output_text.delta", "item_id": "msg_up", "output_index": 0, "content_index": 0,
     "delta": "Hello ", "logprobs": []},
    {"type": "response.output_text.delta", "item_id": "msg_up", "output_index": 0, "content_index": 0,
     "delta": "there", "logprobs": []},
    {"type": "response.output_text.done", "item_id": "msg_up", "output_index": 0, "content_index": 0,
     "text": "Hello there", "logprobs": []},
    {"type": "response.content_part.done", "item_id": "msg_up", "output_index": 0, "content_index": 0,
     "part": MESSAGE["content"][0]},
    {"type": "response.output_item.done", "output_index": 0, "item": MESSAGE},
    {"type": "response.output_item.added", "output_index": 1, "item": {**CALL, "arguments": "",
                                                                     "status": "in_progress"}},
    {"type": "response.function_call_arguments.delta", "item_id": "fc_up", "output_index": 1, "delta": '{"city":'},
    {"type": "response.function_call_arguments.delta", "item_id": "fc_up", "output_index": 1, "delta": '"Oslo"}'},
    {"type": "response.function_call_arguments.done", "item_id": "fc_up", "output_index": 1,
     "arguments": '{"city":"Oslo"}'},
    {"type": "response.output_item.done", "output_index": 1, "item": CALL},
    {"type": "response.completed", "response": _upstream_response("completed", [MESSAGE, CALL], USAGE)},
)


def test_an_openai_responses_stream_passes_through_with_the_gateways_id_and_the_public_model() -> None:
    call = call_for({"model": "pub", "input": "hi", "stream": True, "previous_response_id": "resp_prev"})
    translator = responses_stream_translator(kind="openai", public_model="pub", call=call)
    body = b"".join(feed_split(translator, OPENAI_RESPONSES_STREAM, [3, 200, 201, 900]))
    assert translator.complete
    answer, usage = translator.answer, translator.usage
    assert (answer.text, answer.finish_reason) == ("Hello there", "tool_calls")
    assert [(c.id, c.name, c.arguments) for c in answer.tool_calls] == [("call_up", "get_weather", '{"city":"Oslo"}')]
    assert (usage.input_tokens, usage.cached_input_tokens, usage.output_tokens) == (12, 2, 8)
    events = events_of(body)
    assert len(events) == len(events_of(OPENAI_RESPONSES_STREAM))
    lifecycle = [e["response"] for e in events if "response" in e]
    assert {(r["id"], r["model"], r["store"], r["previous_response_id"]) for r in lifecycle} == {
        (call.response_id, "pub", True, "resp_prev")}
    deltas = [block for block in OPENAI_RESPONSES_STREAM.split(b"\n\n") if b"output_text.delta" in block]
    assert all(block in body for block in deltas)  # the other events pass byte for byte
    with openai_client(body) as client, client.responses.stream(model="pub", input="hi") as stream:
        final = stream.get_final_response()
    assert (final.id, final.model, final.output_text) == (call.response_id, "pub", "Hello there")


def test_an_openai_responses_stream_that_fails_is_ended_by_the_gateway() -> None:
    failed = _upstream_response("failed", [], None)
    failed["error"] = {"code": "server_error", "message": "boom"}
    stream = OPENAI_RESPONSES_STREAM.split(b"event: response.output_item.done")[0] + _responses_sse(
        {"type": "response.failed", "response": failed})
    call = call_for({"model": "pub", "input": "hi", "stream": True})
    translator = responses_stream_translator(kind="openai", public_model="pub", call=call)
    frames = translator.feed(stream)
    assert translator.failure is not None
    assert translator.failure.message == "boom"
    events = events_of(b"".join(frames + translator.error_frames("api_error", translator.failure.message)))
    assert "response.failed" not in [e["type"] for e in events[:-1]]  # the upstream's own is replaced
    assert [e["type"] for e in events[-2:]] == ["error", "response.failed"]
    numbers = [e["sequence_number"] for e in events]
    assert numbers == sorted(set(numbers))
    assert events[-1]["response"]["id"] == call.response_id


def test_the_reasoning_stream_of_a_chat_provider_is_a_reasoning_item() -> None:
    call = call_for({"model": "pub", "input": "hi", "stream": True})
    translator = responses_stream_translator(kind="azure_openai", public_model="pub", call=call)
    events = events_of(b"".join(feed_split(translator, OPENAI_REASONING_STREAM, [])))
    added = [e["item"]["type"] for e in events if e["type"] == "response.output_item.added"]
    assert added[0] == "reasoning"
    done = [e for e in events if e["type"] == "response.reasoning_text.done"]
    assert done
    assert done[0]["text"] == translator.answer.reasoning_text

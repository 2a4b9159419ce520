"""The Bedrock Converse adapter: requests both ways (OpenAI and Anthropic clients), answers, event streams, errors,
and Titan and Cohere embeddings on InvokeModel."""

from __future__ import annotations

import json
from typing import Any

import pytest

from routing.core.answer import FINISH_CONTENT_FILTER, FINISH_LENGTH, FINISH_STOP, FINISH_TOOL_CALLS
from routing.core.embeddings import EmbeddingsRequest
from routing.core.error_classifier import classify_http_error
from routing.core.outcome import ErrorClass
from routing.core.table import CAPABILITIES, ModelSpec, ProviderSpec
from routing.providers import CapabilityError, MalformedResponse, RequestShapeError, get_adapter
from routing.providers.bedrock.eventstream import encode_frame
from routing.providers.bedrock.request import JSON_TOOL
from routing.providers.common.thinking_ids import ThinkingBlock, id_with_thinking
from routing.providers.embeddings import build_embeddings_request, parse_embeddings_response
from tests.providers.support import anthropic_frames, feed_split, openai_frames, split_strategies

PROVIDER = ProviderSpec(name="br", kind="bedrock", base_url="https://bedrock-runtime.us-east-1.amazonaws.com",
                        region="us-east-1")
MODEL = ModelSpec(name="bedrock/claude", provider="br", upstream="anthropic.claude-3-5-haiku-20241022-v1:0",
                  capabilities=frozenset(CAPABILITIES))
NOVA = ModelSpec(name="bedrock/nova", provider="br", upstream="amazon.nova-lite-v1:0",
                 capabilities=frozenset(CAPABILITIES))
ADAPTER = get_adapter("bedrock")
CITY = {"type": "object", "properties": {"city": {"type": "string"}}}
WEATHER = {"type": "function", "function": {"name": "get_weather", "description": "Weather in a city",
                                            "parameters": CITY}}
PNG = "iVBORw0KGgo="


def build(body: dict[str, Any], *, inbound: str = "openai", stream: bool = False, model: ModelSpec = MODEL,
          api_key: str = "") -> dict[str, Any]:
    request = ADAPTER.build_request(provider=PROVIDER, model=model, body=body, inbound=inbound,  # type: ignore[arg-type]
                                    stream=stream, api_key=api_key)
    operation = "converse-stream" if stream else "converse"
    assert request.url == (f"https://bedrock-runtime.us-east-1.amazonaws.com/model/"
                           f"{model.upstream.replace(':', '%3A')}/{operation}")
    return request.json


def frame(kind: str, payload: dict[str, Any], message_type: str = "event") -> bytes:
    name = ":exception-type" if message_type == "exception" else ":event-type"
    return encode_frame({name: kind, ":content-type": "application/json", ":message-type": message_type},
                        json.dumps(payload).encode())


# -- requests -------------------------------------------------------------------------------------------


def test_an_openai_body_becomes_a_converse_request_with_system_and_inference_config() -> None:
    payload = build({
        "model": "bedrock/claude",
        "messages": [{"role": "developer", "content": "Be brief."}, {"role": "user", "content": "Hi"}],
        "max_completion_tokens": 100, "temperature": 0.3, "top_p": 0.9, "stop": "END", "user": "u1",
        "parallel_tool_calls": True, "presence_penalty": 0,
    }, stream=True)

    assert payload == {
        "messages": [{"role": "user", "content": [{"text": "Hi"}]}],
        "system": [{"text": "Be brief."}],
        "inferenceConfig": {"maxTokens": 100, "temperature": 0.3, "topP": 0.9, "stopSequences": ["END"]},
    }


def test_tool_calls_and_results_become_tool_use_and_merged_tool_result_turns() -> None:
    payload = build({
        "model": "m",
        "messages": [
            {"role": "user", "content": [{"type": "text", "text": "Weather?"},
                                         {"type": "image_url", "image_url": {"url": f"data:image/png;base64,{PNG}"}}]},
            {"role": "assistant", "content": "Let me look.", "tool_calls": [
                {"id": "call_1", "type": "function",
                 "function": {"name": "get_weather", "arguments": '{"city":"Oslo"}'}},
                {"id": "call_2", "type": "function", "function": {"name": "get_weather", "arguments": ""}}]},
            {"role": "tool", "tool_call_id": "call_1", "content": "rain"},
            {"role": "tool", "tool_call_id": "call_2", "content": [{"type": "text", "text": "sun"}]},
            {"role": "user", "content": "Thanks"},
        ],
        "tools": [WEATHER], "tool_choice": "required",
    })

    assert payload["messages"] == [
        {"role": "user", "content": [{"text": "Weather?"},
                                     {"image": {"format": "png", "source": {"bytes": PNG}}}]},
        {"role": "assistant", "content": [
            {"text": "Let me look."},
            {"toolUse": {"toolUseId": "call_1", "name": "get_weather", "input": {"city": "Oslo"}}},
            {"toolUse": {"toolUseId": "call_2", "name": "get_weather", "input": {}}}]},
        {"role": "user", "content": [
            {"toolResult": {"toolUseId": "call_1", "content": [{"text": "rain"}]}},
            {"toolResult": {"toolUseId": "call_2", "content": [{"text": "sun"}]}},
            {"text": "Thanks"}]},
    ]
    assert payload["toolConfig"] == {
        "tools": [{"toolSpec": {"name": "get_weather", "description": "Weather in a city",
                                "inputSchema": {"json": CITY}}}],
        "toolChoice": {"any": {}},
    }


@pytest.mark.parametrize(("choice", "expected"), [
    ("auto", None),
    ({"type": "function", "function": {"name": "get_weather"}}, {"tool": {"name": "get_weather"}}),
])
def test_tool_choice_maps_to_auto_or_a_named_tool(choice: Any, expected: Any) -> None:
    config = build({"model": "m", "messages": [{"role": "user", "content": "x"}], "tools": [WEATHER],
                    "tool_choice": choice})["toolConfig"]
    assert config.get("toolChoice") == expected


def test_tool_choice_none_drops_the_tools_and_a_replayed_call_declares_its_tool() -> None:
    assert "toolConfig" not in build({"model": "m", "messages": [{"role": "user", "content": "x"}],
                                      "tools": [WEATHER], "tool_choice": "none"})
    replay = build({"model": "m", "messages": [
        {"role": "user", "content": "x"},
        {"role": "assistant", "tool_calls": [{"id": "c", "type": "function",
                                              "function": {"name": "lookup", "arguments": "{}"}}]},
        {"role": "tool", "tool_call_id": "c", "content": "found"}]})
    assert replay["toolConfig"] == {"tools": [{"toolSpec": {"name": "lookup",
                                                            "inputSchema": {"json": {"type": "object"}}}}]}


def test_a_json_schema_becomes_a_forced_tool_and_json_object_an_instruction() -> None:
    schema = {"type": "object", "properties": {"name": {"type": "string"}}}
    payload = build({"model": "m", "messages": [{"role": "user", "content": "x"}],
                     "response_format": {"type": "json_schema", "json_schema": {"name": "p", "schema": schema}}})
    assert payload["toolConfig"]["toolChoice"] == {"tool": {"name": JSON_TOOL}}
    assert payload["toolConfig"]["tools"][0]["toolSpec"]["inputSchema"] == {"json": schema}

    payload = build({"model": "m", "messages": [{"role": "user", "content": "x"}],
                     "response_format": {"type": "json_object"}})
    assert "JSON object" in payload["system"][0]["text"]


def test_reasoning_and_top_k_go_to_anthropic_models_in_additional_fields() -> None:
    payload = build({"model": "m", "messages": [{"role": "user", "content": "x"}], "reasoning_effort": "low",
                     "top_k": 5, "max_tokens": 1000})
    assert payload["additionalModelRequestFields"] == {"top_k": 5,
                                                       "thinking": {"type": "enabled", "budget_tokens": 2048}}
    assert payload["inferenceConfig"]["maxTokens"] == 3048  # the budget plus the answer's room


def test_an_anthropic_body_is_translated_through_the_openai_form() -> None:
    payload = build({
        "model": "bedrock/claude", "max_tokens": 64, "system": "Be kind.",
        "messages": [
            {"role": "user", "content": [{"type": "text", "text": "Weather?"},
                                         {"type": "image", "source": {"type": "base64", "media_type": "image/jpeg",
                                                                      "data": PNG}}]},
            {"role": "assistant", "content": [{"type": "tool_use", "id": "tu_1", "name": "get_weather",
                                               "input": {"city": "Rome"}}]},
            {"role": "user", "content": [{"type": "tool_result", "tool_use_id": "tu_1", "content": "warm"}]},
        ],
        "tools": [{"name": "get_weather", "input_schema": CITY}], "tool_choice": {"type": "any"},
        "stop_sequences": ["Z"],
    }, inbound="anthropic")

    assert payload["system"] == [{"text": "Be kind."}]
    assert payload["inferenceConfig"] == {"maxTokens": 64, "stopSequences": ["Z"]}
    assert payload["messages"][0]["content"][1] == {"image": {"format": "jpeg", "source": {"bytes": PNG}}}
    assert payload["messages"][1]["content"] == [
        {"toolUse": {"toolUseId": "tu_1", "name": "get_weather", "input": {"city": "Rome"}}}]
    assert payload["messages"][2]["content"][0]["toolResult"]["toolUseId"] == "tu_1"
    assert payload["toolConfig"]["toolChoice"] == {"any": {}}


def test_files_become_named_documents_and_what_converse_cannot_read_is_refused() -> None:
    pdf = {"type": "file", "file": {"filename": "Q3 report: final!.pdf",
                                    "file_data": "data:application/pdf;base64,JVBE"}}
    payload = build({"model": "m", "messages": [{"role": "user", "content": [{"type": "text", "text": "Sum up"}, pdf,
                                                                             pdf]}]})
    assert payload["messages"][0]["content"][1:] == [
        {"document": {"format": "pdf", "name": "Q3 report final", "source": {"bytes": "JVBE"}}},
        {"document": {"format": "pdf", "name": "Q3 report final (2)", "source": {"bytes": "JVBE"}}},
    ]
    anthropic = build({"model": "m", "max_tokens": 9, "messages": [{"role": "user", "content": [
        {"type": "document", "source": {"type": "base64", "media_type": "text/csv", "data": "YSxi"}},
        {"type": "text", "text": "Read it"}]}]}, inbound="anthropic")
    assert anthropic["messages"][0]["content"][0]["document"]["format"] == "csv"
    for file, param in (({"file_id": "file-1"}, "messages[0].content[0].file.file_id"),
                        ({"file_data": "data:application/zip;base64,UEs="}, "messages[0].content[0].file.file_data")):
        with pytest.raises(CapabilityError) as raised:
            build({"model": "m", "messages": [{"role": "user", "content": [{"type": "file", "file": file}]}]})
        assert raised.value.param == param


def test_an_api_key_is_a_bearer_token_and_never_shown() -> None:
    request = ADAPTER.build_request(provider=PROVIDER, model=MODEL, inbound="openai", stream=False,
                                    body={"model": "m", "messages": [{"role": "user", "content": "x"}]},
                                    api_key="bedrock-key-secret")
    assert request.headers["Authorization"] == "Bearer bedrock-key-secret"
    assert "bedrock-key-secret" not in repr(request)


@pytest.mark.parametrize(("body", "error", "param"), [
    ({"n": 2}, CapabilityError, "n"),
    ({"seed": 3}, CapabilityError, "seed"),
    ({"logprobs": True}, CapabilityError, "logprobs"),
    ({"frequency_penalty": 0.5}, CapabilityError, "frequency_penalty"),
    ({"top_k": 3, "model": "nova"}, CapabilityError, "top_k"),
    ({"reasoning_effort": "high", "model": "nova"}, CapabilityError, "reasoning_effort"),
    ({"messages": [{"role": "user", "content": [{"type": "image_url", "image_url": {"url": "https://x/y.png"}}]}]},
     CapabilityError, "messages[0].content[0].image_url.url"),
    ({"messages": [{"role": "user", "content": [{"type": "image_url",
                                                 "image_url": {"url": "data:image/bmp;base64,AA=="}}]}]},
     CapabilityError, "messages[0].content[0].image_url.url"),
    ({"messages": [{"role": "assistant", "content": None, "tool_calls": [
        {"id": "c", "type": "function", "function": {"name": "f", "arguments": "[1]"}}]}]},
     RequestShapeError, "messages[0].tool_calls[0].function.arguments"),
    ({"tools": [{"type": "function", "function": {"name": JSON_TOOL}}]}, RequestShapeError, "tools[0].function.name"),
    ({"tools": [WEATHER], "response_format": {"type": "json_schema", "json_schema": {"schema": CITY}}},
     CapabilityError, "response_format"),
    ({"messages": [{"role": "user", "content": "x"},
                   {"role": "assistant", "tool_calls": [{"id": "c", "type": "function",
                                                         "function": {"name": "f", "arguments": "{}"}}]}],
      "tool_choice": "none"}, CapabilityError, "tool_choice"),
    ({"frobnicate": 1}, CapabilityError, "frobnicate"),
])
def test_what_converse_cannot_take_is_refused_before_sending_naming_the_field(
        body: dict[str, Any], error: type[Exception], param: str) -> None:
    model = NOVA if body.pop("model", "") == "nova" else MODEL
    full = {"model": "m", "messages": [{"role": "user", "content": "x"}], **body}
    with pytest.raises(error) as raised:
        build(full, model=model)
    assert raised.value.param == param  # type: ignore[attr-defined]


# -- answers --------------------------------------------------------------------------------------------

ANSWER = {
    "output": {"message": {"role": "assistant", "content": [
        {"reasoningContent": {"reasoningText": {"text": "thinking...", "signature": "s"}}},
        {"text": "Checking."},
        {"toolUse": {"toolUseId": "tu_9", "name": "get_weather", "input": {"city": "Oslo"}}}]}},
    "stopReason": "tool_use",
    "usage": {"inputTokens": 20, "outputTokens": 9, "totalTokens": 129, "cacheReadInputTokens": 100},
    "metrics": {"latencyMs": 300},
}


def parse(data: Any, inbound: str = "openai") -> Any:
    return ADAPTER.parse_response(status=200, data=json.dumps(data).encode(), inbound=inbound,  # type: ignore[arg-type]
                                  public_model="bedrock/claude", created=1700000000)


def test_an_answer_reaches_an_openai_client_with_tool_calls_reasoning_and_cache_reads_in_usage() -> None:
    parsed = parse(ANSWER)
    message = parsed.client_body["choices"][0]["message"]
    assert message["content"] == "Checking."
    assert message["reasoning_content"] == "thinking..."
    # Claude's signed reasoning rides in the id of the call it preceded (thinking_ids).
    signed = ThinkingBlock("thinking", "thinking...", "s")
    assert message["tool_calls"] == [{"id": id_with_thinking("tu_9", [signed]), "type": "function",
                                      "function": {"name": "get_weather", "arguments": '{"city":"Oslo"}'}}]
    assert parsed.client_body["choices"][0]["finish_reason"] == "tool_calls"
    assert (parsed.usage.input_tokens, parsed.usage.cached_input_tokens, parsed.usage.output_tokens) == (120, 100, 9)
    assert parsed.answer.finish_reason == FINISH_TOOL_CALLS


def test_an_answer_reaches_an_anthropic_client_as_a_message() -> None:
    body = parse(ANSWER, inbound="anthropic").client_body
    assert body["type"] == "message"
    assert [block["type"] for block in body["content"]] == ["thinking", "text", "tool_use"]
    assert body["stop_reason"] == "tool_use"
    assert body["usage"]["cache_read_input_tokens"] == 100


def test_the_forced_json_tool_is_the_answers_text() -> None:
    data = {"output": {"message": {"role": "assistant", "content": [
        {"toolUse": {"toolUseId": "t", "name": JSON_TOOL, "input": {"name": "Ada"}}}]}},
        "stopReason": "tool_use", "usage": {"inputTokens": 1, "outputTokens": 1}}
    parsed = parse(data)
    assert json.loads(parsed.client_body["choices"][0]["message"]["content"]) == {"name": "Ada"}
    assert "tool_calls" not in parsed.client_body["choices"][0]["message"]
    assert parsed.answer.finish_reason == FINISH_STOP


@pytest.mark.parametrize(("reason", "finish"), [
    ("end_turn", FINISH_STOP), ("stop_sequence", FINISH_STOP), ("max_tokens", FINISH_LENGTH),
    ("guardrail_intervened", FINISH_CONTENT_FILTER), ("content_filtered", FINISH_CONTENT_FILTER),
    ("model_context_window_exceeded", FINISH_LENGTH),
])
def test_stop_reasons_are_mapped(reason: str, finish: str) -> None:
    data = {"output": {"message": {"role": "assistant", "content": [{"text": "x"}]}}, "stopReason": reason}
    assert parse(data).answer.finish_reason == finish


def test_an_answer_without_output_message_is_malformed() -> None:
    with pytest.raises(MalformedResponse):
        parse({"stopReason": "end_turn"})


@pytest.mark.parametrize(("status", "error_type", "message", "error_class", "reason"), [
    (429, "ThrottlingException", "Too many requests, please wait before trying again.", ErrorClass.TRANSIENT,
     "rate_limited"),
    (400, "ValidationException", "Input is too long for requested model.", ErrorClass.INCOMPATIBLE,
     "context_overflow"),
    (400, "ValidationException", "The model returned the following errors: too many input tokens",
     ErrorClass.INCOMPATIBLE, "context_overflow"),
    (400, "ValidationException", "A conversation must start with a user message.", ErrorClass.PERMANENT,
     "bad_request"),
    (403, "AccessDeniedException", "You don't have access to the model.", ErrorClass.INCOMPATIBLE, "auth"),
    (429, "ModelNotReadyException", "Model is not ready.", ErrorClass.TRANSIENT, "rate_limited"),
    (400, "ServiceQuotaExceededException", "Your request exceeds the service quota.", ErrorClass.TRANSIENT,
     "rate_limited"),
    (424, "ModelErrorException", "The model failed.", ErrorClass.TRANSIENT, "server_error"),
    (503, "ServiceUnavailableException", "Bedrock is unable to process your request.", ErrorClass.TRANSIENT,
     "overloaded"),
])
def test_bedrock_errors_are_read_and_classified_by_their_exception_name(
        status: int, error_type: str, message: str, error_class: ErrorClass, reason: str) -> None:
    data = json.dumps({"message": message}).encode()
    assert ADAPTER.parse_error(status=status, data=data).message == message
    headers = {"x-amzn-ErrorType": f"{error_type}:http://internal.amazon.com/coral/com.amazon.bedrock/"}
    outcome = classify_http_error(status, headers, data, "bedrock")
    assert (outcome.error_class, outcome.reason) == (error_class, reason)
    assert outcome.retry_after_s is None  # Bedrock sends no Retry-After


# -- streams --------------------------------------------------------------------------------------------

TEXT_STREAM = b"".join([
    frame("messageStart", {"role": "assistant", "p": "abc"}),
    frame("contentBlockDelta", {"contentBlockIndex": 0, "delta": {"reasoningContent": {"text": "hmm"}}}),
    frame("contentBlockDelta", {"contentBlockIndex": 0, "delta": {"reasoningContent": {"signature": "sig"}}}),
    frame("contentBlockStop", {"contentBlockIndex": 0}),
    frame("contentBlockDelta", {"contentBlockIndex": 1, "delta": {"text": "Hello"}}),
    frame("contentBlockDelta", {"contentBlockIndex": 1, "delta": {"text": " wörld"}}),
    frame("contentBlockStop", {"contentBlockIndex": 1}),
    frame("messageStop", {"stopReason": "end_turn"}),
    frame("metadata", {"usage": {"inputTokens": 12, "outputTokens": 4, "totalTokens": 16}, "metrics": {}}),
])
TOOL_STREAM = b"".join([
    frame("messageStart", {"role": "assistant"}),
    frame("contentBlockStart", {"contentBlockIndex": 0, "start": {"toolUse": {"toolUseId": "tu_A",
                                                                              "name": "get_weather"}}}),
    frame("contentBlockDelta", {"contentBlockIndex": 0, "delta": {"toolUse": {"input": '{"ci'}}}),
    frame("contentBlockDelta", {"contentBlockIndex": 0, "delta": {"toolUse": {"input": 'ty":"Paris"}'}}}),
    frame("contentBlockStop", {"contentBlockIndex": 0}),
    frame("messageStop", {"stopReason": "tool_use"}),
    frame("metadata", {"usage": {"inputTokens": 30, "outputTokens": 10}}),
])


@pytest.mark.parametrize("strategy", ["whole", "every byte", "random"])
def test_a_text_stream_reaches_an_openai_client_whatever_the_reads(strategy: str) -> None:
    translator = ADAPTER.stream_translator(inbound="openai", public_model="bedrock/claude", client_wants_usage=True)
    chunks = openai_frames(feed_split(translator, TEXT_STREAM, split_strategies(TEXT_STREAM)[strategy]))

    assert chunks[-1] == "[DONE]"
    text = "".join(c["choices"][0]["delta"].get("content") or "" for c in chunks[:-1] if c["choices"])
    assert text == "Hello wörld"
    assert chunks[-2]["usage"]["prompt_tokens"] == 12
    assert translator.complete
    assert translator.answer.reasoning_text == "hmm"
    assert translator.usage.output_tokens == 4


def test_a_tool_stream_reaches_an_anthropic_client_as_a_tool_use_block() -> None:
    translator = ADAPTER.stream_translator(inbound="anthropic", public_model="bedrock/claude", client_wants_usage=True)
    events = anthropic_frames(translator.feed(TOOL_STREAM) + translator.finish())

    names = [name for name, _ in events]
    assert names[0] == "message_start"
    assert names[-1] == "message_stop"
    start = next(data for name, data in events if name == "content_block_start")
    assert start["content_block"]["name"] == "get_weather"
    assert start["content_block"]["id"] == "toolu_gm-dHVfQQ"  # Bedrock's id, whole, in an Anthropic client's shape
    partial = "".join(data["delta"]["partial_json"] for name, data in events
                      if name == "content_block_delta" and data["delta"]["type"] == "input_json_delta")
    assert json.loads(partial) == {"city": "Paris"}
    assert next(data for name, data in events if name == "message_delta")["delta"]["stop_reason"] == "tool_use"


def test_the_forced_json_tool_streams_as_text() -> None:
    stream = b"".join([
        frame("messageStart", {"role": "assistant"}),
        frame("contentBlockStart", {"contentBlockIndex": 0, "start": {"toolUse": {"toolUseId": "t",
                                                                                  "name": JSON_TOOL}}}),
        frame("contentBlockDelta", {"contentBlockIndex": 0, "delta": {"toolUse": {"input": '{"name":'}}}),
        frame("contentBlockDelta", {"contentBlockIndex": 0, "delta": {"toolUse": {"input": '"Ada"}'}}}),
        frame("messageStop", {"stopReason": "tool_use"}),
        frame("metadata", {"usage": {"inputTokens": 3, "outputTokens": 2}}),
    ])
    translator = ADAPTER.stream_translator(inbound="openai", public_model="bedrock/claude", client_wants_usage=False)
    chunks = openai_frames(translator.feed(stream) + translator.finish())
    text = "".join(c["choices"][0]["delta"].get("content") or "" for c in chunks[:-1] if c["choices"])
    assert json.loads(text) == {"name": "Ada"}
    assert all("tool_calls" not in c["choices"][0]["delta"] for c in chunks[:-1] if c["choices"])
    assert translator.answer.finish_reason == FINISH_STOP


def test_an_exception_frame_is_a_failure_and_a_stream_cut_before_message_stop_is_incomplete() -> None:
    failing = ADAPTER.stream_translator(inbound="openai", public_model="m", client_wants_usage=True)
    failing.feed(b"".join([
        frame("messageStart", {"role": "assistant"}),
        frame("contentBlockDelta", {"contentBlockIndex": 0, "delta": {"text": "Hel"}}),
        frame("throttlingException", {"message": "Too many tokens"}, message_type="exception"),
    ]))
    assert failing.failure is not None
    assert failing.failure.message == "Too many tokens"
    assert not failing.complete

    cut = ADAPTER.stream_translator(inbound="openai", public_model="m", client_wants_usage=True)
    end = TEXT_STREAM.index(frame("messageStop", {"stopReason": "end_turn"}))
    cut.feed(TEXT_STREAM[:end])
    cut.finish()
    assert not cut.complete
    assert cut.failure is None


def test_a_corrupt_or_truncated_frame_is_a_malformed_stream() -> None:
    corrupt = bytearray(TEXT_STREAM)
    corrupt[40] ^= 0xFF
    translator = ADAPTER.stream_translator(inbound="openai", public_model="m", client_wants_usage=True)
    with pytest.raises(MalformedResponse):
        translator.feed(bytes(corrupt))

    truncated = ADAPTER.stream_translator(inbound="openai", public_model="m", client_wants_usage=True)
    truncated.feed(TEXT_STREAM[:-5])
    with pytest.raises(MalformedResponse):
        truncated.finish()


# -- embeddings -----------------------------------------------------------------------------------------

TITAN = ModelSpec(name="bedrock/titan", provider="br", upstream="amazon.titan-embed-text-v2:0",
                  endpoints=frozenset({"embeddings"}), dimensions=1024, family="titan-v2")
COHERE = ModelSpec(name="bedrock/cohere", provider="br", upstream="cohere.embed-english-v3",
                   endpoints=frozenset({"embeddings"}), dimensions=4, family="cohere-v3")


def embeddings(*inputs: str | tuple[int, ...], dimensions: int | None = None) -> EmbeddingsRequest:
    return EmbeddingsRequest(model="m", inputs=tuple(inputs), encoding_format="float", dimensions=dimensions)


def test_titan_takes_one_input_with_its_size_and_reports_its_tokens() -> None:
    request = build_embeddings_request(PROVIDER, TITAN, embeddings("hello", dimensions=256), "")
    assert request.url.endswith("/model/amazon.titan-embed-text-v2%3A0/invoke")
    assert request.json == {"inputText": "hello", "dimensions": 256, "normalize": True}
    assert "Authorization" not in request.headers  # signed with SigV4 later

    answer = parse_embeddings_response("bedrock", json.dumps({"embedding": [0.5] * 256, "inputTextTokenCount": 2})
                                       .encode(), embeddings("hello", dimensions=256), "bedrock/titan", dimensions=256)
    assert answer.client_body["data"][0]["embedding"] == [0.5] * 256
    assert (answer.usage.input_tokens, answer.usage_estimated) == (2, False)

    with pytest.raises(CapabilityError) as raised:
        build_embeddings_request(PROVIDER, TITAN, embeddings("a", "b"), "")
    assert raised.value.param == "input"
    first_generation = ModelSpec(name="bedrock/titan1", provider="br", upstream="amazon.titan-embed-text-v1",
                                 endpoints=frozenset({"embeddings"}), dimensions=1536, family="titan-v1")
    assert build_embeddings_request(PROVIDER, first_generation, embeddings("hi"), "").json == {"inputText": "hi"}
    with pytest.raises(CapabilityError):
        build_embeddings_request(PROVIDER, TITAN, embeddings("hi", dimensions=300), "")


def test_cohere_takes_a_batch_and_its_usage_is_estimated() -> None:
    request = build_embeddings_request(PROVIDER, COHERE, embeddings("a", "bb"), "key")
    assert request.json == {"texts": ["a", "bb"], "input_type": "search_document", "embedding_types": ["float"]}
    assert request.headers["Authorization"] == "Bearer key"
    data = json.dumps({"id": "x", "embeddings": {"float": [[0.1, 0.2, 0.3, 0.4], [0.4, 0.3, 0.2, 0.1]]},
                       "response_type": "embeddings_by_type"}).encode()
    answer = parse_embeddings_response("bedrock", data, embeddings("a", "bb"), "bedrock/cohere", dimensions=4)
    assert [item["index"] for item in answer.client_body["data"]] == [0, 1]
    assert answer.usage_estimated

    with pytest.raises(CapabilityError) as raised:
        build_embeddings_request(PROVIDER, COHERE, embeddings("a", dimensions=2), "")
    assert raised.value.param == "dimensions"
    with pytest.raises(CapabilityError):
        build_embeddings_request(PROVIDER, COHERE, embeddings((1, 2)), "")
    with pytest.raises(MalformedResponse):
        parse_embeddings_response("bedrock", b'{"embeddings": [[1.0, NaN, 0, 0]]}', embeddings("a"), "m")

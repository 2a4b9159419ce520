"""Claude's signed thinking out to an OpenAI-format client and back: tool call ids, Responses encrypted_content,
the rebuilt turn, and thinking sent off when a final tool turn lost it."""

from __future__ import annotations

import base64
import json
import zlib
from typing import Any

from routing.providers import get_adapter
from routing.providers.anthropic.upstream_request import openai_to_anthropic
from routing.providers.bedrock.request import openai_to_bedrock
from routing.providers.bedrock.stream import BedrockEventDecoder
from routing.providers.common.thinking_ids import (
    MARK,
    ThinkingBlock,
    decode_payload,
    id_with_thinking,
    is_gateway_reasoning,
    split_id,
    split_payload,
)
from routing.providers.common.thinking_turns import thinking_turned_off
from routing.providers.responses_api.inbound_request import answer_items, parse_responses_request
from routing.providers.responses_api.request_to_chat import responses_to_chat
from routing.providers.responses_api.response_from_chat import chat_completion_to_response
from routing.providers.responses_api.upstream import native_payload
from routing.providers.streaming.sse import SSEEvent
from routing.providers.thinking_notes import thinking_off_for
from tests.providers.support import PROVIDERS, model, sse

SIGNED = ThinkingBlock("thinking", "The user wants the weather; I will call the tool.", "EqQBCgIYAhIk+/=")
REDACTED = ThinkingBlock("redacted_thinking", "EmwKAhgBEgy3va3pzix/LafPsn4a")
TOOLS = [{"type": "function", "function": {"name": "get_weather", "parameters": {"type": "object"}}}]
CLAUDE_ANSWER = {
    "id": "msg_01", "type": "message", "role": "assistant", "model": "claude-sonnet-4-5", "stop_reason": "tool_use",
    "content": [{"type": "redacted_thinking", "data": REDACTED.text},
                {"type": "thinking", "thinking": SIGNED.text, "signature": SIGNED.signature},
                {"type": "text", "text": "Checking."},
                {"type": "tool_use", "id": "toolu_01A", "name": "get_weather", "input": {"city": "Oslo"}},
                {"type": "tool_use", "id": "toolu_01B", "name": "get_weather", "input": {"city": "Rome"}}],
    "usage": {"input_tokens": 40, "output_tokens": 25},
}


def _completion(data: dict[str, Any] = CLAUDE_ANSWER) -> dict[str, Any]:
    parsed = get_adapter("anthropic").parse_response(status=200, data=json.dumps(data).encode(), inbound="openai",
                                                      public_model="pub", created=1)
    return parsed.client_body


def _next_turn(message: dict[str, Any], **extra: Any) -> dict[str, Any]:
    """The chat body of the turn after ``message``: the client's own message back, then each tool's answer."""
    calls = message.get("tool_calls") or []
    return {"model": "pub", "tools": TOOLS, "messages": [
        {"role": "user", "content": "Weather in Oslo and Rome?"},
        {key: value for key, value in message.items() if key != "reasoning_content"},
        *({"role": "tool", "tool_call_id": call["id"], "content": "18 C"} for call in calls)], **extra}


def test_it_folds_blocks_into_an_id_and_splits_them_out_unchanged() -> None:
    folded = id_with_thinking("toolu_01A", [REDACTED, SIGNED])
    assert folded.startswith("toolu_01A" + MARK)
    assert all(c.isalnum() or c in "_-" for c in folded)  # Anthropic's and the SDKs' id alphabet
    assert split_id(folded) == ("toolu_01A", (REDACTED, SIGNED))
    assert id_with_thinking("toolu_01A", []) == "toolu_01A"


def test_it_reads_an_id_it_did_not_fold_as_a_plain_id() -> None:
    for plain in ("toolu_01A", "tooluse_ab_th_cd", "call_x_th_", "_th_abc", "toolu_01A_th_!!"):
        assert split_id(plain) == (plain, ())
    # A payload naming another id is not this id's: the client changed the head.
    tail = id_with_thinking("toolu_01A", [SIGNED]).partition(MARK)[2]
    assert split_id("toolu_99Z" + MARK + tail) == ("toolu_99Z" + MARK + tail, ())


def test_it_refuses_a_payload_that_inflates_past_its_cap() -> None:
    raw = json.dumps({"id": "t", "b": [["thinking", "a" * (5 * 1024 * 1024), ""]]}).encode()
    bomb = base64.urlsafe_b64encode(zlib.compress(raw, 9)).decode().rstrip("=")
    assert decode_payload(bomb) is None


def test_it_carries_the_signed_blocks_in_the_id_of_the_call_they_preceded() -> None:
    message = _completion()["choices"][0]["message"]
    assert message["reasoning_content"] == SIGNED.text
    first, second = (call["id"] for call in message["tool_calls"])
    assert split_id(first)[1] == (REDACTED, SIGNED)
    assert split_id(second)[1] == ()


def test_it_rebuilds_the_thinking_in_front_of_tool_use_on_the_next_turn() -> None:
    message = _completion()["choices"][0]["message"]
    out = openai_to_anthropic(_next_turn(message, reasoning_effort="low"), model=model("anthropic"))
    assistant, results = out["messages"][1], out["messages"][2]
    assert [b["type"] for b in assistant["content"]] == ["redacted_thinking", "thinking", "text", "tool_use",
                                                         "tool_use"]
    assert assistant["content"][0] == {"type": "redacted_thinking", "data": REDACTED.text}
    assert assistant["content"][1] == {"type": "thinking", "thinking": SIGNED.text, "signature": SIGNED.signature}
    assert [b["id"] for b in assistant["content"][3:]] == ["toolu_01A", "toolu_01B"]  # the upstream's own ids
    assert [b["tool_use_id"] for b in results["content"]] == ["toolu_01A", "toolu_01B"]
    assert out["thinking"]["type"] == "enabled"


def test_it_sends_no_thinking_block_when_the_request_does_not_think() -> None:
    message = _completion()["choices"][0]["message"]
    out = openai_to_anthropic(_next_turn(message), model=model("anthropic"))
    assert [b["type"] for b in out["messages"][1]["content"]] == ["text", "tool_use", "tool_use"]
    assert "thinking" not in out


def test_it_turns_thinking_off_when_the_final_tool_turn_lost_it() -> None:
    message = _completion()["choices"][0]["message"]
    message["tool_calls"] = [{**call, "id": split_id(call["id"])[0]} for call in message["tool_calls"]]
    body = _next_turn(message, reasoning_effort="high")
    assert thinking_turned_off(body)
    out = openai_to_anthropic(body, model=model("anthropic"))
    assert out["thinking"] == {"type": "disabled"}
    assert [b["type"] for b in out["messages"][1]["content"]] == ["text", "tool_use", "tool_use"]
    kinds = {"anthropic": True, "vertex_anthropic": True, "openai": False, "gemini": False}
    for kind, expected in kinds.items():
        assert thinking_off_for(kind=kind, upstream="m", body=body, inbound="openai") is expected
    assert thinking_off_for(kind="bedrock", upstream="anthropic.claude-sonnet-4-5", body=body, inbound="openai")
    assert not thinking_off_for(kind="bedrock", upstream="amazon.nova-pro-v1:0", body=body, inbound="openai")


def test_it_keeps_thinking_on_when_the_final_turn_calls_no_tool() -> None:
    body = {"model": "pub", "reasoning_effort": "low", "messages": [
        {"role": "user", "content": "hi"}, {"role": "assistant", "content": "hello"},
        {"role": "user", "content": "and now?"}]}
    assert not thinking_turned_off(body)
    assert openai_to_anthropic(body, model=model("anthropic"))["thinking"]["type"] == "enabled"


def test_it_rebuilds_bedrock_reasoning_content_in_front_of_tool_use() -> None:
    answer = {"stopReason": "tool_use", "usage": {"inputTokens": 1, "outputTokens": 1}, "output": {"message": {
        "role": "assistant", "content": [
            {"reasoningContent": {"redactedContent": REDACTED.text}},
            {"reasoningContent": {"reasoningText": {"text": SIGNED.text, "signature": SIGNED.signature}}},
            {"text": "Checking."},
            {"toolUse": {"toolUseId": "toolu_01A", "name": "get_weather", "input": {"city": "Oslo"}}},
            {"toolUse": {"toolUseId": "toolu_01B", "name": "get_weather", "input": {"city": "Rome"}}}]}}}
    message = get_adapter("bedrock").parse_response(status=200, data=json.dumps(answer).encode(), inbound="openai",
                                                    public_model="pub", created=1).client_body["choices"][0]["message"]
    bedrock = model("anthropic", upstream="anthropic.claude-sonnet-4-5-v1:0")
    out = openai_to_bedrock(_next_turn(message, reasoning_effort="low"), model=bedrock)
    assistant, results = out["messages"][1]["content"], out["messages"][2]["content"]
    assert assistant[0] == {"reasoningContent": {"redactedContent": REDACTED.text}}
    assert assistant[1] == {"reasoningContent": {"reasoningText": {"text": SIGNED.text,
                                                                   "signature": SIGNED.signature}}}
    assert [b["toolUse"]["toolUseId"] for b in assistant[3:]] == ["toolu_01A", "toolu_01B"]
    assert [b["toolResult"]["toolUseId"] for b in results] == ["toolu_01A", "toolu_01B"]
    assert out["additionalModelRequestFields"]["thinking"]["type"] == "enabled"
    lost = _next_turn({**message, "tool_calls": [{**c, "id": split_id(c["id"])[0]} for c in message["tool_calls"]]},
                      reasoning_effort="low")
    assert "thinking" not in openai_to_bedrock(lost, model=bedrock).get("additionalModelRequestFields", {})


def test_it_reads_bedrock_reasoning_out_of_a_stream_into_the_next_call_id() -> None:
    decoder = BedrockEventDecoder(public_model="pub")
    events = [
        ("contentBlockDelta", {"contentBlockIndex": 0, "delta": {"reasoningContent": {"text": "I will "}}}),
        ("contentBlockDelta", {"contentBlockIndex": 0, "delta": {"reasoningContent": {"text": "call."}}}),
        ("contentBlockDelta", {"contentBlockIndex": 0, "delta": {"reasoningContent": {"signature": "c2ln"}}}),
        ("contentBlockDelta", {"contentBlockIndex": 1, "delta": {"reasoningContent": {"redactedContent": "cmVk"}}}),
        ("contentBlockStart", {"contentBlockIndex": 2, "start": {"toolUse": {"toolUseId": "tu_1", "name": "w"}}}),
    ]
    chunks = [chunk for kind, data in events
              for chunk in decoder.decode(SSEEvent(event=kind, data=json.dumps(data), raw=b""))]
    call_id = chunks[-1]["choices"][0]["delta"]["tool_calls"][0]["id"]
    assert split_id(call_id) == ("tu_1", (ThinkingBlock("thinking", "I will call.", "c2ln"),
                                          ThinkingBlock("redacted_thinking", "cmVk")))


def test_it_streams_the_signature_into_the_id_of_the_next_call() -> None:
    data = sse(
        {"type": "message_start", "message": {"id": "msg_1", "usage": {"input_tokens": 1}}},
        {"type": "content_block_start", "index": 0, "content_block": {"type": "thinking", "thinking": ""}},
        {"type": "content_block_delta", "index": 0, "delta": {"type": "thinking_delta", "thinking": "Think"}},
        {"type": "content_block_delta", "index": 0, "delta": {"type": "thinking_delta", "thinking": "ing."}},
        {"type": "content_block_delta", "index": 0, "delta": {"type": "signature_delta", "signature": "c2ln"}},
        {"type": "content_block_stop", "index": 0},
        {"type": "content_block_start", "index": 1, "content_block": {"type": "tool_use", "id": "toolu_9",
                                                                      "name": "get_weather", "input": {}}},
        {"type": "content_block_stop", "index": 1},
        {"type": "message_delta", "delta": {"stop_reason": "tool_use"}, "usage": {"output_tokens": 5}},
        {"type": "message_stop"}, named=True)
    translator = get_adapter("anthropic").stream_translator(inbound="openai", public_model="pub",
                                                            client_wants_usage=False, created=1)
    translator.feed(data)
    translator.finish()
    (call,) = translator.answer.tool_calls
    assert split_id(call.id)[1] == (ThinkingBlock("thinking", "Thinking.", "c2ln"),)


def test_it_gives_responses_the_thinking_as_encrypted_content_and_takes_it_back() -> None:
    request = parse_responses_request({"model": "pub", "input": "Weather?", "reasoning": {"effort": "low"},
                                       "tools": [{"type": "function", "name": "get_weather",
                                                  "parameters": {"type": "object"}}]})
    response = chat_completion_to_response(_completion(), request=request, response_id="resp_1", public_model="pub",
                                           created=1)
    kinds = [item["type"] for item in response["output"]]
    assert kinds == ["reasoning", "message", "function_call", "function_call"]
    reasoning = response["output"][0]
    assert reasoning["content"] == [{"type": "reasoning_text", "text": SIGNED.text}]
    assert decode_payload(reasoning["encrypted_content"])[1] == (REDACTED, SIGNED)  # type: ignore[index]
    calls = [item for item in response["output"] if item["type"] == "function_call"]
    base_ids = [split_id(c["id"])[0] for c in _completion()["choices"][0]["message"]["tool_calls"]]
    assert [c["call_id"] for c in calls] == base_ids  # no payload in the call id the client echoes

    turn = parse_responses_request({"model": "pub", "reasoning": {"effort": "low"}, "input": [
        {"role": "user", "content": "Weather?"}, *response["output"],
        *({"type": "function_call_output", "call_id": c["call_id"], "output": "18 C"} for c in calls)]})
    chat = responses_to_chat(turn, turn.items)
    out = openai_to_anthropic(chat, model=model("anthropic"))
    assistant = out["messages"][1]["content"]
    assert [b["type"] for b in assistant] == ["redacted_thinking", "thinking", "text", "tool_use", "tool_use"]
    assert [b["id"] for b in assistant[3:]] == ["toolu_01A", "toolu_01B"]
    assert [b["tool_use_id"] for b in out["messages"][2]["content"]] == ["toolu_01A", "toolu_01B"]


def test_a_stored_turn_keeps_the_thinking_and_an_openai_upstream_never_sees_it() -> None:
    parsed = get_adapter("anthropic").parse_response(status=200, data=json.dumps(CLAUDE_ANSWER).encode(),
                                                      inbound="openai", public_model="pub", created=1)
    items = answer_items(parsed.answer)
    assert [item["type"] for item in items] == ["reasoning", "message", "function_call", "function_call"]
    assert is_gateway_reasoning(items[0])
    assert items[0]["encrypted_content"] == split_payload(parsed.answer.tool_calls[0].id)[1]
    payload = native_payload({"model": "pub"}, upstream_model="gpt-5", conversation=items, stream=False)
    assert [item["type"] for item in payload["input"]] == ["message", "function_call", "function_call"]
    assert not is_gateway_reasoning({"type": "reasoning", "encrypted_content": "gAAAAABo-openai-own"})


def test_it_leaves_an_anthropic_clients_ids_as_the_upstream_issued_them() -> None:
    parsed = get_adapter("anthropic").parse_response(status=200, data=json.dumps(CLAUDE_ANSWER).encode(),
                                                      inbound="anthropic", public_model="pub", created=1)
    assert [c.id for c in parsed.answer.tool_calls] == ["toolu_01A", "toolu_01B"]
    assert parsed.client_body["content"] == CLAUDE_ANSWER["content"]
    assert PROVIDERS["anthropic"].kind == "anthropic"

"""A cached answer between its JSON body and a stream, in each client protocol: replayed frames assemble back to the
same body, the openai and anthropic SDKs read the replay as they read a live stream, and a stream that is not one
whole answer assembles to nothing."""

from __future__ import annotations

import json
from typing import Any

import anthropic
import httpx2
import openai
import pytest

from routing.providers.streaming.cached_answers import assemble_body, replay_frames

CHAT = {
    "id": "chatcmpl-1", "object": "chat.completion", "created": 1_700_000_000, "model": "normal",
    "choices": [
        {"index": 0, "message": {"role": "assistant", "content": "Two parts, é and 🙂.", "reasoning_content": "think"},
         "logprobs": None, "finish_reason": "stop"},
        {"index": 1, "message": {"role": "assistant", "content": None, "tool_calls": [
            {"id": "call_1", "type": "function", "function": {"name": "lookup", "arguments": "{\"city\":\"Oslo\"}"}},
            {"id": "call_2", "type": "function", "function": {"name": "time", "arguments": "{}"}}]},
         "logprobs": None, "finish_reason": "tool_calls"},
    ],
    "usage": {"prompt_tokens": 12, "completion_tokens": 7, "total_tokens": 19},
}
MESSAGE = {
    "id": "msg_1", "type": "message", "role": "assistant", "model": "claude",
    "content": [
        {"type": "thinking", "thinking": "let me see", "signature": "sig=="},
        {"type": "redacted_thinking", "data": "opaque"},
        {"type": "text", "text": "Here you are."},
        {"type": "tool_use", "id": "toolu_1", "name": "lookup", "input": {"city": "Oslo", "days": [1, 2]}},
    ],
    "stop_reason": "tool_use", "stop_sequence": None,
    "usage": {"input_tokens": 20, "output_tokens": 9, "cache_read_input_tokens": 0},
}
RESPONSE = {
    "id": "resp_1", "object": "response", "created_at": 1_700_000_000, "status": "completed", "model": "normal",
    "output": [
        {"type": "reasoning", "id": "rs_1", "summary": [], "content": [{"type": "reasoning_text", "text": "hm"}]},
        {"type": "message", "id": "msg_1", "role": "assistant", "status": "completed",
         "content": [{"type": "output_text", "text": "Hello there.", "annotations": []}]},
        {"type": "function_call", "id": "fc_1", "call_id": "call_1", "name": "lookup",
         "arguments": "{\"city\":\"Oslo\"}", "status": "completed"},
    ],
    "usage": {"input_tokens": 5, "output_tokens": 4, "total_tokens": 9},
}


@pytest.mark.parametrize(("protocol", "body"), [("openai", CHAT), ("anthropic", MESSAGE), ("responses", RESPONSE)])
def test_a_replayed_answer_assembles_back_to_its_body(protocol: Any, body: dict[str, Any]) -> None:
    frames = b"".join(replay_frames(protocol, body, include_usage=True))
    assert assemble_body(protocol, frames) == body


def test_an_openai_replay_sends_usage_only_when_asked_and_ends_with_done() -> None:
    without = b"".join(replay_frames("openai", CHAT, include_usage=False))
    assert b'"usage"' not in without
    assert without.endswith(b"data: [DONE]\n\n")
    assembled = assemble_body("openai", without, usage=CHAT["usage"])
    assert assembled == CHAT  # the usage the gateway counted stands in for the chunk the client did not ask for


def _sdk_transport(frames: bytes) -> httpx2.MockTransport:
    return httpx2.MockTransport(lambda request: httpx2.Response(200, content=frames,
                                                              headers={"content-type": "text/event-stream"}))


def test_the_openai_sdk_reads_a_replay_as_a_live_stream() -> None:
    frames = b"".join(replay_frames("openai", CHAT, include_usage=True))
    client = openai.OpenAI(api_key="k", base_url="http://cache.test/v1",
                           http_client=httpx2.Client(transport=_sdk_transport(frames)))
    texts: dict[int, str] = {}
    arguments: list[str] = []
    usage = None
    for chunk in client.chat.completions.create(model="normal", messages=[], stream=True):
        usage = chunk.usage or usage
        for choice in chunk.choices:
            texts[choice.index] = texts.get(choice.index, "") + (choice.delta.content or "")
            arguments += [call.function.arguments or "" for call in choice.delta.tool_calls or []]
    assert texts[0] == "Two parts, é and 🙂."
    assert arguments == ["{\"city\":\"Oslo\"}", "{}"]
    assert usage is not None
    assert usage.total_tokens == 19


def test_the_anthropic_sdk_reads_a_replay_as_a_live_stream() -> None:
    frames = b"".join(replay_frames("anthropic", MESSAGE, include_usage=True))
    client = anthropic.Anthropic(api_key="k", base_url="http://cache.test",
                                 http_client=httpx2.Client(transport=_sdk_transport(frames)))
    with client.messages.stream(model="claude", max_tokens=10, messages=[{"role": "user", "content": "x"}]) as stream:
        final = stream.get_final_message()
    assert final.model_dump(exclude_none=True)["content"] == MESSAGE["content"]
    assert final.stop_reason == "tool_use"
    assert final.usage.output_tokens == 9


def test_the_openai_sdk_reads_a_responses_replay() -> None:
    frames = b"".join(replay_frames("responses", RESPONSE, include_usage=True))
    client = openai.OpenAI(api_key="k", base_url="http://cache.test/v1",
                           http_client=httpx2.Client(transport=_sdk_transport(frames)))
    with client.responses.stream(model="normal", input="x") as stream:
        deltas = [event.delta for event in stream if event.type == "response.output_text.delta"]
        final = stream.get_final_response()
    assert deltas == ["Hello there."]
    assert final.output_text == "Hello there."
    numbers = [json.loads(line[6:])["sequence_number"] for line in frames.decode().splitlines()
               if line.startswith("data: ")]
    assert numbers == list(range(len(numbers)))


@pytest.mark.parametrize(("protocol", "body", "cut"), [
    ("openai", CHAT, b"data: [DONE]"),
    ("anthropic", MESSAGE, b"event: message_stop"),
    ("responses", RESPONSE, b"event: response.completed"),
])
def test_a_stream_without_its_end_assembles_to_nothing(protocol: Any, body: dict[str, Any], cut: bytes) -> None:
    frames = b"".join(replay_frames(protocol, body, include_usage=True))
    assert assemble_body(protocol, frames[:frames.index(cut)]) is None


def test_a_stream_that_failed_assembles_to_nothing() -> None:
    failed = (b'data: {"id":"c","choices":[{"index":0,"delta":{"content":"Hi"}}]}\n\n'
              b'data: {"error":{"message":"boom","type":"api_error"}}\n\n')
    assert assemble_body("openai", failed) is None
    anthropic_failed = b"".join(replay_frames("anthropic", MESSAGE, include_usage=True)).replace(
        b"event: message_stop", b'event: error\ndata: {"type":"error"}\n\nevent: message_stop')
    assert assemble_body("anthropic", anthropic_failed) is None
    assert assemble_body("responses", b"event: error\ndata: {\"type\":\"error\"}\n\n") is None
    assert assemble_body("openai", b"data: {not json\n\n") is None

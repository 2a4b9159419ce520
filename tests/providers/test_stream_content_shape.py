"""The cheap path for content deltas: it reads exactly what a full decode would, or leaves the event to it."""

from __future__ import annotations

import json
from typing import Any

import pytest

from routing.core.answer import Answer, ToolCall, Usage
from routing.providers import get_adapter
from routing.providers.anthropic.inbound_stream import AnthropicEventEncoder
from routing.providers.streaming.content_shape import ContentShape
from routing.providers.streaming.decoding import OpenAIChunkDecoder
from routing.providers.streaming.encoding import OpenAIFrameEncoder
from routing.providers.streaming.sse import SSEParser, event_frame
from tests.providers.support import feed_split, split_strategies

HEAD = {"id": "chatcmpl-1", "object": "chat.completion.chunk", "created": 1, "model": "up-model",
        "system_fingerprint": "fp_1"}


def chunk_event(delta: dict[str, Any], finish: str | None = None, **extra: Any) -> bytes:
    chunk = {**HEAD, "choices": [{"index": 0, "delta": delta, "logprobs": None, "finish_reason": finish}], **extra}
    return b"data: " + json.dumps(chunk, separators=(",", ":"), ensure_ascii=False).encode() + b"\n\n"


def content_event(text: str) -> bytes:
    return chunk_event({"content": text})


def compact_stream(texts: list[str]) -> bytes:
    usage = {**HEAD, "choices": [], "usage": {"prompt_tokens": 7, "completion_tokens": 5, "total_tokens": 12}}
    return (chunk_event({"role": "assistant", "content": ""}) + b"".join(content_event(t) for t in texts)
            + chunk_event({}, "stop") + b"data: " + json.dumps(usage, separators=(",", ":")).encode() + b"\n\n"
            + b"data: [DONE]\n\n")


TEXTS = ["Hel", "lo \"wörld\"", " \\ back", "slash\n", "", " \u2028 end"]


def learned() -> ContentShape:
    shape = ContentShape.learn(content_event("first"), b'"delta":{"content":', "first")
    assert shape is not None
    return shape


@pytest.mark.parametrize("text", TEXTS)
def test_it_reads_the_text_of_an_event_shaped_like_the_learned_one(text: str) -> None:
    assert learned().text_of(content_event(text)) == text


@pytest.mark.parametrize(
    "event",
    [
        chunk_event({"role": "assistant", "content": ""}),
        chunk_event({"content": "x"}, "stop"),
        chunk_event({"content": "x"}, usage={"prompt_tokens": 1}),
        chunk_event({"tool_calls": [{"index": 0, "function": {"arguments": "{}"}}]}),
        b'data: {"choices":[{"index":0,"delta":{"content":"a"}},{"index":1,"delta":{"content":"b"}}]}\n\n',
        b'data: {"choices":[{"index":1,"delta":{"content":"a"}}]}\n\n',
        b'data: {"choices": [{"index": 0, "delta": {"content": "spaced"}}]}\n\n',
    ],
)
def test_it_learns_no_shape_from_an_event_that_is_not_a_plain_content_delta(event: bytes) -> None:
    decoder = OpenAIChunkDecoder()
    decoder.decode(SSEParser().feed(event)[0])
    assert decoder.shape is None


def test_it_learns_the_shape_of_a_plain_content_delta() -> None:
    decoder = OpenAIChunkDecoder()
    decoder.decode(SSEParser().feed(content_event("first"))[0])
    assert decoder.content_text(content_event("second")) == "second"


@pytest.mark.parametrize(
    "event",
    [
        # The learned bytes around something that is not one JSON string: the full decode must see it.
        content_event("a").replace(b'"a"', b'"a","refusal":"no"'),
        content_event("a").replace(b'"a"', b'"a\x01"'),  # a raw control character: not JSON
        content_event("a").replace(b'"a"', b'"a\\q"'),  # an invalid escape
        content_event("a").replace(b'"a"', b'"\xff"'),  # not UTF-8
        content_event("a").replace(b'"a"', b"7"),
        content_event("a").replace(b"chatcmpl-1", b"chatcmpl-2"),
    ],
)
def test_it_leaves_any_other_event_to_the_full_decode(event: bytes) -> None:
    assert learned().text_of(event) is None


def test_it_keeps_a_tool_call_hidden_next_to_a_content_string() -> None:
    smuggled = content_event("").replace(
        b'"content":""', b'"content":"","tool_calls":[{"index":0,"id":"c1","function":{"name":"f","arguments":"{}"}}]')
    stream = compact_stream(["a", "b"]).replace(content_event("b"), smuggled)
    translator = get_adapter("openai").stream_translator(inbound="openai", public_model="pub",
                                                         client_wants_usage=True)
    feed_split(translator, stream, [])
    assert translator.answer.tool_calls == (ToolCall(id="c1", name="f", arguments="{}"),)


@pytest.mark.parametrize("wants_usage", [True, False])
def test_it_forwards_the_same_frames_and_reads_the_same_answer_on_the_cheap_path(wants_usage: bool) -> None:
    stream = compact_stream(TEXTS)
    for strategy, cuts in split_strategies(stream).items():
        translator = get_adapter("openai").stream_translator(inbound="openai", public_model="pub",
                                                             client_wants_usage=wants_usage)
        frames = feed_split(translator, stream, cuts)
        expected = [f + b"\n\n" for f in stream.split(b"\n\n") if f]
        if not wants_usage:
            expected = [f for f in expected if b'"usage"' not in f]
        # A run of content deltas in one read goes out as one piece: the bytes are what counts.
        assert b"".join(frames) == b"".join(expected).replace(b'"model":"up-model"', b'"model":"pub"'), strategy
        assert translator.answer == Answer(text="".join(TEXTS), finish_reason="stop")
        assert translator.usage == Usage(input_tokens=7, output_tokens=5)


def test_it_translates_the_cheap_path_to_the_same_anthropic_events() -> None:
    stream = compact_stream(TEXTS)
    adapter = get_adapter("openai")
    cheap = adapter.stream_translator(inbound="anthropic", public_model="pub", client_wants_usage=False, created=1)
    cheap_frames = feed_split(cheap, stream, [])
    # The same stream with spaces after the colons: no shape is learned, every event is decoded in full.
    spaced = stream.replace(b'":', b'": ')
    full = adapter.stream_translator(inbound="anthropic", public_model="pub", client_wants_usage=False, created=1)
    full_frames = feed_split(full, spaced, [])
    assert len(cheap_frames) == len(full_frames)
    for cheap_frame, full_frame in zip(cheap_frames[1:], full_frames[1:], strict=True):
        assert cheap_frame == full_frame  # message_start's generated id differs; everything after is equal
    assert cheap.answer == full.answer == Answer(text="".join(TEXTS), finish_reason="stop")


@pytest.mark.parametrize("text", TEXTS)
def test_it_splices_the_text_delta_frame_exactly_as_event_frame_writes_it(text: str) -> None:
    encoder = AnthropicEventEncoder(public_model="pub")
    encoder.encode({"id": "x", "choices": [{"index": 0, "delta": {"role": "assistant"}}]})
    frames = encoder.encode_text(text) if text else []
    expected = [] if not text else [
        event_frame("content_block_start", {"type": "content_block_start", "index": 0,
                                            "content_block": {"type": "text", "text": ""}}),
        event_frame("content_block_delta", {"type": "content_block_delta", "index": 0,
                                            "delta": {"type": "text_delta", "text": text}}),
    ]
    assert frames == expected


def anthropic_event(name: str, data: dict[str, Any]) -> bytes:
    return b"event: " + name.encode() + b"\ndata: " + json.dumps(data, separators=(",", ":"),
                                                                  ensure_ascii=False).encode() + b"\n\n"


def anthropic_stream(texts: list[str]) -> bytes:
    message = {"id": "msg_1", "type": "message", "role": "assistant", "model": "up-model", "content": [],
               "stop_reason": None, "usage": {"input_tokens": 7, "output_tokens": 1}}
    deltas = [anthropic_event("content_block_delta", {"type": "content_block_delta", "index": 0,
                                                      "delta": {"type": "text_delta", "text": text}})
              for text in texts]
    return b"".join([
        anthropic_event("message_start", {"type": "message_start", "message": message}),
        anthropic_event("content_block_start", {"type": "content_block_start", "index": 0,
                                                "content_block": {"type": "text", "text": ""}}),
        *deltas,
        anthropic_event("content_block_stop", {"type": "content_block_stop", "index": 0}),
        anthropic_event("message_delta", {"type": "message_delta", "delta": {"stop_reason": "end_turn"},
                                          "usage": {"output_tokens": 5}}),
        anthropic_event("message_stop", {"type": "message_stop"}),
    ])


def test_it_forwards_anthropic_text_deltas_byte_for_byte_and_reads_their_text() -> None:
    stream = anthropic_stream(TEXTS)
    for strategy, cuts in split_strategies(stream).items():
        translator = get_adapter("anthropic").stream_translator(inbound="anthropic", public_model="pub",
                                                                client_wants_usage=False)
        frames = feed_split(translator, stream, cuts)
        expected = [f + b"\n\n" for f in stream.split(b"\n\n") if f]
        assert frames == [f.replace(b'"model":"up-model"', b'"model":"pub"') for f in expected], strategy
        assert translator.answer == Answer(text="".join(TEXTS), finish_reason="stop")
        assert translator.usage == Usage(input_tokens=7, output_tokens=5)


def test_it_translates_anthropic_text_deltas_read_cheaply_to_the_same_openai_chunks() -> None:
    stream = anthropic_stream(TEXTS)
    adapter = get_adapter("anthropic")
    cheap = adapter.stream_translator(inbound="openai", public_model="pub", client_wants_usage=True, created=1)
    full = adapter.stream_translator(inbound="openai", public_model="pub", client_wants_usage=True, created=1)
    assert feed_split(cheap, stream, []) == feed_split(full, stream.replace(b'":', b'": '), [])
    assert cheap.answer == full.answer == Answer(text="".join(TEXTS), finish_reason="stop")


def test_it_keeps_anthropic_text_deltas_of_another_shape_on_the_full_decode() -> None:
    stream = anthropic_stream(["a", "b"]).replace(b'"text":"b"}', b'"text":"b","extra":{"type":"x"}}')
    translator = get_adapter("anthropic").stream_translator(inbound="openai", public_model="pub",
                                                            client_wants_usage=False, created=1)
    frames = feed_split(translator, stream, [])
    assert translator.answer.text == "ab"
    assert len(frames) == 5  # role, "a", "b", finish, [DONE]


@pytest.mark.parametrize(
    ("first", "second"),
    [
        ({"id": "a", "model": "m"}, {"id": "a", "model": "m"}),
        ({"id": "a", "model": "m"}, {"id": "b", "model": "m"}),  # another chunk: the frame is rebuilt
        ({"id": "a", "model": "\x00"}, {"id": "a", "model": "\x00"}),  # the marker elsewhere: no splice
    ],
)
def test_it_writes_openai_text_frames_exactly_as_encode_does(first: dict[str, Any], second: dict[str, Any]) -> None:
    encoder = OpenAIFrameEncoder(client_wants_usage=False)
    for members, text in ((first, "one"), (second, 'tw"o\u2028')):
        chunk = {**members, "object": "chat.completion.chunk",
                 "choices": [{"index": 0, "delta": {"content": text}, "finish_reason": None}]}
        assert encoder.encode_text(text, chunk) == encoder.encode(chunk)

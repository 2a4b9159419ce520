"""Runs of content deltas read in bulk: the same bytes to the client, the same answer, usage and verdicts as
reading each event on its own."""

from __future__ import annotations

import json
from typing import Any

import pytest

from routing.core.answer import Answer, ToolCall, Usage
from routing.providers import MalformedResponse, StreamTranslator, get_adapter
from routing.providers.streaming.content_shape import ContentShape
from routing.providers.streaming.sse import SSEParser
from tests.providers.support import feed_split, split_strategies

HEAD = {"id": "chatcmpl-1", "object": "chat.completion.chunk", "created": 1, "model": "up-model",
        "system_fingerprint": "fp_1"}
USAGE = {"prompt_tokens": 7, "completion_tokens": 5, "total_tokens": 12}


def chunk_event(delta: dict[str, Any], finish: str | None = None, head: dict[str, Any] = HEAD) -> bytes:
    chunk = {**head, "choices": [{"index": 0, "delta": delta, "logprobs": None, "finish_reason": finish}]}
    return b"data: " + json.dumps(chunk, separators=(",", ":"), ensure_ascii=False).encode() + b"\n\n"


def content_event(text: str) -> bytes:
    return chunk_event({"content": text})


def usage_event(usage: dict[str, Any] = USAGE) -> bytes:
    return b"data: " + json.dumps({**HEAD, "choices": [], "usage": usage}, separators=(",", ":")).encode() + b"\n\n"


def stream_of(*events: bytes) -> bytes:
    return chunk_event({"role": "assistant", "content": ""}) + b"".join(events) + b"data: [DONE]\n\n"


# Texts that look like what the bulk path searches for: the bytes between two events, a usage member, line ends.
TRICKY = ["Hel", 'lo "wörld"', '"usage":{"prompt_tokens":999,"completion_tokens":999}', "\n\ndata: [DONE]\n\n",
          '"},"logprobs":null,"finish_reason":null}]}\n\ndata: {"id":"chatcmpl-1"', "", "\\", "\U0001f600 \u2028",
          'data: {"error":{"type":"x"}}', "end"]


def translate(stream: bytes, cuts: list[int], *, inbound: str = "openai", wants_usage: bool = True,
              public_model: str = "pub") -> tuple[bytes, StreamTranslator]:
    translator = get_adapter("openai").stream_translator(inbound=inbound, public_model=public_model,
                                                         client_wants_usage=wants_usage, created=1)
    return b"".join(feed_split(translator, stream, cuts)), translator


def one_event_at_a_time(stream: bytes) -> list[int]:
    """Cuts after each event: the shape is learned from an earlier read and no run has more than one event."""
    ends, at = [], 0
    while (at := stream.find(b"\n\n", at) + 2) > 1:
        ends.append(at)
    return ends[:-1]


@pytest.mark.parametrize("wants_usage", [True, False])
def test_it_sends_the_bytes_and_reads_the_answer_and_usage_of_the_event_by_event_path(wants_usage: bool) -> None:
    stream = stream_of(*(content_event(t) for t in TRICKY), chunk_event({}, "stop"), usage_event())
    reference, _ = translate(stream, one_event_at_a_time(stream), wants_usage=wants_usage)
    for strategy, cuts in split_strategies(stream).items():
        sent, translator = translate(stream, cuts, wants_usage=wants_usage)
        assert sent == reference, strategy
        assert translator.answer == Answer(text="".join(TRICKY), finish_reason="stop"), strategy
        assert translator.usage == Usage(input_tokens=7, output_tokens=5), strategy
    expected = stream.replace(b'"model":"up-model"', b'"model":"pub"')
    assert reference == (expected if wants_usage else expected.replace(usage_event().replace(
        b'"model":"up-model"', b'"model":"pub"'), b""))


def test_it_sends_a_whole_read_of_content_deltas_as_one_piece() -> None:
    stream = stream_of(*(content_event(t) for t in ["a", "b", "c", "d"]), chunk_event({}, "stop"))
    translator = get_adapter("openai").stream_translator(inbound="openai", public_model="pub",
                                                         client_wants_usage=True)
    frames = translator.feed(stream)
    assert len(frames) == 5  # the role chunk, "a" (decoded in full, the shape is learned), "b" to "d", stop, [DONE]
    assert frames[2] == (content_event("b") + content_event("c") + content_event("d")).replace(b"up-model", b"pub")


def test_it_counts_usage_split_across_reads_and_ignores_usage_written_in_the_text() -> None:
    texts = ['{"usage":{"prompt_tokens":1000}}', '"usage":{"completion_tokens":1000}', "x"]
    stream = stream_of(*(content_event(t) for t in texts), chunk_event({}, "stop"), usage_event())
    middle_of_usage = stream.index(b'"usage":{"prompt_tokens":7') + 12
    for cuts in ([middle_of_usage], [stream.index(b'"usage"'), middle_of_usage, middle_of_usage + 3]):
        sent, translator = translate(stream, cuts)
        assert translator.usage == Usage(input_tokens=7, output_tokens=5)
        assert translator.answer.text == "".join(texts)
        assert sent == stream.replace(b'"model":"up-model"', b'"model":"pub"')


@pytest.mark.parametrize(
    "broken",
    [
        content_event("c").replace(b'"c"', b'"\xff"'),  # not UTF-8
        content_event("c").replace(b'"c"', b'"\x01"'),  # a raw control character
        content_event("c").replace(b'"c"', b'"c\\q"'),  # an invalid escape
        # An escaped closing quote: the literal would run on into the next event's.
        content_event("c").replace(b'"c"', b'"c\\"'),
        content_event("c").replace(b'"c"', b'"c","d"'),  # two strings where one was
    ],
)
def test_it_gives_an_event_that_breaks_a_run_the_verdict_of_the_event_by_event_path(broken: bytes) -> None:
    stream = stream_of(content_event("a"), content_event("b"), broken, content_event("d"), chunk_event({}, "stop"))
    outcomes = []
    for cuts in ([], one_event_at_a_time(stream)):
        translator = get_adapter("openai").stream_translator(inbound="openai", public_model="pub",
                                                             client_wants_usage=True)
        try:
            sent = b"".join(feed_split(translator, stream, cuts))
        except MalformedResponse as exc:
            outcomes.append(("malformed", str(exc)))
        else:
            outcomes.append((sent, translator.answer))
    assert outcomes[0] == outcomes[1]


def test_it_rewrites_the_model_member_after_the_text() -> None:
    def late_model(text: str) -> bytes:
        return content_event(text).replace(b'"model":"up-model",', b"").replace(
            b'"finish_reason":null}]}', b'"finish_reason":null}],"model":"up-model"}')

    stream = stream_of(*(late_model(t) for t in ["a", "b", "c"]), chunk_event({}, "stop"))
    sent, translator = translate(stream, [])
    assert sent.count(b'"model":"pub"') == 5
    assert b"up-model" not in sent
    assert translator.answer.text == "abc"


def test_it_forwards_a_run_untouched_when_the_upstream_uses_the_public_name() -> None:
    stream = stream_of(*(content_event(t) for t in TRICKY), chunk_event({}, "stop"))
    sent, translator = translate(stream, [], public_model="up-model")
    assert sent == stream
    assert translator.answer.text == "".join(TRICKY)


def test_it_keeps_tool_calls_and_comments_between_runs() -> None:
    call = chunk_event({"tool_calls": [{"index": 0, "id": "t1", "type": "function",
                                        "function": {"name": "f", "arguments": "{}"}}]})
    stream = stream_of(content_event("a"), content_event("b"), call, b": keep-alive\n\n", content_event("c"),
                       content_event("d"), chunk_event({}, "tool_calls"))
    sent, translator = translate(stream, [])
    assert sent == stream.replace(b": keep-alive\n\n", b"").replace(b"up-model", b"pub")
    assert translator.answer == Answer(text="abcd", finish_reason="tool_calls",
                                       tool_calls=(ToolCall(id="t1", name="f", arguments="{}"),))


def test_it_stops_a_run_at_an_error_event_and_forwards_nothing_after_it() -> None:
    error = b'data: {"error":{"type":"overloaded_error","message":"busy"}}\n\n'
    stream = stream_of(content_event("a"), content_event("b"), content_event("c"), error, content_event("d"))
    sent, translator = translate(stream, [])
    assert translator.failure is not None
    assert translator.failure.error_type == "overloaded_error"
    assert translator.answer.text == "abc"
    assert b'"d"' not in sent


def test_it_ignores_a_run_that_comes_in_a_read_after_an_error_event() -> None:
    error = b'data: {"error":{"type":"overloaded_error","message":"busy"}}\n\n'
    first = stream_of(content_event("a"), content_event("b")).replace(b"data: [DONE]\n\n", b"") + error
    later = content_event("c") + content_event("d") + content_event("e") + b"data: [DONE]\n\n"
    translator = get_adapter("openai").stream_translator(inbound="openai", public_model="pub",
                                                         client_wants_usage=True)
    sent = b"".join(translator.feed(first) + translator.feed(later) + translator.finish())
    assert translator.failure is not None
    assert translator.answer.text == "ab"
    assert b'"c"' not in sent
    assert b'"e"' not in sent


def test_it_translates_a_run_for_an_anthropic_client_as_each_event() -> None:
    stream = stream_of(*(content_event(t) for t in TRICKY), chunk_event({}, "stop"), usage_event())
    whole, translator = translate(stream, [], inbound="anthropic", wants_usage=False)
    by_event, _ = translate(stream, one_event_at_a_time(stream), inbound="anthropic", wants_usage=False)
    assert whole.split(b"\n", 2)[2] == by_event.split(b"\n", 2)[2]  # message_start's generated id differs
    assert translator.answer == Answer(text="".join(TRICKY), finish_reason="stop")


def test_the_parser_hands_a_run_over_and_goes_on_after_it() -> None:
    shape = ContentShape.learn(content_event("first"), b'"delta":{"content":', "first")
    assert shape is not None
    parser = SSEParser()
    events = parser.events(b": hi\n\n" + content_event("a") + content_event("b") + b"data: [DONE]\n\ndata: {")
    first = next(events)
    assert first.data is None
    assert parser.take_run(shape.read_run) == [b"a", b"b"]
    assert parser.take_run(shape.read_run) == []
    assert [e.data for e in events] == ["[DONE]"]
    assert [e.data for e in parser.feed(b"}\n\n")] == ["{}"]


def test_the_parser_hands_no_run_over_once_it_reads_line_by_line() -> None:
    shape = ContentShape.learn(content_event("first"), b'"delta":{"content":', "first")
    assert shape is not None
    parser = SSEParser()
    events = parser.events(b"data: x\r\n\r\n" + content_event("a"))
    assert parser.take_run(shape.read_run) == []
    assert [e.data for e in events] == ["x", content_event("a")[6:-2].decode()]


def test_a_run_is_cut_at_the_first_event_of_another_kind_even_with_the_same_tail_after_it() -> None:
    shape = ContentShape.learn(content_event("first"), b'"delta":{"content":', "first")
    assert shape is not None
    call = chunk_event({"tool_calls": [{"index": 0, "id": "t1", "function": {"name": "f", "arguments": "{}"}}]})
    assert call.endswith(shape.tail)  # the bulk split alone would take it for part of the run
    buf = bytearray(content_event("a") + content_event("b") + call + content_event("c") + content_event("d"))
    end, insides = shape.read_run(buf, 0)
    assert (end, insides) == (len(content_event("a") + content_event("b")), [b"a", b"b"])


def test_a_run_may_end_the_buffer_and_a_last_event_cut_short_is_left_for_the_next_read() -> None:
    shape = ContentShape.learn(content_event("first"), b'"delta":{"content":', "first")
    assert shape is not None
    whole = content_event("a") + content_event("b") + content_event("c")
    assert shape.read_run(bytearray(whole), 0) == (len(whole), [b"a", b"b", b"c"])
    cut = bytearray(whole + content_event("d")[:-3])
    assert shape.read_run(cut, 0) == (len(whole), [b"a", b"b", b"c"])
    assert shape.read_run(bytearray(content_event("a") + content_event("b")[:-1]), 0) == (0, [])

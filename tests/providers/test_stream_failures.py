"""Streams that go wrong: cut short, an error event mid-way, unreadable or impossible to translate."""

from __future__ import annotations

import re

import pytest

from routing.providers import MalformedResponse, StreamFailure, get_adapter
from tests.providers.support import (
    ANTHROPIC_STREAM,
    GEMINI_STREAM,
    OPENAI_TEXT_STREAM,
    anthropic_frames,
    feed_split,
    openai_frames,
    sse,
)

PAIRS = [(kind, inbound) for kind in ("openai", "azure_openai", "anthropic", "gemini")
         for inbound in ("openai", "anthropic")]
RECORDING = {"openai": OPENAI_TEXT_STREAM, "azure_openai": OPENAI_TEXT_STREAM, "anthropic": ANTHROPIC_STREAM,
             "gemini": GEMINI_STREAM}
# What marks a whole answer in each format: OpenAI's finish reason (some servers omit [DONE]),
# Anthropic's message_stop, Gemini's finishReason.
END_MARKER = {"openai": b'"finish_reason": "stop"', "azure_openai": b'"finish_reason": "stop"',
              "anthropic": b"message_stop", "gemini": b"finishReason"}


def event_boundary_after(data: bytes, position: int) -> int:
    """The offset just past the first blank line at or after ``position``."""
    match = re.compile(rb"\r\n\r\n|\n\n").search(data, position)
    assert match is not None
    return match.end()


@pytest.mark.parametrize(("kind", "inbound"), PAIRS)
def test_a_stream_cut_before_its_end_is_incomplete_and_gets_no_closing_frames(kind: str, inbound: str) -> None:
    data = RECORDING[kind]
    end = data.index(END_MARKER[kind])
    cut_at = max(data.rfind(b"\nevent:", 0, end), data.rfind(b"\ndata:", 0, end)) + 1  # the end never comes
    translator = get_adapter(kind).stream_translator(inbound=inbound, public_model="m",  # type: ignore[arg-type]
                                                     client_wants_usage=True)
    frames = feed_split(translator, data[:cut_at], [])
    assert not translator.complete
    assert frames  # what came before the cut was forwarded as it came
    assert b"[DONE]" not in b"".join(frames)
    assert b"message_stop" not in b"".join(frames)


def test_a_cut_anthropic_stream_still_reports_the_input_tokens_it_saw() -> None:
    translator = get_adapter("anthropic").stream_translator(inbound="openai", public_model="m",
                                                            client_wants_usage=True)
    translator.feed(ANTHROPIC_STREAM[: ANTHROPIC_STREAM.index(b"event: content_block_start")])
    assert translator.usage.input_tokens == 2125
    assert translator.usage.cached_input_tokens == 2000


@pytest.mark.parametrize(
    ("kind", "error_event"),
    [
        ("openai", sse({"error": {"message": "overloaded", "type": "server_error", "code": None}})),
        ("anthropic", sse({"type": "error", "error": {"type": "overloaded_error", "message": "Overloaded"}},
                          named=True)),
        ("gemini", sse({"error": {"code": 503, "message": "unavailable", "status": "UNAVAILABLE"}})),
    ],
)
@pytest.mark.parametrize("inbound", ["openai", "anthropic"])
def test_an_upstream_error_event_stops_the_stream_and_is_not_forwarded(
    kind: str, error_event: bytes, inbound: str
) -> None:
    data = RECORDING[kind]
    halfway = event_boundary_after(data, len(data) // 2)
    translator = get_adapter(kind).stream_translator(inbound=inbound, public_model="m",  # type: ignore[arg-type]
                                                     client_wants_usage=True)
    frames = feed_split(translator, data[:halfway] + error_event + data[halfway:], [])
    assert isinstance(translator.failure, StreamFailure)
    assert translator.failure.error_type in ("server_error", "overloaded_error", "UNAVAILABLE")
    assert not translator.complete
    text = b"".join(frames)
    assert b"error" not in text.replace(b"error_", b"")
    assert b"[DONE]" not in text
    assert b"message_stop" not in text


@pytest.mark.parametrize(("inbound", "kind"), [("openai", "anthropic"), ("anthropic", "openai")])
def test_error_frames_are_in_the_clients_format(inbound: str, kind: str) -> None:
    translator = get_adapter(kind).stream_translator(inbound=inbound, public_model="m",  # type: ignore[arg-type]
                                                     client_wants_usage=False)
    frames = translator.error_frames("api_error", "the upstream went away")
    if inbound == "openai":
        assert openai_frames(frames) == [
            {"error": {"message": "the upstream went away", "type": "api_error", "param": None, "code": None}}]
    else:
        assert anthropic_frames(frames) == [
            ("error", {"type": "error", "error": {"type": "api_error", "message": "the upstream went away"}})]


@pytest.mark.parametrize(("kind", "inbound"), PAIRS)
def test_an_event_that_is_not_json_is_a_malformed_response(kind: str, inbound: str) -> None:
    translator = get_adapter(kind).stream_translator(inbound=inbound, public_model="m",  # type: ignore[arg-type]
                                                     client_wants_usage=True)
    with pytest.raises(MalformedResponse):
        translator.feed(b"event: message_start\ndata: {not json\n\n")


def test_interleaved_parallel_tool_arguments_cannot_become_anthropic_blocks() -> None:
    def chunk(calls: list[dict[str, object]]) -> dict[str, object]:
        return {"id": "c", "choices": [{"index": 0, "delta": {"tool_calls": calls}, "finish_reason": None}]}

    data = sse(
        chunk([{"index": 0, "id": "a", "function": {"name": "f", "arguments": "{"}}]),
        chunk([{"index": 1, "id": "b", "function": {"name": "g", "arguments": "{"}}]),
        chunk([{"index": 0, "function": {"arguments": "}"}}]),
    )
    translator = get_adapter("openai").stream_translator(inbound="anthropic", public_model="m",
                                                         client_wants_usage=True)
    with pytest.raises(MalformedResponse):
        translator.feed(data)

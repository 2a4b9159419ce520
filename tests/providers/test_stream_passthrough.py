"""Same format in and out: original bytes forwarded, usage and answer still read on the way."""

from __future__ import annotations

import json

import pytest

from routing.core.answer import Answer, ToolCall, Usage
from routing.providers import get_adapter
from tests.providers.support import (
    ANTHROPIC_STREAM,
    OPENAI_TEXT_STREAM,
    OPENAI_TOOLS_STREAM,
    feed_split,
    openai_frames,
    split_strategies,
)

OPENAI_USAGE = Usage(input_tokens=1200, output_tokens=40, cached_input_tokens=1024, reasoning_tokens=16)


@pytest.mark.parametrize("kind", ["openai", "azure_openai"])
@pytest.mark.parametrize("wants_usage", [True, False])
def test_it_forwards_openai_events_and_drops_the_usage_chunk_nobody_asked_for(kind: str, wants_usage: bool) -> None:
    for strategy, cuts in split_strategies(OPENAI_TEXT_STREAM).items():
        translator = get_adapter(kind).stream_translator(
            inbound="openai", public_model="fast", client_wants_usage=wants_usage
        )
        frames = feed_split(translator, OPENAI_TEXT_STREAM, cuts)
        upstream = openai_frames([OPENAI_TEXT_STREAM])
        expected = [e for e in upstream if wants_usage or e == "[DONE]" or e["choices"]]
        for event in expected:
            if event != "[DONE]":
                event["model"] = "fast"
        assert openai_frames(frames) == expected, strategy
        assert translator.complete
        assert translator.usage == OPENAI_USAGE
        assert translator.answer == Answer(text="Hello wörld", finish_reason="stop")


def test_it_rewrites_only_the_model_member_and_keeps_the_rest_byte_for_byte() -> None:
    translator = get_adapter("openai").stream_translator(inbound="openai", public_model="fa\"st",
                                                         client_wants_usage=True)
    frames = feed_split(translator, OPENAI_TEXT_STREAM, [])
    original = [f + b"\n\n" for f in OPENAI_TEXT_STREAM.split(b"\n\n") if f]
    assert len(frames) == len(original)
    for sent, came in zip(frames, original, strict=True):
        assert sent == came.replace(b'"model": "gpt-4o-mini-2024-07-18"', b'"model":"fa\\"st"')


def test_it_accumulates_parallel_tool_call_arguments_across_deltas() -> None:
    translator = get_adapter("openai").stream_translator(inbound="openai", public_model="m", client_wants_usage=False)
    feed_split(translator, OPENAI_TOOLS_STREAM, split_strategies(OPENAI_TOOLS_STREAM)["every byte"])
    assert translator.answer == Answer(
        finish_reason="tool_calls",
        tool_calls=(
            ToolCall(id="call_A", name="get_weather", arguments='{"city": "Paris"}'),
            ToolCall(id="call_B", name="get_time", arguments='{"tz": "CET"}'),
        ),
    )


def test_it_sends_done_when_a_compatible_server_forgot_it() -> None:
    without_done = OPENAI_TEXT_STREAM.removesuffix(b"data: [DONE]\n\n")
    translator = get_adapter("openai").stream_translator(inbound="openai", public_model="m", client_wants_usage=False)
    frames = feed_split(translator, without_done, [])
    assert translator.complete
    assert frames[-1] == b"data: [DONE]\n\n"
    assert openai_frames(frames).count("[DONE]") == 1


def test_it_forwards_anthropic_events_untouched_but_the_model_name() -> None:
    for strategy, cuts in split_strategies(ANTHROPIC_STREAM).items():
        translator = get_adapter("anthropic").stream_translator(
            inbound="anthropic", public_model="smart", client_wants_usage=True
        )
        frames = feed_split(translator, ANTHROPIC_STREAM, cuts)
        expected = ANTHROPIC_STREAM.replace(b'"model": "claude-sonnet-4-5-20250929"', b'"model":"smart"')
        assert b"".join(frames) == expected, strategy
        assert translator.complete
        assert translator.usage == Usage(
            input_tokens=2125, output_tokens=89, cached_input_tokens=2000, cache_creation_tokens=100,
            reasoning_tokens=30,
        )
        answer = translator.answer
        assert answer.text == "Checking both."
        assert answer.reasoning_text == "Let me think"
        assert answer.finish_reason == "tool_calls"
        assert [(c.id, c.name, json.loads(c.arguments)) for c in answer.tool_calls] == [
            ("toolu_01A", "get_weather", {"city": "Paris"}),
            ("toolu_01B", "get_time", {"tz": "CET"}),
        ]


def test_the_first_frame_comes_with_the_first_event_not_at_the_end() -> None:
    translator = get_adapter("anthropic").stream_translator(inbound="anthropic", public_model="m",
                                                            client_wants_usage=True)
    first_event_end = ANTHROPIC_STREAM.index(b"\n\n") + 2
    assert translator.feed(ANTHROPIC_STREAM[: first_event_end - 1]) == []
    assert len(translator.feed(ANTHROPIC_STREAM[first_event_end - 1 : first_event_end])) == 1

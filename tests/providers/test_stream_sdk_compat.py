"""The frames the gateway writes, read by the real openai and anthropic SDKs (served by a mock transport,
no network): every translated stream must parse, accumulate and end the way the SDKs expect."""

from __future__ import annotations

import json
from collections.abc import Iterator
from contextlib import contextmanager

import anthropic
import httpx2
import openai
import pytest

from routing.providers import get_adapter
from routing.providers.common.ids import anthropic_tool_id
from tests.providers.support import (
    ANTHROPIC_STREAM,
    GEMINI_STREAM,
    OPENAI_REASONING_STREAM,
    OPENAI_TOOLS_STREAM,
    feed_split,
)

RECORDINGS = {
    "openai": OPENAI_TOOLS_STREAM,
    "azure_openai": OPENAI_REASONING_STREAM,
    "anthropic": ANTHROPIC_STREAM,
    "gemini": GEMINI_STREAM,
}


def serve(body: bytes) -> httpx2.Client:
    def handler(request: httpx2.Request) -> httpx2.Response:
        return httpx2.Response(200, headers={"content-type": "text/event-stream"}, content=body)

    return httpx2.Client(transport=httpx2.MockTransport(handler))


@contextmanager
def openai_client(body: bytes) -> Iterator[openai.OpenAI]:
    with serve(body) as http, openai.OpenAI(api_key="k", base_url="http://gw.test/v1", http_client=http) as client:
        yield client


@contextmanager
def anthropic_client(body: bytes) -> Iterator[anthropic.Anthropic]:
    with serve(body) as http, anthropic.Anthropic(api_key="k", base_url="http://gw.test", http_client=http) as client:
        yield client


def client_stream(kind: str, inbound: str, wants_usage: bool = True) -> tuple[bytes, object]:
    translator = get_adapter(kind).stream_translator(inbound=inbound, public_model="pub",  # type: ignore[arg-type]
                                                     client_wants_usage=wants_usage)
    frames = feed_split(translator, RECORDINGS[kind], [7, 100, 101, 555])
    return b"".join(frames), translator


@pytest.mark.parametrize("kind", list(RECORDINGS))
def test_the_openai_sdk_reads_the_stream_from_every_provider(kind: str) -> None:
    body, translator = client_stream(kind, "openai")
    answer = translator.answer  # type: ignore[attr-defined]
    with openai_client(body) as client:
        stream = client.chat.completions.create(
            model="pub", messages=[{"role": "user", "content": "hi"}], stream=True,
            stream_options={"include_usage": True},
        )
        text, calls, finish, usage = "", {}, None, None
        for chunk in stream:
            assert chunk.model == "pub"
            usage = chunk.usage or usage
            for choice in chunk.choices:
                text += choice.delta.content or ""
                finish = choice.finish_reason or finish
                for call in choice.delta.tool_calls or ():
                    entry = calls.setdefault(call.index, {"id": call.id, "name": "", "arguments": ""})
                    entry["name"] += (call.function.name or "") if call.function else ""
                    entry["arguments"] += (call.function.arguments or "") if call.function else ""
    assert text == answer.text
    assert finish == {"tool_calls": "tool_calls", "length": "length"}[answer.finish_reason]
    assert [(c["id"], c["name"], c["arguments"]) for c in calls.values()] == [
        (c.id, c.name, c.arguments) for c in answer.tool_calls]
    assert usage is not None
    assert usage.prompt_tokens == translator.usage.input_tokens  # type: ignore[attr-defined]
    assert usage.prompt_tokens_details.cached_tokens == translator.usage.cached_input_tokens  # type: ignore[attr-defined]


@pytest.mark.parametrize("kind", list(RECORDINGS))
def test_the_anthropic_sdk_accumulates_the_stream_from_every_provider(kind: str) -> None:
    body, translator = client_stream(kind, "anthropic")
    answer, usage = translator.answer, translator.usage  # type: ignore[attr-defined]
    with anthropic_client(body) as client, \
            client.messages.stream(model="pub", max_tokens=100, messages=[{"role": "user", "content": "hi"}]) as s:
        message = s.get_final_message()
    assert message.model == "pub"
    texts = "".join(b.text for b in message.content if b.type == "text")
    thinking = "".join(b.thinking for b in message.content if b.type == "thinking")
    tools = [(b.id, b.name, b.input) for b in message.content if b.type == "tool_use"]
    assert (texts, thinking) == (answer.text, answer.reasoning_text)
    # The client's ids are in its own shape (toolu_), mapping back to the provider's (routing.providers.common.ids);
    # Anthropic's own pass through.
    shaped = (lambda i: i) if kind == "anthropic" else anthropic_tool_id
    assert tools == [(shaped(c.id), c.name, json.loads(c.arguments)) for c in answer.tool_calls]
    assert message.stop_reason == {"tool_calls": "tool_use", "length": "max_tokens"}[answer.finish_reason]
    total_input = (message.usage.input_tokens + (message.usage.cache_read_input_tokens or 0)
                   + (message.usage.cache_creation_input_tokens or 0))
    assert total_input == usage.input_tokens
    assert message.usage.cache_read_input_tokens == usage.cached_input_tokens
    assert message.usage.output_tokens == usage.output_tokens


def test_the_openai_sdk_raises_on_the_error_frames() -> None:
    translator = get_adapter("anthropic").stream_translator(inbound="openai", public_model="pub",
                                                            client_wants_usage=False)
    cut = ANTHROPIC_STREAM.index(b"event: content_block_stop")
    body = b"".join(translator.feed(ANTHROPIC_STREAM[:cut]) + translator.error_frames("api_error", "upstream died"))
    with openai_client(body) as client:
        stream = client.chat.completions.create(model="pub", messages=[{"role": "user", "content": "hi"}],
                                                stream=True)
        with pytest.raises(openai.APIError) as raised:
            for _ in stream:
                pass
    assert raised.value.message == "upstream died"


def test_the_anthropic_sdk_raises_on_the_error_frames() -> None:
    translator = get_adapter("gemini").stream_translator(inbound="anthropic", public_model="pub",
                                                         client_wants_usage=True)
    cut = GEMINI_STREAM.index(b"\r\n\r\n") + 4
    body = b"".join(translator.feed(GEMINI_STREAM[:cut]) + translator.error_frames("overloaded_error", "busy"))
    with anthropic_client(body) as client, pytest.raises(anthropic.APIStatusError) as raised, \
            client.messages.stream(model="pub", max_tokens=10, messages=[{"role": "user", "content": "x"}]) as s:
        s.get_final_message()
    assert raised.value.body == {"type": "error", "error": {"type": "overloaded_error", "message": "busy"}}

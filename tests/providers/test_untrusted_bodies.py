"""Whatever a client sends, an adapter either builds a request or raises TranslationError (a 400):
never KeyError, TypeError or AttributeError, which would become a 500. Seeded random mutations of
valid bodies, through every adapter and both client shapes."""

from __future__ import annotations

import copy
import json
import random
from typing import Any

import pytest

from routing.providers import MalformedResponse, TranslationError, get_adapter
from tests.providers.support import PROVIDERS, model

OPENAI_BODY: dict[str, Any] = {
    "model": "pub", "max_tokens": 100, "temperature": 0.5, "stop": ["x"], "reasoning_effort": "low",
    "response_format": {"type": "json_schema", "json_schema": {"name": "r", "schema": {"type": "object"}}},
    "tools": [{"type": "function", "function": {"name": "f", "parameters": {"type": "object"}}}],
    "tool_choice": "auto", "parallel_tool_calls": False,
    "messages": [
        {"role": "system", "content": "s"},
        {"role": "user", "content": [{"type": "text", "text": "t"},
                                     {"type": "image_url", "image_url": {"url": "data:image/png;base64,AA"}},
                                     {"type": "file", "file": {"file_data": "data:application/pdf;base64,AA"}}]},
        {"role": "assistant", "content": None, "tool_calls": [
            {"id": "c1", "type": "function", "function": {"name": "f", "arguments": '{"a": 1}'}}]},
        {"role": "tool", "tool_call_id": "c1", "content": "r"},
    ],
}
ANTHROPIC_BODY: dict[str, Any] = {
    "model": "pub", "max_tokens": 100, "system": [{"type": "text", "text": "s"}], "stop_sequences": ["x"],
    "thinking": {"type": "enabled", "budget_tokens": 2000}, "metadata": {"user_id": "u"},
    "output_config": {"format": {"type": "json_schema", "schema": {"type": "object"}}},
    "tools": [{"name": "f", "input_schema": {"type": "object"}}], "tool_choice": {"type": "auto"},
    "messages": [
        {"role": "user", "content": [{"type": "text", "text": "t"},
                                     {"type": "image", "source": {"type": "base64", "media_type": "image/png",
                                                                  "data": "AA"}},
                                     {"type": "document", "source": {"type": "base64",
                                                                     "media_type": "application/pdf", "data": "AA"}}]},
        {"role": "assistant", "content": [{"type": "tool_use", "id": "c1", "name": "f", "input": {"a": 1}}]},
        {"role": "user", "content": [{"type": "tool_result", "tool_use_id": "c1", "content": [
            {"type": "text", "text": "r"}]}]},
    ],
}
WRONG_VALUES: list[Any] = [None, 0, -1, 1.5, True, "", "x", [], [1], {}, {"type": 3}, [None], {"a": None}]


def paths(value: Any, prefix: tuple[Any, ...] = ()) -> list[tuple[Any, ...]]:
    found = [prefix] if prefix else []
    if isinstance(value, dict):
        for key, inner in value.items():
            found += paths(inner, (*prefix, key))
    elif isinstance(value, list):
        for index, inner in enumerate(value):
            found += paths(inner, (*prefix, index))
    return found


def mutated(body: dict[str, Any], rng: random.Random) -> dict[str, Any]:
    out = copy.deepcopy(body)
    for _ in range(rng.randint(1, 3)):
        path = rng.choice(paths(out))
        target = out
        for step in path[:-1]:
            target = target[step]
        if isinstance(target, dict) and rng.random() < 0.2:
            target.pop(path[-1], None)
        else:
            target[path[-1]] = copy.deepcopy(rng.choice(WRONG_VALUES))
        if not paths(out):
            break
    return out


@pytest.mark.parametrize("kind", ["openai", "azure_openai", "anthropic", "gemini"])
@pytest.mark.parametrize("inbound", ["openai", "anthropic"])
def test_it_never_fails_with_anything_but_a_translation_error(kind: str, inbound: str) -> None:
    rng = random.Random(f"{kind}-{inbound}")
    base = OPENAI_BODY if inbound == "openai" else ANTHROPIC_BODY
    adapter = get_adapter(kind)
    refused = built = 0
    for _ in range(400):
        body = mutated(base, rng)
        try:
            adapter.build_request(provider=PROVIDERS[kind], model=model(kind), body=body,
                                  inbound=inbound, stream=rng.random() < 0.5, api_key="k")  # type: ignore[arg-type]
            built += 1
        except TranslationError as error:  # a fuzz loop: each mutation either translates or is refused
            assert error.status == 400  # noqa: PT017
            assert error.message  # noqa: PT017
            refused += 1
    assert built  # mutations that still translate: the test can see a crash on the way to success
    pass_through = inbound == "anthropic" if kind == "anthropic" else inbound == "openai" and kind != "gemini"
    assert refused or pass_through  # a pass-through only checks capabilities; the upstream judges the rest


UPSTREAM_ANSWERS: dict[str, dict[str, Any]] = {
    "openai": {"id": "c", "choices": [{"index": 0, "finish_reason": "tool_calls", "message": {
        "role": "assistant", "content": "t", "reasoning_content": "r", "refusal": None, "tool_calls": [
            {"id": "c1", "type": "function", "function": {"name": "f", "arguments": '{"a": 1}'}}]}}],
        "usage": {"prompt_tokens": 5, "completion_tokens": 2, "prompt_tokens_details": {"cached_tokens": 1}}},
    "anthropic": {"id": "m", "type": "message", "role": "assistant", "stop_reason": "tool_use", "content": [
        {"type": "thinking", "thinking": "r"}, {"type": "text", "text": "t"},
        {"type": "tool_use", "id": "c1", "name": "f", "input": {"a": 1}}],
        "usage": {"input_tokens": 5, "output_tokens": 2, "cache_read_input_tokens": 1}},
    "gemini": {"responseId": "g", "candidates": [{"index": 0, "finishReason": "STOP", "content": {"parts": [
        {"text": "r", "thought": True}, {"text": "t"},
        {"functionCall": {"name": "f", "args": {"a": 1}}, "thoughtSignature": "c2ln"}]}}],
        "usageMetadata": {"promptTokenCount": 5, "candidatesTokenCount": 2}},
}


@pytest.mark.parametrize("kind", ["openai", "anthropic", "gemini"])
@pytest.mark.parametrize("inbound", ["openai", "anthropic"])
def test_an_odd_upstream_answer_is_read_or_malformed_never_a_crash(kind: str, inbound: str) -> None:
    rng = random.Random(f"answer-{kind}-{inbound}")
    adapter = get_adapter(kind)
    outcomes = {"read": 0, "malformed": 0}
    for _ in range(400):
        answer = mutated(UPSTREAM_ANSWERS[kind], rng)
        data = json.dumps(answer).encode()
        try:
            adapter.parse_response(status=200, data=data, inbound=inbound, public_model="p")  # type: ignore[arg-type]
            outcomes["read"] += 1
        except MalformedResponse:
            outcomes["malformed"] += 1
        translator = adapter.stream_translator(inbound=inbound, public_model="p",  # type: ignore[arg-type]
                                               client_wants_usage=True)
        event = {"type": "content_block_delta", **answer} if kind == "anthropic" else answer
        try:
            translator.feed(b"data: " + json.dumps(event).encode() + b"\n\n")
            translator.finish()
            translator.answer  # noqa: B018 - reading it must not fail either
        except MalformedResponse:
            pass
    assert outcomes["read"]
    assert outcomes["malformed"]

"""Shared test material: model and provider specs, provider stream recordings, frame readers."""

from __future__ import annotations

import json
import random
from typing import Any

from routing.core.table import CAPABILITIES, ModelSpec, ProviderSpec
from routing.providers import StreamTranslator

ALL = frozenset(CAPABILITIES)

PROVIDERS = {
    "openai": ProviderSpec(name="oa", kind="openai", base_url="http://127.0.0.1:18001/v1/"),
    "azure_openai": ProviderSpec(name="az", kind="azure_openai", base_url="https://res.openai.azure.com",
                                 api_version="2025-01-01-preview"),
    "anthropic": ProviderSpec(name="an", kind="anthropic", base_url="http://127.0.0.1:18002"),
    "gemini": ProviderSpec(name="ge", kind="gemini", base_url="https://generativelanguage.googleapis.com"),
}
UPSTREAM = {"openai": "gpt-4o-mini", "azure_openai": "my-deployment", "anthropic": "claude-sonnet-4-5",
            "gemini": "gemini-2.5-flash"}


def model(kind: str = "openai", capabilities: frozenset[str] = ALL, max_output_tokens: int | None = None,
          upstream: str | None = None) -> ModelSpec:
    return ModelSpec(
        name=f"{kind}/public", provider=PROVIDERS[kind].name, upstream=upstream or UPSTREAM[kind],
        capabilities=capabilities, max_output_tokens=max_output_tokens,
    )


def sse(*events: dict[str, Any] | str, named: bool = False, crlf: bool = False) -> bytes:
    """Upstream SSE bytes as providers send them (OpenAI and Gemini unnamed, Anthropic named)."""
    end = "\r\n" if crlf else "\n"
    out = []
    for event in events:
        if isinstance(event, str):
            out.append(f"data: {event}{end}{end}")
        elif named:
            out.append(f"event: {event['type']}{end}data: {json.dumps(event)}{end}{end}")
        else:
            out.append(f"data: {json.dumps(event)}{end}{end}")
    return "".join(out).encode()


def _oa(delta: dict[str, Any] | None = None, finish: str | None = None, usage: dict[str, Any] | None = None,
        choices: bool = True) -> dict[str, Any]:
    return {
        "id": "chatcmpl-abc", "object": "chat.completion.chunk", "created": 1700000000,
        "model": "gpt-4o-mini-2024-07-18", "system_fingerprint": "fp_1",
        "choices": [{"index": 0, "delta": delta or {}, "logprobs": None, "finish_reason": finish}] if choices else [],
        "usage": usage,
    }


OPENAI_USAGE = {
    "prompt_tokens": 1200, "completion_tokens": 40, "total_tokens": 1240,
    "prompt_tokens_details": {"cached_tokens": 1024, "audio_tokens": 0},
    "completion_tokens_details": {"reasoning_tokens": 16, "audio_tokens": 0},
}

OPENAI_TEXT_STREAM = sse(
    _oa({"role": "assistant", "content": "", "refusal": None}),
    _oa({"content": "Hello"}),
    _oa({"content": " wörld"}),
    _oa(finish="stop"),
    _oa(usage=OPENAI_USAGE, choices=False),
    "[DONE]",
)

OPENAI_TOOLS_STREAM = sse(
    _oa({"role": "assistant", "content": None, "tool_calls": [
        {"index": 0, "id": "call_A", "type": "function", "function": {"name": "get_weather", "arguments": ""}}]}),
    _oa({"tool_calls": [{"index": 0, "function": {"arguments": '{"ci'}}]}),
    _oa({"tool_calls": [{"index": 0, "function": {"arguments": 'ty": "Paris"}'}}]}),
    _oa({"tool_calls": [
        {"index": 1, "id": "call_B", "type": "function", "function": {"name": "get_time", "arguments": ""}}]}),
    _oa({"tool_calls": [{"index": 1, "function": {"arguments": '{"tz": "CET"}'}}]}),
    _oa(finish="tool_calls"),
    _oa(usage=OPENAI_USAGE, choices=False),
    "[DONE]",
)

OPENAI_REASONING_STREAM = sse(
    _oa({"role": "assistant", "content": ""}),
    _oa({"reasoning_content": "Let me think."}),
    _oa({"content": "42"}),
    _oa(finish="length"),
    _oa(usage=OPENAI_USAGE, choices=False),
    "[DONE]",
)

ANTHROPIC_STREAM = sse(
    {"type": "message_start", "message": {
        "id": "msg_01X", "type": "message", "role": "assistant", "model": "claude-sonnet-4-5-20250929",
        "content": [], "stop_reason": None, "stop_sequence": None,
        "usage": {"input_tokens": 25, "cache_creation_input_tokens": 100, "cache_read_input_tokens": 2000,
                  "output_tokens": 1}}},
    {"type": "content_block_start", "index": 0, "content_block": {"type": "thinking", "thinking": "",
                                                                  "signature": ""}},
    {"type": "ping"},
    {"type": "content_block_delta", "index": 0, "delta": {"type": "thinking_delta", "thinking": "Let me think"}},
    {"type": "content_block_delta", "index": 0, "delta": {"type": "signature_delta", "signature": "EqQBCgIYAh"}},
    {"type": "content_block_stop", "index": 0},
    {"type": "content_block_start", "index": 1, "content_block": {"type": "text", "text": ""}},
    {"type": "content_block_delta", "index": 1, "delta": {"type": "text_delta", "text": "Checking "}},
    {"type": "content_block_delta", "index": 1, "delta": {"type": "text_delta", "text": "both."}},
    {"type": "content_block_stop", "index": 1},
    {"type": "content_block_start", "index": 2, "content_block": {"type": "tool_use", "id": "toolu_01A",
                                                                  "name": "get_weather", "input": {}}},
    {"type": "content_block_delta", "index": 2, "delta": {"type": "input_json_delta", "partial_json": ""}},
    {"type": "content_block_delta", "index": 2, "delta": {"type": "input_json_delta",
                                                          "partial_json": '{"city": "Pa'}},
    {"type": "content_block_delta", "index": 2, "delta": {"type": "input_json_delta", "partial_json": 'ris"}'}},
    {"type": "content_block_stop", "index": 2},
    {"type": "content_block_start", "index": 3, "content_block": {"type": "tool_use", "id": "toolu_01B",
                                                                  "name": "get_time", "input": {}}},
    {"type": "content_block_delta", "index": 3, "delta": {"type": "input_json_delta",
                                                          "partial_json": '{"tz": "CET"}'}},
    {"type": "content_block_stop", "index": 3},
    {"type": "message_delta", "delta": {"stop_reason": "tool_use", "stop_sequence": None},
     "usage": {"output_tokens": 89, "output_tokens_details": {"thinking_tokens": 30}}},
    {"type": "message_stop"},
    named=True,
)

GEMINI_USAGE = {"promptTokenCount": 50, "candidatesTokenCount": 20, "thoughtsTokenCount": 30,
                "cachedContentTokenCount": 32, "totalTokenCount": 100}
GEMINI_SIGNATURE = "c2lnbmF0dXJlKy8/AB+="

GEMINI_STREAM = sse(
    {"candidates": [{"content": {"parts": [{"text": "Thinking about it", "thought": True}], "role": "model"},
                     "index": 0}],
     "usageMetadata": {"promptTokenCount": 50, "totalTokenCount": 50}, "modelVersion": "gemini-2.5-flash",
     "responseId": "resp-1"},
    {"candidates": [{"content": {"parts": [{"text": "Checking both."}], "role": "model"}, "index": 0}],
     "usageMetadata": {"promptTokenCount": 50, "totalTokenCount": 60}, "responseId": "resp-1"},
    {"candidates": [{"content": {"parts": [
        {"functionCall": {"name": "get_weather", "args": {"city": "Paris"}}, "thoughtSignature": GEMINI_SIGNATURE},
        {"functionCall": {"name": "get_time", "args": {"tz": "CET"}}}], "role": "model"},
        "finishReason": "STOP", "index": 0}],
     "usageMetadata": GEMINI_USAGE, "responseId": "resp-1"},
    crlf=True,
)


def feed_split(translator: StreamTranslator, data: bytes, cuts: list[int]) -> list[bytes]:
    """Feed ``data`` cut at ``cuts``, then finish; the client frames in order."""
    frames: list[bytes] = []
    start = 0
    for cut in [*cuts, len(data)]:
        frames += translator.feed(data[start:cut])
        start = cut
    return frames + translator.finish()


def split_strategies(data: bytes, seed: int = 11) -> dict[str, list[int]]:
    rng = random.Random(seed)
    return {
        "whole": [],
        "every byte": list(range(1, len(data))),
        "random": sorted(rng.sample(range(1, len(data)), min(40, len(data) - 1))),
        "mid line ending": [i + 1 for i in range(len(data) - 1) if data[i : i + 1] in (b"\r", b"\n")],
    }


def openai_frames(frames: list[bytes]) -> list[Any]:
    """The payloads of OpenAI frames: dicts, or the string "[DONE]"."""
    out: list[Any] = []
    for frame in b"".join(frames).split(b"\n\n"):
        if not frame:
            continue
        assert frame.startswith(b"data: "), frame
        payload = frame[6:].decode()
        out.append(payload if payload == "[DONE]" else json.loads(payload))
    return out


def anthropic_frames(frames: list[bytes]) -> list[tuple[str, dict[str, Any]]]:
    """(event name, payload) of Anthropic frames; checks the name matches the payload type."""
    out = []
    for frame in b"".join(frames).split(b"\n\n"):
        if not frame:
            continue
        event_line, data_line = frame.decode().split("\n")
        name = event_line.removeprefix("event: ")
        payload = json.loads(data_line.removeprefix("data: "))
        assert payload["type"] == name
        out.append((name, payload))
    return out

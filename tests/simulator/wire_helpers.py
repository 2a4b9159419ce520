"""Request builders and response parsers shared by the simulator's tests (plain httpx2, no SDK)."""

from __future__ import annotations

import json
import re
from typing import Any

ANTHROPIC_HEADERS = {"x-api-key": "sk-ant-test", "anthropic-version": "2023-06-01"}
GEMINI_HEADERS = {"x-goog-api-key": "gemini-test-key"}
AZURE_HEADERS = {"api-key": "azure-test-key"}
AZURE_PATH = "/openai/deployments/{deployment}/chat/completions?api-version=2024-10-21"

WEATHER_TOOL_SCHEMA = {
    "type": "object",
    "properties": {
        "city": {"type": "string", "minLength": 2},
        "unit": {"type": "string", "enum": ["celsius", "fahrenheit"]},
        "days": {"type": "integer", "minimum": 1, "maximum": 7},
    },
    "required": ["city", "unit", "days"],
    "additionalProperties": False,
}


def openai_body(text: str = "Hello there", model: str = "gpt-test", **extra: Any) -> dict[str, Any]:
    return {"model": model, "messages": [{"role": "user", "content": text}], **extra}


def anthropic_body(text: str = "Hello there", model: str = "claude-test", **extra: Any) -> dict[str, Any]:
    return {"model": model, "max_tokens": 256, "messages": [{"role": "user", "content": text}], **extra}


def gemini_body(text: str = "Hello there", **extra: Any) -> dict[str, Any]:
    return {"contents": [{"role": "user", "parts": [{"text": text}]}], **extra}


def gemini_path(model: str = "gemini-test", stream: bool = False, sse: bool = True) -> str:
    if not stream:
        return f"/v1beta/models/{model}:generateContent"
    return f"/v1beta/models/{model}:streamGenerateContent" + ("?alt=sse" if sse else "")


def sse_events(text: str) -> list[tuple[str | None, str]]:
    """(event name, data) pairs of an SSE body, whatever its line endings."""
    events = []
    for block in re.split(r"\r\n\r\n|\n\n", text):
        if not block.strip():
            continue
        name = None
        data = []
        for line in block.splitlines():
            if line.startswith("event:"):
                name = line[len("event:"):].strip()
            elif line.startswith("data:"):
                data.append(line[len("data:"):].strip())
        events.append((name, "\n".join(data)))
    return events


def sse_json(text: str) -> list[Any]:
    """The JSON payloads of an SSE body, skipping OpenAI's ``[DONE]`` marker."""
    return [json.loads(data) for _, data in sse_events(text) if data and data != "[DONE]"]


def openai_stream_text(chunks: list[dict[str, Any]]) -> str:
    return "".join(c["choices"][0]["delta"].get("content") or "" for c in chunks if c.get("choices"))


WIRES = ("openai", "azure", "anthropic", "gemini")


def request_for(wire: str, model: str, *, stream: bool = False, text: str = "Hello there",
                **extra: Any) -> tuple[str, dict[str, str], dict[str, Any]]:
    """(path, headers, body) of a chat request to ``model`` in the given wire format."""
    if wire == "openai":
        return "/v1/chat/completions", {}, openai_body(text, model, stream=stream, **extra)
    if wire == "azure":
        body = openai_body(text, model, stream=stream, **extra)
        del body["model"]
        return AZURE_PATH.format(deployment=model), AZURE_HEADERS, body
    if wire == "anthropic":
        return "/v1/messages", ANTHROPIC_HEADERS, anthropic_body(text, model, stream=stream, **extra)
    if wire == "gemini":
        return gemini_path(model, stream=stream), GEMINI_HEADERS, gemini_body(text, **extra)
    raise ValueError(wire)


def tools_for(wire: str, schema: dict[str, Any], name: str = "get_weather") -> dict[str, Any]:
    """The request fields declaring one tool with ``schema``, in the wire format's shape."""
    if wire in ("openai", "azure"):
        return {"tools": [{"type": "function", "function": {"name": name, "parameters": schema}}]}
    if wire == "anthropic":
        return {"tools": [{"name": name, "input_schema": schema}]}
    return {"tools": [{"functionDeclarations": [{"name": name, "parameters": schema}]}]}


def response_schema_for(wire: str, schema: dict[str, Any]) -> dict[str, Any]:
    """The request fields asking for a JSON answer valid against ``schema``."""
    if wire in ("openai", "azure"):
        return {"response_format": {"type": "json_schema", "json_schema": {"name": "out", "schema": schema}}}
    if wire == "anthropic":
        return {"output_format": {"type": "json_schema", "schema": schema}}
    return {"generationConfig": {"responseMimeType": "application/json", "responseJsonSchema": schema}}


def answer_of(wire: str, text: str, *, stream: bool) -> dict[str, Any]:
    """The answer's text, finish reason and tool calls [(name, arguments JSON text)], from a response body."""
    if wire in ("openai", "azure"):
        return _openai_answer(text) if not stream else _openai_stream_answer(text)
    if wire == "anthropic":
        return _anthropic_answer(text) if not stream else _anthropic_stream_answer(text)
    events = sse_json(text) if stream else [json.loads(text)]
    parts = [part for event in events for part in event["candidates"][0]["content"]["parts"]]
    calls = [(p["functionCall"]["name"], json.dumps(p["functionCall"]["args"])) for p in parts if "functionCall" in p]
    return {
        "text": "".join(p.get("text", "") for p in parts if not p.get("thought")),
        "finish": events[-1]["candidates"][0]["finishReason"],
        "tools": calls,
    }


def _openai_answer(text: str) -> dict[str, Any]:
    choice = json.loads(text)["choices"][0]
    calls = choice["message"].get("tool_calls", [])
    return {
        "text": choice["message"]["content"] or "",
        "finish": choice["finish_reason"],
        "tools": [(call["function"]["name"], call["function"]["arguments"]) for call in calls],
    }


def _openai_stream_answer(text: str) -> dict[str, Any]:
    chunks = [chunk for chunk in sse_json(text) if chunk.get("choices")]
    calls = [call for chunk in chunks for call in chunk["choices"][0]["delta"].get("tool_calls", [])]
    names = [call["function"]["name"] for call in calls if "name" in call["function"]]
    arguments = "".join(call["function"].get("arguments", "") for call in calls)
    return {
        "text": openai_stream_text(chunks),
        "finish": chunks[-1]["choices"][0]["finish_reason"],
        "tools": [(names[0], arguments)] if names else [],
    }


def _anthropic_answer(text: str) -> dict[str, Any]:
    message = json.loads(text)
    blocks = message["content"]
    return {
        "text": "".join(block["text"] for block in blocks if block["type"] == "text"),
        "finish": message["stop_reason"],
        "tools": [(block["name"], json.dumps(block["input"])) for block in blocks if block["type"] == "tool_use"],
    }


def _anthropic_stream_answer(text: str) -> dict[str, Any]:
    payloads = sse_json(text)
    starts = [p["content_block"] for p in payloads if p["type"] == "content_block_start"]
    deltas = [p["delta"] for p in payloads if p["type"] == "content_block_delta"]
    partial = "".join(delta.get("partial_json", "") for delta in deltas)
    return {
        "text": "".join(delta.get("text", "") for delta in deltas),
        "finish": next(p["delta"]["stop_reason"] for p in payloads if p["type"] == "message_delta"),
        "tools": [(start["name"], partial) for start in starts if start["type"] == "tool_use"],
    }

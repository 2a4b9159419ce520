"""Anthropic's stream events -> OpenAI chunks.

Anthropic streams content blocks (text, thinking, tool_use) each opened, filled by deltas and closed, then
a message_delta with the stop reason and the cumulative output usage, then message_stop. Input and cache
counts come at message_start. Tool-use blocks become tool calls numbered in order of appearance, so
parallel calls keep their order and their argument fragments land on the right call.
"""

from __future__ import annotations

from typing import Any

from routing.core.answer import Usage
from routing.providers.finish_reasons import finish_from_anthropic, openai_finish
from routing.providers.ids import openai_response_id
from routing.providers.shape import int_or, object_or_empty
from routing.providers.sse import SSEEvent
from routing.providers.stream_content_shape import ContentShape
from routing.providers.stream_decoding import ChunkDecoder, failure_from_error, load_event_json
from routing.providers.usage import openai_usage, usage_from_anthropic


class AnthropicEventDecoder(ChunkDecoder):
    def __init__(self, *, public_model: str = "", created: int = 0) -> None:
        super().__init__(public_model=public_model, created=created)
        self._usage: Usage | None = None
        self._tool_of_block: dict[int, int] = {}  # content block index -> tool call index
        self.shape: ContentShape | None = None  # learned from the first plain text_delta

    def content_text(self, raw: bytes) -> str | None:
        shape = self.shape
        return None if shape is None else shape.text_of(raw)

    def partial_usage(self) -> Usage | None:
        return self._usage

    def decode(self, event: SSEEvent) -> list[dict[str, Any]]:
        if event.data is None:
            return []
        data = load_event_json(event)
        kind = data.get("type") or event.event
        if kind == "content_block_delta":
            if self.shape is None:
                text = _plain_text_delta(data)
                if text is not None:
                    self.shape = ContentShape.learn(event.raw, b'"type":"text_delta","text":', text)
            return self._block_delta(data)
        if kind == "content_block_start":
            return self._block_start(data)
        if kind == "message_start":
            message = object_or_empty(data.get("message"))
            self.response_id = openai_response_id(message.get("id"))
            self._usage = usage_from_anthropic(message.get("usage"))
            return [self.chunk({"role": "assistant", "content": ""})]
        if kind == "message_delta":
            return self._message_delta(data)
        if kind == "message_stop":
            self.done = True
        elif kind == "error":
            self.failure = failure_from_error(data.get("error"))
        return []  # ping, content_block_stop, and event types added later

    def _block_start(self, data: dict[str, Any]) -> list[dict[str, Any]]:
        block = data.get("content_block")
        if not isinstance(block, dict):
            return []
        kind = block.get("type")
        if kind == "tool_use":
            tool_index = len(self._tool_of_block)
            self._tool_of_block[int_or(data.get("index"), -1)] = tool_index
            call = {
                "index": tool_index,
                "id": block.get("id", ""),
                "type": "function",
                "function": {"name": block.get("name", ""), "arguments": ""},
            }
            return [self.chunk({"tool_calls": [call]})]
        if kind == "text" and block.get("text"):
            return [self.chunk({"content": block["text"]})]
        if kind == "thinking" and block.get("thinking"):
            return [self.chunk({"reasoning_content": block["thinking"]})]
        return []

    def _block_delta(self, data: dict[str, Any]) -> list[dict[str, Any]]:
        delta = data.get("delta")
        if not isinstance(delta, dict):
            return []
        kind = delta.get("type")
        if kind == "text_delta":
            return [self.chunk({"content": delta.get("text", "")})]
        if kind == "thinking_delta":
            return [self.chunk({"reasoning_content": delta.get("thinking", "")})]
        if kind == "input_json_delta":
            tool_index = self._tool_of_block.get(int_or(data.get("index"), -1))
            if tool_index is None:
                return []
            return [self.chunk({"tool_calls": [{"index": tool_index, "function": {
                "arguments": delta.get("partial_json", "")}}]})]
        return []  # signature_delta, citations_delta: nothing an OpenAI client can hold

    def _message_delta(self, data: dict[str, Any]) -> list[dict[str, Any]]:
        self._usage = usage_from_anthropic(data.get("usage"), self._usage)
        delta = object_or_empty(data.get("delta"))
        chunks = []
        stop_reason = delta.get("stop_reason")
        if stop_reason:
            self.finish_override = finish_from_anthropic(stop_reason)
            chunks.append(self.chunk(finish=openai_finish(self.finish_override)))
        return chunks

    def final_chunks(self) -> list[dict[str, Any]]:
        return [self.usage_chunk(openai_usage(self._usage))] if self._usage is not None else []


def _plain_text_delta(data: dict[str, Any]) -> str | None:
    """The text of a content_block_delta that carries a text_delta and nothing else, else None."""
    delta = data.get("delta")
    if len(data) != 3 or "index" not in data or type(delta) is not dict or len(delta) != 2:
        return None
    text = delta.get("text")
    return text if delta.get("type") == "text_delta" and type(text) is str else None

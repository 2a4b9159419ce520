"""Anthropic's stream events -> OpenAI chunks.

Anthropic streams content blocks (text, thinking, tool_use) each opened, filled by deltas and closed, then
a message_delta with the stop reason and the cumulative output usage, then message_stop. Input and cache
counts come at message_start. Tool-use blocks become tool calls numbered in order of appearance, so
parallel calls keep their order and their argument fragments land on the right call. Thinking text streams as
``reasoning_content``; the signed thinking blocks (text and ``signature_delta``, or a ``redacted_thinking``
block's data) are collected and ride in the id of the tool call that follows them (thinking_ids).
"""

from __future__ import annotations

from typing import Any

from routing.core.answer import Usage
from routing.providers.common.finish_reasons import finish_from_anthropic, openai_finish
from routing.providers.common.ids import openai_response_id
from routing.providers.common.shape import int_or, object_or_empty
from routing.providers.common.thinking_ids import REDACTED, THINKING, ThinkingBlock, id_with_thinking
from routing.providers.common.usage import openai_usage, usage_from_anthropic
from routing.providers.streaming.content_shape import ContentShape
from routing.providers.streaming.decoding import ChunkDecoder, failure_from_error, load_event_json
from routing.providers.streaming.sse import SSEEvent


class AnthropicEventDecoder(ChunkDecoder):
    def __init__(self, *, public_model: str = "", created: int = 0, carry_thinking: bool = True) -> None:
        super().__init__(public_model=public_model, created=created)
        self._carry_thinking = carry_thinking  # False: the chunks only accumulate an Anthropic client's answer
        self._usage: Usage | None = None
        self._tool_of_block: dict[int, int] = {}  # content block index -> tool call index
        self.shape: ContentShape | None = None  # learned from the first plain text_delta
        self._thinking: list[ThinkingBlock] = []  # the finished thinking blocks since the last tool call
        self._open_thinking: tuple[int, list[str], list[str]] | None = None  # (block index, texts, signature parts)

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
        self._close_thinking()
        if kind == "tool_use":
            tool_index = len(self._tool_of_block)
            self._tool_of_block[int_or(data.get("index"), -1)] = tool_index
            call_id = str(block.get("id") or "")
            if self._carry_thinking:
                call_id = id_with_thinking(call_id, self._thinking)
            self._thinking = []
            call = {
                "index": tool_index,
                "id": call_id,
                "type": "function",
                "function": {"name": block.get("name", ""), "arguments": ""},
            }
            return [self.chunk({"tool_calls": [call]})]
        if kind == "text" and block.get("text"):
            return [self.chunk({"content": block["text"]})]
        if kind == THINKING:
            text, signature = block.get("thinking"), block.get("signature")
            text = text if isinstance(text, str) else ""
            signature = signature if isinstance(signature, str) else ""
            self._open_thinking = (int_or(data.get("index"), -1), [text], [signature])
            return [self.chunk({"reasoning_content": text})] if text else []
        if kind == REDACTED and isinstance(block.get("data"), str):
            self._thinking.append(ThinkingBlock(REDACTED, block["data"]))
        return []

    def _close_thinking(self) -> None:
        """The open thinking block, whole, joins those the next tool call carries."""
        opened, self._open_thinking = self._open_thinking, None
        if opened is not None:
            self._thinking.append(ThinkingBlock(THINKING, "".join(opened[1]), "".join(opened[2])))

    def _thinking_delta(self, data: dict[str, Any], field: str, value: Any) -> None:
        opened = self._open_thinking
        if opened is not None and opened[0] == int_or(data.get("index"), -1) and isinstance(value, str):
            (opened[1] if field == "thinking" else opened[2]).append(value)

    def _block_delta(self, data: dict[str, Any]) -> list[dict[str, Any]]:
        delta = data.get("delta")
        if not isinstance(delta, dict):
            return []
        kind = delta.get("type")
        if kind == "text_delta":
            return [self.chunk({"content": delta.get("text", "")})]
        if kind == "thinking_delta":
            self._thinking_delta(data, "thinking", delta.get("thinking"))
            return [self.chunk({"reasoning_content": delta.get("thinking", "")})]
        if kind == "signature_delta":
            self._thinking_delta(data, "signature", delta.get("signature"))
            return []
        if kind == "input_json_delta":
            tool_index = self._tool_of_block.get(int_or(data.get("index"), -1))
            if tool_index is None:
                return []
            return [self.chunk({"tool_calls": [{"index": tool_index, "function": {
                "arguments": delta.get("partial_json", "")}}]})]
        return []  # citations_delta: nothing an OpenAI client can hold

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

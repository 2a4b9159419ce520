"""OpenAI chunks -> Anthropic's stream events, for an Anthropic client whatever the upstream.

Anthropic's sequence is stricter than OpenAI's: message_start first; each content block opened, filled
and closed before the next; then message_delta (stop reason and usage) and message_stop. OpenAI sends the
finish reason before the usage, so message_delta waits for ``close()``, when both are known.
"""

from __future__ import annotations

from typing import Any

from routing.core.answer import Usage
from routing.providers.common.finish_reasons import anthropic_stop_reason, finish_from_openai
from routing.providers.common.ids import anthropic_message_id, anthropic_tool_id
from routing.providers.common.shape import int_or, list_or_empty, object_or_empty
from routing.providers.common.tool_call_ids import new_tool_call_id
from routing.providers.common.usage import anthropic_usage, usage_from_openai
from routing.providers.errors import MalformedResponse
from routing.providers.pivot.chat_completion import reasoning_text
from routing.providers.streaming.sse import compact_json, event_frame


class AnthropicEventEncoder:
    """Chunks as Anthropic's message/content-block events for choice 0."""

    def __init__(self, *, public_model: str) -> None:
        self.public_model = public_model
        self._started = False
        self._block = -1  # index of the open content block, -1 when none
        self._block_kind = ""  # "text", "thinking" or "tool"
        self._block_of_call: dict[int, int] = {}  # OpenAI tool call index -> content block index
        self._open_call = -1
        self._finish: str | None = None
        self._usage: Usage | None = None
        self._next_block = 0

    def encode(self, chunk: dict[str, Any]) -> list[bytes]:
        frames: list[bytes] = []
        if not self._started:
            frames.append(self._message_start(chunk.get("id")))
        usage = chunk.get("usage")
        if isinstance(usage, dict):
            self._usage = usage_from_openai(usage)
        for choice in list_or_empty(chunk.get("choices")):
            if not isinstance(choice, dict) or choice.get("index", 0) != 0:
                continue
            delta = object_or_empty(choice.get("delta"))
            if "reasoning_content" in delta or "reasoning" in delta:
                reasoning = reasoning_text(delta)
                if reasoning:
                    frames += self._open("thinking", {"type": "thinking", "thinking": "", "signature": ""})
                    frames.append(self._text_delta(b"thinking_delta", b"thinking", reasoning))
            for key in ("content", "refusal"):
                text = delta.get(key)
                if isinstance(text, str) and text:
                    if self._block_kind != "text":
                        frames += self._open("text", {"type": "text", "text": ""})
                    frames.append(self._text_delta(b"text_delta", b"text", text))
            if "tool_calls" in delta:
                for call in list_or_empty(delta["tool_calls"]):
                    if isinstance(call, dict):
                        frames += self._tool_call(call)
            if choice.get("finish_reason"):
                self._finish = choice["finish_reason"]
        return frames

    @property
    def takes_text(self) -> bool:
        """Whether ``encode_text`` can stand for ``encode`` of a plain content delta (after message_start)."""
        return self._started

    def encode_text(self, text: str) -> list[bytes]:
        """The frames of a plain content delta of choice 0: what ``encode`` writes for it, without its chunk."""
        if not text:
            return []
        frames = [] if self._block_kind == "text" else self._open("text", {"type": "text", "text": ""})
        frames.append(self._text_delta(b"text_delta", b"text", text))
        return frames

    def close(self) -> list[bytes]:
        frames = [] if self._started else [self._message_start(None)]
        frames += self._close_block()
        stop_reason = anthropic_stop_reason(finish_from_openai(self._finish))
        frames.append(
            event_frame(
                "message_delta",
                {
                    "type": "message_delta",
                    "delta": {"stop_reason": stop_reason, "stop_sequence": None},
                    "usage": anthropic_usage(self._usage or Usage()),
                },
            )
        )
        frames.append(event_frame("message_stop", {"type": "message_stop"}))
        return frames

    def _message_start(self, upstream_id: Any) -> bytes:
        self._started = True
        message: dict[str, Any] = {
            "id": anthropic_message_id(upstream_id),
            "type": "message",
            "role": "assistant",
            "model": self.public_model,
            "content": [],
            "stop_reason": None,
            "stop_sequence": None,
            # Input counts arrive with the final usage; message_delta carries them (cumulative totals).
            "usage": {"input_tokens": 0, "output_tokens": 0},
        }
        return event_frame("message_start", {"type": "message_start", "message": message})

    def _open(self, kind: str, block: dict[str, Any]) -> list[bytes]:
        if self._block_kind == kind and kind != "tool":
            return []
        frames = self._close_block()
        self._block = self._next_block
        self._next_block += 1
        self._block_kind = kind
        frames.append(
            event_frame("content_block_start", {"type": "content_block_start", "index": self._block,
                                                "content_block": block})
        )
        return frames

    def _close_block(self) -> list[bytes]:
        if self._block < 0:
            return []
        frame = event_frame("content_block_stop", {"type": "content_block_stop", "index": self._block})
        self._block = -1
        self._block_kind = ""
        self._open_call = -1
        return [frame]

    def _text_delta(self, kind: bytes, field: bytes, text: str) -> bytes:
        """A content_block_delta carrying ``text``: the frame ``event_frame`` would write, spliced from
        constant parts so that only the text is encoded (one per streamed chunk)."""
        return (b'event: content_block_delta\ndata: {"type":"content_block_delta","index":%d,"delta":{"type":"%s",'
                b'"%s":%s}}\n\n' % (self._block, kind, field, compact_json(text).encode()))

    def _tool_call(self, call: dict[str, Any]) -> list[bytes]:
        index = int_or(call.get("index"), len(self._block_of_call))
        function = object_or_empty(call.get("function"))
        frames: list[bytes] = []
        if index not in self._block_of_call:
            block: dict[str, Any] = {
                "type": "tool_use",
                "id": anthropic_tool_id(call.get("id") or new_tool_call_id()),  # toolu_, as its client expects
                "name": function.get("name") or "",
                "input": {},
            }
            frames += self._open("tool", block)
            self._block_of_call[index] = self._block
            self._open_call = index
        elif index != self._open_call:
            # Anthropic cannot reopen a closed block; OpenAI-compatible servers stream calls one by one.
            raise MalformedResponse("the upstream interleaved the arguments of parallel tool calls")
        arguments = function.get("arguments")
        if isinstance(arguments, str) and arguments:
            frames.append(self._text_delta(b"input_json_delta", b"partial_json", arguments))
        return frames

"""Cohere Chat v2 stream events -> OpenAI chunks.

The events, each a JSON object whose ``type`` names it (also given as the SSE event name)::

    message-start                       id
    content-start / content-delta       delta.message.content: {type: text|thinking, text|thinking}
    content-end
    tool-plan-delta                     delta.message.tool_plan: the words before the calls
    tool-call-start                     delta.message.tool_calls: {id, type, function: {name, arguments}}
    tool-call-delta                     delta.message.tool_calls.function.arguments: the next fragment
    tool-call-end
    citation-start / citation-end       (nothing an OpenAI client holds)
    message-end                         delta.finish_reason, delta.usage: the end marker

A message-end whose finish reason is ERROR is the provider's failure mid-stream. Tool calls are numbered
in order of appearance, so each argument fragment lands on its own call.
"""

from __future__ import annotations

from typing import Any

from routing.core.answer import Usage
from routing.providers.cohere.response import finish_from_cohere, tool_call_of, usage_from_cohere
from routing.providers.common.finish_reasons import openai_finish
from routing.providers.common.ids import openai_response_id
from routing.providers.common.shape import int_or, object_or_empty
from routing.providers.common.usage import openai_usage
from routing.providers.streaming.decoding import ChunkDecoder, StreamFailure, failure_from_error, load_event_json
from routing.providers.streaming.sse import SSEEvent


def _message_delta(data: dict[str, Any]) -> dict[str, Any]:
    return object_or_empty(object_or_empty(data.get("delta")).get("message"))


class CohereEventDecoder(ChunkDecoder):
    def __init__(self, *, public_model: str = "", created: int = 0) -> None:
        super().__init__(public_model=public_model, created=created)
        self._usage: Usage | None = None
        self._tool_of_index: dict[int, int] = {}  # Cohere's tool call index -> the OpenAI call index

    def partial_usage(self) -> Usage | None:
        return self._usage

    def decode(self, event: SSEEvent) -> list[dict[str, Any]]:
        if event.data is None:
            return []
        data = load_event_json(event)
        kind = data.get("type") or event.event
        if kind in ("content-delta", "content-start"):
            content = object_or_empty(_message_delta(data).get("content"))
            delta: dict[str, Any] = {}
            if isinstance(content.get("thinking"), str) and content["thinking"]:
                delta["reasoning_content"] = content["thinking"]
            if isinstance(content.get("text"), str) and content["text"]:
                delta["content"] = content["text"]
            return [self.chunk(delta)] if delta else []
        if kind == "tool-plan-delta":
            plan = _message_delta(data).get("tool_plan")
            return [self.chunk({"content": plan})] if isinstance(plan, str) and plan else []
        if kind == "tool-call-start":
            call = tool_call_of(_message_delta(data).get("tool_calls"))
            position = len(self._tool_of_index)
            self._tool_of_index[int_or(data.get("index"), position)] = position
            return [self.chunk({"tool_calls": [{"index": position, **call}]})]
        if kind == "tool-call-delta":
            position = self._tool_of_index.get(int_or(data.get("index"), -1))
            if position is None:
                return []
            function = object_or_empty(object_or_empty(_message_delta(data).get("tool_calls")).get("function"))
            fragment = function.get("arguments")
            if not isinstance(fragment, str) or not fragment:
                return []
            return [self.chunk({"tool_calls": [{"index": position, "function": {"arguments": fragment}}]})]
        if kind == "message-start":
            self.response_id = openai_response_id(data.get("id"))
            return [self.chunk({"role": "assistant", "content": ""})]
        if kind == "message-end":
            return self._message_end(data)
        if kind == "error" or data.get("error"):
            self.failure = failure_from_error(data.get("error") or data)
        return []  # content-end, tool-call-end, citation events, and event types added later

    def _message_end(self, data: dict[str, Any]) -> list[dict[str, Any]]:
        delta = object_or_empty(data.get("delta"))
        if delta.get("usage") is not None:
            self._usage = usage_from_cohere(delta["usage"])
        reason = delta.get("finish_reason")
        if reason == "ERROR":
            error = delta.get("error")
            self.failure = StreamFailure("api_error", str(error or "the upstream reported an error mid-stream"))
            return []
        self.finish_override = finish_from_cohere(reason)
        self.done = True
        return [self.chunk(finish=openai_finish(self.finish_override))]

    def final_chunks(self) -> list[dict[str, Any]]:
        return [self.usage_chunk(openai_usage(self._usage))] if self._usage is not None else []

"""Gemini's ``streamGenerateContent?alt=sse`` events -> OpenAI chunks.

Each Gemini event is a whole GenerateContentResponse holding the next piece of every candidate: text,
thought text, and complete function calls (Gemini never splits a call's arguments). ``usageMetadata`` is
cumulative, so the last one seen is the usage. There is no end marker: a candidate's ``finishReason``
marks a complete stream.
"""

from __future__ import annotations

from typing import Any

from routing.core.answer import Usage
from routing.providers.common.finish_reasons import finish_from_gemini, openai_finish
from routing.providers.common.ids import openai_response_id
from routing.providers.common.shape import int_or
from routing.providers.common.usage import openai_usage, usage_from_gemini
from routing.providers.gemini.response import candidate_parts
from routing.providers.streaming.decoding import ChunkDecoder, failure_from_error, load_event_json
from routing.providers.streaming.sse import SSEEvent


class GeminiEventDecoder(ChunkDecoder):
    def __init__(self, *, public_model: str = "", created: int = 0) -> None:
        super().__init__(public_model=public_model, created=created)
        self._started = False
        self._usage: Usage | None = None
        self._calls_per_candidate: dict[int, int] = {}

    def partial_usage(self) -> Usage | None:
        return self._usage

    def decode(self, event: SSEEvent) -> list[dict[str, Any]]:
        if event.data is None:
            return []
        data = load_event_json(event)
        if data.get("error"):
            self.failure = failure_from_error(data["error"])
            return []
        chunks: list[dict[str, Any]] = []
        if not self._started:
            self._started = True
            self.response_id = openai_response_id(data.get("responseId"))
            chunks.append(self.chunk({"role": "assistant", "content": ""}))
        if isinstance(data.get("usageMetadata"), dict):
            self._usage = usage_from_gemini(data["usageMetadata"])
        candidates = data.get("candidates")
        for position, candidate in enumerate(candidates if isinstance(candidates, list) else ()):
            if isinstance(candidate, dict):
                chunks.extend(self._candidate(candidate, position))
        if not candidates and isinstance(data.get("promptFeedback"), dict) and data["promptFeedback"].get(
            "blockReason"
        ):
            self.finish_override = "content_filter"
            self.done = True
            chunks.append(self.chunk(finish="content_filter"))
        return chunks

    def _candidate(self, candidate: dict[str, Any], position: int) -> list[dict[str, Any]]:
        index = int_or(candidate.get("index"), position)
        parts = candidate_parts(candidate)
        delta: dict[str, Any] = {}
        if parts.reasoning:
            delta["reasoning_content"] = parts.reasoning
        if parts.text:
            delta["content"] = parts.text
        if parts.tool_calls:
            first = self._calls_per_candidate.get(index, 0)
            delta["tool_calls"] = [{"index": first + k, **call} for k, call in enumerate(parts.tool_calls)]
            self._calls_per_candidate[index] = first + len(parts.tool_calls)
        reason = candidate.get("finishReason")
        chunks = [self.chunk(delta, index=index)] if delta else []
        if reason:
            finish = finish_from_gemini(reason, has_tool_calls=bool(self._calls_per_candidate.get(index)))
            if index == 0:
                self.finish_override = finish
                self.done = True
            chunks.append(self.chunk(finish=openai_finish(finish), index=index))
        return chunks

    def final_chunks(self) -> list[dict[str, Any]]:
        return [self.usage_chunk(openai_usage(self._usage))] if self._usage is not None else []

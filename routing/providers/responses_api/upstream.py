"""OpenAI's own Responses API upstream: ``POST {base_url}/responses`` for an OpenAI-kind provider.

The gateway keeps conversations itself (routing/clients/responses_store.py), so the upstream is sent the whole
input of the turn (the stored conversation, then the new items), never the gateway's ``previous_response_id``,
and ``store: false``: nothing of the conversation is kept in the provider's account on the gateway's behalf.
Its answer goes back to the client with the gateway's response id, the public model name and the client's own
``store`` and ``previous_response_id``; a stream's response-level events are rewritten the same way and every
other event is passed on byte for byte. The answer and usage are read on the way (as chat chunks, the pivot) for
validation and cost.
"""

from __future__ import annotations

import json
from typing import Any

from routing.core.answer import (
    FINISH_CONTENT_FILTER,
    FINISH_LENGTH,
    FINISH_STOP,
    FINISH_TOOL_CALLS,
    Answer,
    ToolCall,
    Usage,
)
from routing.providers.common.shape import int_or, list_or_empty, object_or_empty
from routing.providers.common.thinking_ids import is_gateway_reasoning
from routing.providers.common.usage import openai_usage
from routing.providers.errors import MalformedResponse
from routing.providers.responses_api.stream_from_chat import ResponsesEvents
from routing.providers.streaming.decoding import ChunkDecoder, failure_from_error, load_event_json
from routing.providers.streaming.sse import SSEEvent, event_frame
from routing.providers.streaming.translators import StreamTranslator

_LIFECYCLE = frozenset({"response.created", "response.queued", "response.in_progress", "response.completed",
                        "response.incomplete"})
_INCOMPLETE_FINISH = {"max_output_tokens": FINISH_LENGTH, "content_filter": FINISH_CONTENT_FILTER}


def native_payload(body: dict[str, Any], *, upstream_model: str, conversation: list[dict[str, Any]],
                   stream: bool) -> dict[str, Any]:
    """The upstream body: the client's, with the whole conversation as input and nothing stored upstream."""
    out = {key: value for key, value in body.items()
           if key not in ("previous_response_id", "stream", "stream_options")}
    out["model"] = upstream_model
    # Claude's thinking kept for a tool loop (thinking_ids) is no reasoning OpenAI could read: it is left out.
    out["input"] = [item for item in conversation if not is_gateway_reasoning(item)]
    out["store"] = False
    if stream:
        out["stream"] = True
        if body.get("stream_options") is not None:
            out["stream_options"] = body["stream_options"]
    return out


def usage_from_responses(data: Any) -> Usage:
    usage = object_or_empty(data)
    input_details = object_or_empty(usage.get("input_tokens_details"))
    output_details = object_or_empty(usage.get("output_tokens_details"))
    return Usage(
        input_tokens=max(int_or(usage.get("input_tokens"), 0), 0),
        output_tokens=max(int_or(usage.get("output_tokens"), 0), 0),
        cached_input_tokens=max(int_or(input_details.get("cached_tokens"), 0), 0),
        cache_creation_tokens=max(int_or(input_details.get("cache_write_tokens"), 0), 0),
        reasoning_tokens=max(int_or(output_details.get("reasoning_tokens"), 0), 0),
    )


def _finish(response: dict[str, Any], has_calls: bool) -> str:
    if response.get("status") == "incomplete":
        reason = object_or_empty(response.get("incomplete_details")).get("reason")
        return _INCOMPLETE_FINISH.get(reason, FINISH_LENGTH) if isinstance(reason, str) else FINISH_LENGTH
    return FINISH_TOOL_CALLS if has_calls else FINISH_STOP


def answer_from_response(response: Any) -> Answer:
    """The Answer of a Response object: its message text, function calls and reasoning text."""
    if not isinstance(response, dict) or not isinstance(response.get("output"), list):
        raise MalformedResponse("the upstream response has no 'output' array")
    texts: list[str] = []
    reasoning: list[str] = []
    calls: list[ToolCall] = []
    refused = False
    for item in response["output"]:
        if not isinstance(item, dict):
            continue
        kind = item.get("type")
        if kind == "message":
            for part in list_or_empty(item.get("content")):
                part = object_or_empty(part)
                if part.get("type") == "output_text" and isinstance(part.get("text"), str):
                    texts.append(part["text"])
                elif part.get("type") == "refusal":
                    refused = True
        elif kind == "function_call":
            arguments = item.get("arguments")
            calls.append(ToolCall(id=str(item.get("call_id") or ""), name=str(item.get("name") or ""),
                                  arguments=arguments if isinstance(arguments, str) else json.dumps(arguments or {})))
        elif kind == "reasoning":
            for field in ("summary", "content"):
                for part in list_or_empty(item.get(field)):
                    text = object_or_empty(part).get("text")
                    if isinstance(text, str):
                        reasoning.append(text)
    finish = FINISH_CONTENT_FILTER if refused and not texts else _finish(response, bool(calls))
    return Answer(text="".join(texts), finish_reason=finish, tool_calls=tuple(calls), reasoning_text="".join(reasoning))


def public_response(response: dict[str, Any], *, response_id: str, public_model: str, store: bool,
                    previous_response_id: str | None) -> dict[str, Any]:
    """The upstream's Response as the client sees it: the gateway's id and the client's own settings."""
    return {**response, "id": response_id, "model": public_model, "store": store,
            "previous_response_id": previous_response_id}


class ResponsesEventDecoder(ChunkDecoder):
    """Responses stream events -> OpenAI chunks, for the accumulator (text, function calls, reasoning, usage)."""

    def __init__(self, *, public_model: str, created: int) -> None:
        super().__init__(public_model=public_model, created=created)
        self._call_index: dict[int, int] = {}  # output_index -> tool call index
        self.last_sequence = -1
        self.usage: Usage | None = None
        self.last: dict[str, Any] = {}  # the JSON of the event decoded last, so the pass-through parses it once

    def decode(self, event: SSEEvent) -> list[dict[str, Any]]:
        if event.data is None:
            return []
        data = self.last = load_event_json(event)
        sequence = data.get("sequence_number")
        if isinstance(sequence, int) and sequence > self.last_sequence:
            self.last_sequence = sequence
        kind = data.get("type") or event.event
        if kind == "response.output_text.delta":
            delta = data.get("delta")
            return [self.chunk({"content": delta})] if isinstance(delta, str) and delta else []
        if kind in ("response.reasoning_text.delta", "response.reasoning_summary_text.delta"):
            delta = data.get("delta")
            return [self.chunk({"reasoning_content": delta})] if isinstance(delta, str) and delta else []
        if kind == "response.output_item.added":
            item = object_or_empty(data.get("item"))
            if item.get("type") != "function_call":
                return []
            index = self._call_index.setdefault(int_or(data.get("output_index"), 0), len(self._call_index))
            arguments = item.get("arguments") if isinstance(item.get("arguments"), str) else ""
            return [self.chunk({"tool_calls": [{"index": index, "id": str(item.get("call_id") or ""),
                                                "type": "function",
                                                "function": {"name": str(item.get("name") or ""),
                                                             "arguments": arguments}}]})]
        if kind == "response.function_call_arguments.delta":
            index = self._call_index.get(int_or(data.get("output_index"), -1))
            delta = data.get("delta")
            if index is None or not isinstance(delta, str) or not delta:
                return []
            return [self.chunk({"tool_calls": [{"index": index, "function": {"arguments": delta}}]})]
        if kind in ("response.completed", "response.incomplete"):
            response = object_or_empty(data.get("response"))
            self.done = True
            self.finish_override = _finish(response, bool(self._call_index))
            self.usage = usage_from_responses(response.get("usage"))
            return [self.chunk(finish="stop"), self.usage_chunk(openai_usage(self.usage))]
        if kind == "response.failed":
            self.failure = failure_from_error(object_or_empty(data.get("response")).get("error"))
        elif kind == "error":
            self.failure = failure_from_error(data.get("error") if isinstance(data.get("error"), dict) else data)
        return []


class ResponsesPassThrough(StreamTranslator):
    """An OpenAI Responses stream to a Responses client: events passed on, response-level ones rewritten."""

    def __init__(self, events: ResponsesEvents) -> None:
        self._responses = ResponsesEventDecoder(public_model=events.public_model, created=events.created)
        super().__init__(inbound="openai", decoder=self._responses)
        self._lifecycle = events
        self._output: list[dict[str, Any]] = []  # finished output items, for a response.failed

    def _events(self, events: list[SSEEvent]) -> list[bytes]:
        frames: list[bytes] = []
        decoder = self._responses
        for event in events:
            if decoder.failure is not None:
                break
            if event.data is None:
                continue
            for chunk in decoder.decode(event):
                self._accumulator.add(chunk)
            if decoder.failure is not None:
                break  # the engine ends the client's stream with its own error events
            data = decoder.last
            kind = data.get("type")
            if kind in _LIFECYCLE and isinstance(data.get("response"), dict):
                lifecycle = self._lifecycle
                data["response"] = public_response(
                    data["response"], response_id=lifecycle.response_id, public_model=lifecycle.public_model,
                    store=lifecycle.request.store, previous_response_id=lifecycle.request.previous_response_id)
                frames.append(event_frame(str(kind), data))
                continue
            if kind == "response.output_item.done" and isinstance(data.get("item"), dict):
                self._output.append(data["item"])
            frames.append(event.raw)
        return frames

    @property
    def output_items(self) -> list[dict[str, Any]]:
        """The output items finished so far (``response.output_item.done``), with the provider's ids."""
        return list(self._output)

    def error_frames(self, error_type: str, message: str) -> list[bytes]:
        self._lifecycle.sequence = self._responses.last_sequence + 1
        return self._lifecycle.failed(error_type, message, list(self._output))

    def _closing_frames(self) -> list[bytes]:
        return []  # response.completed was passed on as it came

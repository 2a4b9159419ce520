"""A chat stream -> the Responses API's stream events, for every provider kind reached through a chat adapter.

The adapter's own translator (inbound ``openai``, usage requested) turns the provider's stream into OpenAI chunk
frames and accumulates the answer and usage; ``ChatToResponsesStream`` reads those frames and writes the
Responses events OpenAI's SDKs expect, each with its ``sequence_number``::

    response.created, response.in_progress
    per output item: response.output_item.added
      reasoning:      response.reasoning_text.delta ... .done
      message:        response.content_part.added, response.output_text.delta ... response.output_text.done,
                      response.content_part.done
      function_call:  response.function_call_arguments.delta ... .done
    response.output_item.done
    response.completed | response.incomplete (max_output_tokens, content_filter)

A stream that fails after it started ends with an ``error`` event and ``response.failed``. A tool call whose id
carries Claude's signed thinking (thinking_ids) is streamed with the provider's own ``call_id``; the payload is the
``encrypted_content`` of the reasoning item closed right before it, or of a reasoning item of its own when text
came between (as in chat_to_responses).
"""

from __future__ import annotations

import json
from typing import Any

from routing.core.answer import Answer, Usage
from routing.providers.common.shape import int_or, list_or_empty, object_or_empty
from routing.providers.common.thinking_ids import split_payload
from routing.providers.common.tool_call_ids import new_tool_call_id
from routing.providers.errors import MalformedResponse
from routing.providers.pivot.chat_completion import reasoning_text
from routing.providers.responses_api.ids import item_id
from routing.providers.responses_api.inbound_request import ResponsesRequest
from routing.providers.responses_api.response_from_chat import (
    function_call_item,
    message_item,
    output_text_part,
    reasoning_item,
    response_object,
    status_of,
)
from routing.providers.streaming.decoding import StreamFailure
from routing.providers.streaming.sse import compact_json, event_frame
from routing.providers.streaming.translators import StreamTranslator


class ResponsesEvents:
    """Numbers and frames the events of one response; ``lifecycle`` makes the response-level ones."""

    def __init__(self, *, request: ResponsesRequest, response_id: str, public_model: str, created: int) -> None:
        self.request = request
        self.response_id = response_id
        self.public_model = public_model
        self.created = created
        self.sequence = 0

    def frame(self, kind: str, fields: dict[str, Any]) -> bytes:
        frame = event_frame(kind, {"type": kind, "sequence_number": self.sequence, **fields})
        self.sequence += 1
        return frame

    def text_delta(self, item: str, index: int, text: str) -> bytes:
        """A ``response.output_text.delta`` frame: what ``frame`` writes for it, spliced from constant parts so that
        only the text is encoded (one per streamed chunk)."""
        frame = (b'event: response.output_text.delta\ndata: {"type":"response.output_text.delta","sequence_number":%d,'
                 b'"item_id":"%s","output_index":%d,"content_index":0,"delta":%s,"logprobs":[]}\n\n'
                 % (self.sequence, item.encode(), index, compact_json(text).encode()))
        self.sequence += 1
        return frame

    def response(self, status: str, output: list[dict[str, Any]], usage: Usage | None, *,
                 incomplete_details: dict[str, str] | None = None,
                 error: dict[str, str] | None = None) -> dict[str, Any]:
        return response_object(response_id=self.response_id, public_model=self.public_model, created=self.created,
                               request=self.request, status=status, output=output, usage=usage,
                               incomplete_details=incomplete_details, error=error)

    def failed(self, error_type: str, message: str, output: list[dict[str, Any]]) -> list[bytes]:
        """``error`` then ``response.failed``: the end of a stream that failed after it started."""
        code = "server_error" if error_type in ("api_error", "server_error", "") else error_type
        return [
            self.frame("error", {"code": code, "message": message, "param": None}),
            self.frame("response.failed", {"response": self.response(
                "failed", output, None, error={"code": code, "message": message})}),
        ]


class _OpenItem:
    __slots__ = ("kind", "index", "id", "text", "call_id", "name")

    def __init__(self, kind: str, index: int, item: str) -> None:
        self.kind = kind  # "reasoning", "message" or "function_call"
        self.index = index  # output_index
        self.id = item
        self.text: list[str] = []  # the text, reasoning or arguments so far
        self.call_id = ""
        self.name = ""


class ResponsesEventEncoder:
    """OpenAI chat chunks (choice 0) -> Responses events; ``close`` writes the terminal event."""

    def __init__(self, events: ResponsesEvents) -> None:
        self.events = events
        self._started = False
        self._open: _OpenItem | None = None
        self._calls: dict[int, _OpenItem] = {}  # chat tool call index -> its function_call item
        self._done: list[dict[str, Any]] = []  # output items, finished, in output order

    @property
    def output_items(self) -> list[dict[str, Any]]:
        """The output items so far, in output order, the one still open as it will close: once the answer has
        ended, the items the client is given (their ids are what a stored turn indexes)."""
        item = self._open
        return [*self._done, self._done_item(item, "completed")] if item is not None else list(self._done)

    def _new_id(self, prefix: str) -> str:
        return item_id(prefix, self.events.response_id)

    def start(self) -> list[bytes]:
        """``response.created`` and ``response.in_progress``, before the first event (once)."""
        if self._started:
            return []
        self._started = True
        events = self.events
        return [events.frame("response.created", {"response": events.response("in_progress", [], None)}),
                events.frame("response.in_progress", {"response": events.response("in_progress", [], None)})]

    def encode(self, chunk: dict[str, Any]) -> list[bytes]:
        frames = self.start()
        for choice in list_or_empty(chunk.get("choices")):
            if not isinstance(choice, dict) or choice.get("index", 0) != 0:
                continue
            delta = object_or_empty(choice.get("delta"))
            if "reasoning_content" in delta or "reasoning" in delta:
                reasoning = reasoning_text(delta)
                if reasoning:
                    frames += self._reasoning(reasoning)
            text = delta.get("content")
            if isinstance(text, str) and text:
                frames += self.text(text)
            refusal = delta.get("refusal")
            if isinstance(refusal, str) and refusal:
                # Streamed as the message's text: the client reads it where it reads the answer (a JSON answer
                # carries it as a refusal part).
                frames += self.text(refusal)
            for call in list_or_empty(delta.get("tool_calls")):
                if isinstance(call, dict):
                    frames += self._tool_call(call)
        return frames

    def text(self, text: str) -> list[bytes]:
        """The frames of a plain content delta."""
        frames = self.start()
        item = self._open
        if item is None or item.kind != "message":
            frames += self._close_open()
            item, added = self._begin("message", message_item("", item=self._new_id("msg"), status="in_progress"))
            frames.append(added)
            frames.append(self.events.frame("response.content_part.added", {
                "item_id": item.id, "output_index": item.index, "content_index": 0,
                "part": output_text_part("")}))
        item.text.append(text)
        frames.append(self.events.text_delta(item.id, item.index, text))
        return frames

    def close(self, answer: Answer, usage: Usage) -> list[bytes]:
        """The open item's end and the terminal event, once the chat stream ended complete."""
        status, incomplete = status_of(answer.finish_reason)
        frames = self.start() + self._close_open("incomplete" if status == "incomplete" else "completed")
        kind = "response.incomplete" if status == "incomplete" else "response.completed"
        response = self.events.response(status, list(self._done), usage, incomplete_details=incomplete)
        frames.append(self.events.frame(kind, {"response": response}))
        return frames

    def fail(self, error_type: str, message: str) -> list[bytes]:
        return self.start() + self.events.failed(error_type, message, list(self._done))

    def _begin(self, kind: str, item: dict[str, Any]) -> tuple[_OpenItem, bytes]:
        """A new open item and its ``response.output_item.added`` frame."""
        opened = _OpenItem(kind, len(self._done), item["id"])
        self._open = opened
        return opened, self.events.frame("response.output_item.added", {"output_index": opened.index, "item": item})

    def _reasoning(self, text: str) -> list[bytes]:
        frames: list[bytes] = []
        item = self._open
        if item is None or item.kind != "reasoning":
            frames += self._close_open()
            item, added = self._begin("reasoning", reasoning_item("", item=self._new_id("rs")))
            frames.append(added)
        item.text.append(text)
        frames.append(self.events.frame("response.reasoning_text.delta", {
            "item_id": item.id, "output_index": item.index, "content_index": 0, "delta": text}))
        return frames

    def _tool_call(self, call: dict[str, Any]) -> list[bytes]:
        index = int_or(call.get("index"), len(self._calls))
        function = object_or_empty(call.get("function"))
        frames: list[bytes] = []
        item = self._calls.get(index)
        if item is None:
            call_id = call.get("id") if isinstance(call.get("id"), str) and call.get("id") else new_tool_call_id()
            call_id, payload = split_payload(call_id)
            if payload:
                frames += self._thinking_before_call(payload)
            else:
                frames += self._close_open()
            name = function.get("name") if isinstance(function.get("name"), str) else ""
            item, added = self._begin("function_call", function_call_item(call_id, name, "", item=self._new_id("fc"),
                                                                           status="in_progress"))
            item.call_id, item.name = call_id, name
            self._calls[index] = item
            frames.append(added)
        elif item is not self._open:
            raise MalformedResponse("the upstream interleaved the arguments of parallel tool calls")
        arguments = function.get("arguments")
        if isinstance(arguments, str) and arguments:
            item.text.append(arguments)
            frames.append(self.events.frame("response.function_call_arguments.delta", {
                "item_id": item.id, "output_index": item.index, "delta": arguments}))
        return frames

    def _thinking_before_call(self, payload: str) -> list[bytes]:
        """The signed thinking of the next call: on the open reasoning item as it closes, else on one of its own."""
        item = self._open
        if item is not None and item.kind == "reasoning":
            return self._close_open(encrypted=payload)
        frames = self._close_open()
        item, added = self._begin("reasoning", reasoning_item("", item=self._new_id("rs")))
        frames.append(added)
        return frames + self._close_open(encrypted=payload)

    def _close_open(self, status: str = "completed", *, encrypted: str = "") -> list[bytes]:
        item = self._open
        if item is None:
            return []
        self._open = None
        events = self.events
        text = "".join(item.text)
        frames: list[bytes] = []
        where = {"item_id": item.id, "output_index": item.index}
        done = self._done_item(item, status, encrypted=encrypted)
        if item.kind == "message":
            frames.append(events.frame("response.output_text.done",
                                       {**where, "content_index": 0, "text": text, "logprobs": []}))
            frames.append(events.frame("response.content_part.done",
                                       {**where, "content_index": 0, "part": output_text_part(text)}))
        elif item.kind == "reasoning":
            if text:
                frames.append(events.frame("response.reasoning_text.done",
                                           {**where, "content_index": 0, "text": text}))
        else:
            frames.append(events.frame("response.function_call_arguments.done",
                                       {**where, "name": item.name, "arguments": done["arguments"]}))
        frames.append(events.frame("response.output_item.done", {"output_index": item.index, "item": done}))
        self._done.append(done)
        return frames

    @staticmethod
    def _done_item(item: _OpenItem, status: str, *, encrypted: str = "") -> dict[str, Any]:
        """The finished output item of ``item``."""
        text = "".join(item.text)
        if item.kind == "message":
            return message_item(text, item=item.id, status=status)
        if item.kind == "reasoning":
            return reasoning_item(text, item=item.id, encrypted=encrypted)
        return function_call_item(item.call_id, item.name, text or "{}", item=item.id, status=status)


def _chunks_of(frame: bytes) -> list[dict[str, Any]]:
    """The OpenAI chunks in client frames written by a chat translator (``[DONE]`` is no chunk)."""
    chunks = []
    for line in frame.split(b"\n"):
        if not line.startswith(b"data:"):
            continue
        payload = line[5:].strip()
        if not payload or payload == b"[DONE]":
            continue
        try:
            chunk = json.loads(payload)
        except (json.JSONDecodeError, UnicodeDecodeError, RecursionError) as exc:
            raise MalformedResponse("the upstream stream sent an event that is not JSON") from exc
        if isinstance(chunk, dict):
            chunks.append(chunk)
    return chunks


class ChatToResponsesStream(StreamTranslator):
    """A chat adapter's translator whose OpenAI frames are re-encoded as Responses events.

    Everything the engine reads (completeness, failure, usage, answer) is the inner translator's: it has read the
    provider's own stream. Only the frames differ.
    """

    def __init__(self, inner: StreamTranslator, events: ResponsesEvents) -> None:
        # The inner translator parses and accumulates; this one only re-encodes, so the base state is not used.
        self.inbound = "openai"
        self._inner = inner
        self._encoder = ResponsesEventEncoder(events)

    @property
    def complete(self) -> bool:
        return self._inner.complete

    @property
    def ended(self) -> bool:
        return self._inner.ended

    @property
    def failure(self) -> StreamFailure | None:
        return self._inner.failure

    @property
    def usage(self) -> Usage:
        return self._inner.usage

    @property
    def answer(self) -> Answer:
        return self._inner.answer

    @property
    def has_content(self) -> bool:
        return self._inner.has_content

    def feed(self, chunk: bytes) -> list[bytes]:
        return self._encode(self._inner.feed(chunk))

    def finish(self) -> list[bytes]:
        frames = self._encode(self._inner.finish())
        if self._inner.complete:
            frames += self._encoder.close(self._inner.answer, self._inner.usage)
        return frames

    @property
    def output_items(self) -> list[dict[str, Any]]:
        """The output items finished so far, with the ids the client was given."""
        return self._encoder.output_items

    def error_frames(self, error_type: str, message: str) -> list[bytes]:
        return self._encoder.fail(error_type, message)

    def _encode(self, frames: list[bytes]) -> list[bytes]:
        out: list[bytes] = []
        encode = self._encoder.encode
        for frame in frames:
            for chunk in _chunks_of(frame):
                out += encode(chunk)
        return out

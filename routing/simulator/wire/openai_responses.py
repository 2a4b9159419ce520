"""OpenAI Responses (``POST .../responses``): a Response object as JSON, or its typed SSE event sequence.

Keys, headers and error bodies are OpenAI's (the chat wire's). A JSON answer is a Response object
(``resp_...``, ``object: "response"``, ``status``, ``output`` items with ids, ``usage`` with its
``*_details``); an answer cut at ``max_output_tokens`` is ``status: "incomplete"`` with
``incomplete_details.reason: "max_output_tokens"``. A stream is ``event: <type>`` + ``data: {...}``
pairs, every event carrying its ``sequence_number``:

``response.created``, ``response.in_progress``, ``response.output_item.added``, then for text
``response.content_part.added``, ``response.output_text.delta`` (one per chunk), ``response.output_text.done``,
``response.content_part.done``, or for a tool call ``response.function_call_arguments.delta`` (one per chunk)
and ``.done``; then ``response.output_item.done`` and ``response.completed`` (``response.incomplete`` when
cut short) with the usage. There is no ``[DONE]`` line. A failure mid-stream is an ``error`` event followed
by ``response.failed``.
"""

from __future__ import annotations

import json
from collections.abc import Mapping
from typing import Any

from routing.simulator.compose import FINISH_LENGTH, Reply, split_text
from routing.simulator.prompt import Prompt
from routing.simulator.wire.base import (
    CONTEXT_OVERFLOW,
    Problem,
    RenderContext,
    StreamBody,
    dumps,
    json_string,
    sse_event,
)
from routing.simulator.wire.openai import OpenAIWire
from routing.simulator.wire.responses_request import parse_responses_body

_CONTEXT_MESSAGE = "Your input exceeds the context window of this model. Please adjust your input and try again."


class OpenAIResponsesWire(OpenAIWire):
    name = "openai_responses"

    def parse(self, body: Mapping[str, Any], model: str) -> Prompt:
        return parse_responses_body(body, model)

    # -- answers ------------------------------------------------------------------------------------

    def render_json(self, ctx: RenderContext, prompt: Prompt, reply: Reply) -> bytes:
        return dumps(_response(ctx, prompt, _status(reply), [_output_item(ctx, reply, done=True)], reply))

    def render_stream(self, ctx: RenderContext, prompt: Prompt, reply: Reply) -> StreamBody:
        events = _EventCounter()
        started = _response(ctx, prompt, "in_progress", [], None)
        opening = events.emit("response.created", {"response": started})
        opening += events.emit("response.in_progress", {"response": started})
        opening += events.emit("response.output_item.added",
                               {"output_index": 0, "item": _output_item(ctx, reply, done=False)})
        call = reply.tool_call
        if call is not None:
            item_id, delta_type, text = f"fc_{ctx.token}", "response.function_call_arguments.delta", call.arguments
            position = b'"output_index":0,'
        else:
            item_id, delta_type, text = f"msg_{ctx.token}", "response.output_text.delta", reply.text
            position = b'"output_index":0,"content_index":0,'
            opening += events.emit("response.content_part.added", {
                "item_id": item_id, "output_index": 0, "content_index": 0, "part": _text_part(""),
            })
        # Each delta event is spliced from precomputed bytes, not encoded, as the chat wire does.
        head = b"event: " + delta_type.encode() + b'\ndata: {"type":"' + delta_type.encode() + b'","sequence_number":'
        middle = b',"item_id":' + dumps(item_id) + b"," + position + b'"delta":'
        tail = b',"logprobs":[]}\n\n' if call is None else b"}\n\n"
        paced = []
        for piece in split_text(text, ctx.chunks):
            paced.append(head + str(events.next()).encode() + middle + json_string(piece) + tail)
        if call is not None:
            closing = events.emit("response.function_call_arguments.done", {
                "item_id": item_id, "output_index": 0, "name": call.name, "arguments": call.arguments,
            })
        else:
            closing = events.emit("response.output_text.done", {
                "item_id": item_id, "output_index": 0, "content_index": 0, "text": reply.text, "logprobs": [],
            })
            closing += events.emit("response.content_part.done", {
                "item_id": item_id, "output_index": 0, "content_index": 0, "part": _text_part(reply.text),
            })
        item = _output_item(ctx, reply, done=True)
        closing += events.emit("response.output_item.done", {"output_index": 0, "item": item})
        status = _status(reply)
        final = "response.completed" if status == "completed" else "response.incomplete"
        closing += events.emit(final, {"response": _response(ctx, prompt, status, [item], reply)})
        return StreamBody(opening, tuple(paced), closing)

    # -- errors -------------------------------------------------------------------------------------

    def _wording(self, problem: Problem) -> tuple[str, str, Any, str | None]:
        if problem.case == CONTEXT_OVERFLOW:
            return _CONTEXT_MESSAGE, "invalid_request_error", "context_length_exceeded", "input"
        return super()._wording(problem)

    def stream_error(self, problem: Problem) -> bytes:
        return self.stream_error_after(problem, StreamBody(b"", (), b""), 0)

    def stream_error_after(self, problem: Problem, stream: StreamBody, chunks: int) -> bytes:
        """An ``error`` event then ``response.failed``, numbered after the events already sent."""
        message, kind, code, param = self._wording(problem)
        message = problem.message or message
        code_text = code if isinstance(code, str) else kind
        # Every event ends with a blank line and JSON text holds no raw newline, so this counts events.
        sent = stream.opening.count(b"\n\n") + sum(chunk.count(b"\n\n") for chunk in stream.paced[:chunks])
        events = _EventCounter(sent)
        failed = _failed_response(stream.opening, {"code": code_text, "message": message})
        return (events.emit("error", {"code": code_text, "message": message, "param": param})
                + events.emit("response.failed", {"response": failed}))


class _EventCounter:
    """Numbers a stream's events from ``start`` (OpenAI's ``sequence_number``)."""

    __slots__ = ("_number",)

    def __init__(self, start: int = 0) -> None:
        self._number = start

    def next(self) -> int:
        number = self._number
        self._number += 1
        return number

    def emit(self, kind: str, fields: dict[str, Any]) -> bytes:
        return sse_event(kind, {"type": kind, "sequence_number": self.next(), **fields})


def _status(reply: Reply) -> str:
    return "incomplete" if reply.finish == FINISH_LENGTH else "completed"


def _text_part(text: str) -> dict[str, Any]:
    return {"type": "output_text", "annotations": [], "logprobs": [], "text": text}


def _output_item(ctx: RenderContext, reply: Reply, *, done: bool) -> dict[str, Any]:
    """The answer's one output item: a function call or an assistant message (empty while in progress)."""
    status = ("incomplete" if reply.finish == FINISH_LENGTH else "completed") if done else "in_progress"
    call = reply.tool_call
    if call is not None:
        return {
            "id": f"fc_{ctx.token}",
            "type": "function_call",
            "status": status,
            "arguments": call.arguments if done else "",
            "call_id": f"call_{ctx.token}",
            "name": call.name,
        }
    return {
        "id": f"msg_{ctx.token}",
        "type": "message",
        "status": status,
        "content": [_text_part(reply.text)] if done else [],
        "role": "assistant",
    }


def _response(ctx: RenderContext, prompt: Prompt, status: str, output: list[dict[str, Any]],
              reply: Reply | None) -> dict[str, Any]:
    """The Response object; ``reply`` None while in progress (no usage yet)."""
    echo = dict(prompt.echo or {})
    return {
        "id": f"resp_{ctx.token}",
        "object": "response",
        "created_at": ctx.created,
        "status": status,
        "background": False,
        "completed_at": ctx.created if status == "completed" else None,
        "error": None,
        "incomplete_details": {"reason": "max_output_tokens"} if status == "incomplete" else None,
        "instructions": echo.pop("instructions", None),
        "max_output_tokens": echo.pop("max_output_tokens", None),
        "max_tool_calls": None,
        "model": ctx.model,
        "output": output,
        "parallel_tool_calls": echo.pop("parallel_tool_calls", True),
        "previous_response_id": None,
        "prompt_cache_key": None,
        "safety_identifier": None,
        "service_tier": "default",
        "top_logprobs": 0,
        **echo,
        "usage": _usage(reply) if reply is not None else None,
    }


def _failed_response(opening: bytes, error: dict[str, Any]) -> dict[str, Any]:
    """The Response object of a failed stream: the one ``response.created`` carried, failed, with ``error``.

    Falls back to a bare object when the opening is not at hand (a stream error without its stream).
    """
    marker = b"event: response.created\ndata: "
    start = opening.find(marker)
    if start >= 0:
        end = opening.find(b"\n", start + len(marker))
        response = json.loads(opening[start + len(marker):end])["response"]
    else:
        response = {"object": "response", "output": [], "usage": None}
    return {**response, "status": "failed", "error": error}


def _usage(reply: Reply) -> dict[str, Any]:
    usage = reply.usage
    return {
        "input_tokens": usage.input_tokens,
        "input_tokens_details": {"cached_tokens": usage.cached_tokens, "cache_write_tokens": 0},
        "output_tokens": usage.output_tokens,
        "output_tokens_details": {"reasoning_tokens": usage.reasoning_tokens},
        "total_tokens": usage.input_tokens + usage.output_tokens,
    }

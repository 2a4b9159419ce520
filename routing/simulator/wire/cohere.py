"""Cohere Chat v2 (``POST /v2/chat``): request parsing, JSON and SSE answers, errors.

The key comes as ``Authorization: Bearer``. The body's ``stream`` decides between a JSON answer and an
SSE stream of typed events (``message-start``, ``content-start``, ``content-delta``, ``content-end``,
``tool-plan-delta``, ``tool-call-start``, ``tool-call-delta``, ``tool-call-end``, ``message-end``), each
sent with its type as the SSE event name too. Usage is reported twice, as Cohere does: ``billed_units``
(what is charged) and ``tokens`` (the model's own count, which includes the prompt template Cohere adds).
Errors are ``{"id", "message"}``; a failure mid-stream is a ``message-end`` with finish reason ERROR.
"""

from __future__ import annotations

from collections.abc import Mapping
from typing import Any

from routing.simulator.compose import FINISH_LENGTH, FINISH_STOP_SEQUENCE, FINISH_TOOL_CALLS, Reply, split_text
from routing.simulator.prompt import Prompt, TextTally, ToolSpec, fingerprint, positive_int, string_list
from routing.simulator.wire.base import (
    CONTEXT_OVERFLOW,
    INVALID_JSON,
    INVALID_KEY,
    INVALID_REQUEST,
    MISSING_KEY,
    MODEL_NOT_FOUND,
    PERMISSION,
    QUOTA,
    RATE_LIMIT,
    UNKNOWN_PATH,
    ErrorReply,
    Headers,
    Problem,
    RenderContext,
    RequestError,
    StreamBody,
    WireFormat,
    dumps,
    json_string,
    sse_event,
)

_ROLES = ("system", "user", "assistant", "tool")
# Tokens of the prompt template Cohere wraps a conversation in: counted in ``tokens``, never billed.
TEMPLATE_TOKENS = 7
_THINKING_TOKENS = 256
_RATE_LIMIT_MESSAGE = (
    "You are using a Trial key, which is limited to 20 API calls / minute. You can continue to use the Trial "
    "key for free or upgrade to a Production key with higher rate limits at "
    "'https://dashboard.cohere.com/api-keys'. Contact us on 'https://discord.gg/XW44jPfYJu' or email us at "
    "support@cohere.com with any questions"
)
_QUOTA_MESSAGE = (
    "Please add or update your payment method at https://dashboard.cohere.com/billing?tab=payment to continue"
)


class CohereWire(WireFormat):
    name = "cohere"

    def credentials(self, headers: Mapping[str, str], query: Mapping[str, str]) -> tuple[str | None, str | None]:
        authorization = headers.get("authorization", "")
        if authorization[:7].lower() == "bearer " and authorization[7:].strip():
            return "authorization", authorization[7:].strip()
        return None, None

    # -- request ------------------------------------------------------------------------------------

    def parse(self, body: Mapping[str, Any], model: str) -> Prompt:
        if not model:
            raise RequestError("invalid request: model must be specified", "model")
        messages = body.get("messages")
        if not isinstance(messages, list) or not messages:
            raise RequestError("invalid request: messages must be a non-empty list", "messages")
        tally = TextTally()
        tools = _tools(body.get("tools"), tally)
        tool_choice = _tool_choice(body.get("tool_choice"), tools)
        last_user = ""
        prefix = (0, 0)
        for index, message in enumerate(messages):
            if index == len(messages) - 1:
                prefix = (tally.chars, tally.attachments)
            role = message.get("role") if isinstance(message, Mapping) else None
            if role not in _ROLES:
                raise RequestError(
                    f"invalid request: messages[{index}].role must be one of system, user, assistant, tool",
                    f"messages[{index}].role",
                )
            assert isinstance(message, Mapping)
            text = _content_text(message.get("content"), tally)
            tally.text(message.get("tool_plan"))
            for call in message.get("tool_calls") or []:
                tally.json(call.get("function") if isinstance(call, Mapping) else call)
            if role in ("user", "tool"):
                last_user = text
        schema, json_mode = _response_format(body.get("response_format"))
        thinking = body.get("thinking")
        thinking_on = isinstance(thinking, Mapping) and thinking.get("type") == "enabled"
        budget = positive_int(thinking.get("token_budget")) if isinstance(thinking, Mapping) else None
        return Prompt(
            model=model,
            last_user_text=last_user,
            input_chars=tally.chars,
            message_count=len(messages),
            attachments=tally.attachments,
            tools=tools,
            tool_choice=tool_choice,
            answers_tool_result=messages[-1].get("role") == "tool",
            output_schema=schema,
            json_mode=json_mode,
            max_tokens=positive_int(body.get("max_tokens")),
            stop_sequences=string_list(body.get("stop_sequences")),
            stream=body.get("stream") is True,
            reasoning_tokens=min(budget or _THINKING_TOKENS, _THINKING_TOKENS) if thinking_on else 0,
            reasoning_visible=thinking_on,
            prefix_key=fingerprint(body.get("tools"), messages[:-1]) if len(messages) > 1 or tools else None,
            prefix_chars=prefix[0],
            prefix_attachments=prefix[1],
            prefix_messages=len(messages) - 1,
        )

    # -- answers ------------------------------------------------------------------------------------

    def render_json(self, ctx: RenderContext, prompt: Prompt, reply: Reply) -> bytes:
        content: list[dict[str, Any]] = []
        if reply.reasoning_text:
            content.append({"type": "thinking", "thinking": reply.reasoning_text})
        if reply.text:
            content.append({"type": "text", "text": reply.text})
        message: dict[str, Any] = {"role": "assistant", "content": content}
        if reply.tool_call is not None:
            message["tool_calls"] = [_tool_call(ctx, reply)]
            message["content"] = [item for item in content if item["type"] == "thinking"]
            if reply.text:
                message["tool_plan"] = reply.text
        return dumps({
            "id": _response_id(ctx),
            "finish_reason": _finish(reply),
            "message": message,
            "usage": _usage(reply),
        })

    def render_stream(self, ctx: RenderContext, prompt: Prompt, reply: Reply) -> StreamBody:
        opening = sse_event("message-start", {
            "id": _response_id(ctx),
            "type": "message-start",
            "delta": {"message": {"role": "assistant", "content": [], "tool_plan": "", "tool_calls": [],
                                  "citations": []}},
        })
        paced: list[bytes] = []
        blocks = []
        if reply.reasoning_text:
            blocks.append(("thinking", reply.reasoning_text))
        if reply.text and reply.tool_call is None:
            blocks.append(("text", reply.text))
        for index, (kind, text) in enumerate(blocks):
            start = sse_event("content-start", {
                "type": "content-start", "index": index,
                "delta": {"message": {"content": {"type": kind, kind: ""}}},
            })
            events = [_content_delta(index, kind, piece) for piece in split_text(text, ctx.chunks)]
            events[0] = start + events[0]
            events[-1] += sse_event("content-end", {"type": "content-end", "index": index})
            paced.extend(events)
        if reply.tool_call is not None:
            if reply.text:
                paced.extend(sse_event("tool-plan-delta", {"type": "tool-plan-delta", "delta": {
                    "message": {"tool_plan": piece}}}) for piece in split_text(reply.text, ctx.chunks))
            call = _tool_call(ctx, reply)
            start = sse_event("tool-call-start", {"type": "tool-call-start", "index": 0, "delta": {"message": {
                "tool_calls": {**call, "function": {"name": call["function"]["name"], "arguments": ""}}}}})
            events = [sse_event("tool-call-delta", {"type": "tool-call-delta", "index": 0, "delta": {"message": {
                "tool_calls": {"function": {"arguments": piece}}}}})
                for piece in split_text(reply.tool_call.arguments, ctx.chunks)] or [b""]
            events[0] = start + events[0]
            events[-1] += sse_event("tool-call-end", {"type": "tool-call-end", "index": 0})
            paced.extend(events)
        closing = sse_event("message-end", {
            "type": "message-end",
            "delta": {"finish_reason": _finish(reply), "usage": _usage(reply)},
        })
        return StreamBody(opening, tuple(paced), closing)

    def response_headers(self, ctx: RenderContext) -> Headers:
        return [(b"x-request-id", ctx.token.encode())]

    # -- errors -------------------------------------------------------------------------------------

    def error(self, problem: Problem) -> ErrorReply:
        status, message = self._wording(problem)
        return ErrorReply(status, dumps({"id": _uuid(problem.model or "e"), "message": message}))

    def stream_error(self, problem: Problem) -> bytes:
        _, message = self._wording(problem)
        return sse_event("message-end", {"type": "message-end", "delta": {"finish_reason": "ERROR", "error": message}})

    def _wording(self, problem: Problem) -> tuple[int, str]:
        """(status, message) as Cohere words the problem."""
        case, status = problem.case, problem.status
        if problem.message:
            return status, problem.message
        if case == INVALID_JSON:
            return 400, "invalid request: unable to parse the request body as JSON"
        if case == MISSING_KEY:
            return 401, "no api key supplied"
        if case == INVALID_KEY:
            return 401, "invalid api token"
        if case == PERMISSION:
            return 403, "forbidden: this key does not have access to this model"
        if case == MODEL_NOT_FOUND:
            return 404, (f"model '{problem.model}' not found, make sure the correct model ID was used and that "
                         "you have access to the model.")
        if case == RATE_LIMIT:
            return 429, _RATE_LIMIT_MESSAGE
        if case == QUOTA:
            return 402, _QUOTA_MESSAGE
        if case == CONTEXT_OVERFLOW:
            return 400, (f"too many tokens: the total number of tokens in the prompt cannot exceed {problem.limit} "
                         f"- received {problem.tokens}. Try using a shorter prompt, or enabling prompt truncating.")
        if case == UNKNOWN_PATH:
            return 404, f"path not found: {problem.path}"
        if case == INVALID_REQUEST:
            return status, "invalid request"
        if status == 503:
            return status, "service unavailable, please try again later"
        if status == 504:
            return status, "request timed out"
        return status, "internal server error, this has been reported to our developers"


def _content_delta(index: int, kind: str, piece: str) -> bytes:
    field = kind.encode("ascii")
    return (b'event: content-delta\ndata: {"type":"content-delta","index":' + str(index).encode()
            + b',"delta":{"message":{"content":{"' + field + b'":' + json_string(piece) + b"}}}}\n\n")


def _uuid(token: str) -> str:
    hexed = (token.encode().hex() + "0" * 32)[:32]
    return f"{hexed[:8]}-{hexed[8:12]}-{hexed[12:16]}-{hexed[16:20]}-{hexed[20:32]}"


def _response_id(ctx: RenderContext) -> str:
    token = (ctx.token + "0" * 32)[:32]
    return f"{token[:8]}-{token[8:12]}-{token[12:16]}-{token[16:20]}-{token[20:32]}"


def _tool_call(ctx: RenderContext, reply: Reply) -> dict[str, Any]:
    assert reply.tool_call is not None
    name = reply.tool_call.name
    return {"id": f"{name}_{ctx.token[:12]}", "type": "function",
            "function": {"name": name, "arguments": reply.tool_call.arguments}}


def _finish(reply: Reply) -> str:
    if reply.finish == FINISH_LENGTH:
        return "MAX_TOKENS"
    if reply.finish == FINISH_TOOL_CALLS:
        return "TOOL_CALL"
    if reply.finish == FINISH_STOP_SEQUENCE:
        return "STOP_SEQUENCE"
    return "COMPLETE"


def _usage(reply: Reply) -> dict[str, Any]:
    usage = reply.usage
    out: dict[str, Any] = {
        "billed_units": {"input_tokens": usage.input_tokens, "output_tokens": usage.output_tokens},
        "tokens": {"input_tokens": usage.input_tokens + TEMPLATE_TOKENS, "output_tokens": usage.output_tokens},
    }
    if usage.cached_tokens:
        out["cached_tokens"] = usage.cached_tokens
    return out


def _content_text(content: Any, tally: TextTally) -> str:
    return tally.parts(content, text_kinds=("text",), attachment_kinds=("image_url", "document"), refusals=False)


def _tools(raw: Any, tally: TextTally) -> tuple[ToolSpec, ...]:
    if raw is None:
        return ()
    if not isinstance(raw, list):
        raise RequestError("invalid request: tools must be a list", "tools")
    tally.json(raw)
    tools = []
    for index, tool in enumerate(raw):
        function = tool.get("function") if isinstance(tool, Mapping) else None
        name = function.get("name") if isinstance(function, Mapping) else None
        if not isinstance(name, str) or not name:
            raise RequestError(f"invalid request: tools[{index}].function.name is required",
                               f"tools[{index}].function.name")
        assert isinstance(function, Mapping)
        parameters = function.get("parameters")
        tools.append(ToolSpec(name, parameters if isinstance(parameters, Mapping) else {"type": "object"}))
    return tuple(tools)


def _tool_choice(raw: Any, tools: tuple[ToolSpec, ...]) -> str:
    if raw is None:
        return "auto"
    if raw not in ("REQUIRED", "NONE"):
        raise RequestError("invalid request: tool_choice must be one of REQUIRED, NONE", "tool_choice")
    if not tools:
        raise RequestError("invalid request: tool_choice can only be set when tools are given", "tool_choice")
    return "required" if raw == "REQUIRED" else "none"


def _response_format(raw: Any) -> tuple[Mapping[str, Any] | None, bool]:
    if not isinstance(raw, Mapping):
        return None, False
    if raw.get("type") != "json_object":
        return None, False
    schema = raw.get("json_schema")
    return (schema, False) if isinstance(schema, Mapping) else (None, True)

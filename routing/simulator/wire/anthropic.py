"""Anthropic Messages (``POST /v1/messages``): request parsing, JSON and SSE answers, errors.

Requires a key (``x-api-key``, or ``Authorization: Bearer`` as newer SDKs send it) and ``anthropic-version``.
Streams use Anthropic's named events (``message_start``, ``content_block_start``, ``ping``,
``content_block_delta``, ``content_block_stop``, ``message_delta``, ``message_stop``; ``error`` when failing
mid-stream). Usage follows Anthropic's arithmetic: ``input_tokens``
excludes the tokens read from or written to the prompt cache, which are reported apart. The conversation
rules Anthropic enforces (tool_use answered by tool_result, ids, signed thinking opening a final tool turn while
thinking is on) are checked by anthropic_rules; thinking blocks carry a signature it can verify.
"""

from __future__ import annotations

import json
import secrets
from collections.abc import Mapping, Sequence
from typing import Any

from routing.simulator.compose import FINISH_LENGTH, FINISH_STOP_SEQUENCE, FINISH_TOOL_CALLS, Reply, split_text
from routing.simulator.prompt import Prompt, TextTally, ToolSpec, fingerprint, positive_int, string_list
from routing.simulator.wire.anthropic_rules import REDACTED_TRIGGER, check_conversation, redacted_data, sign_thinking
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

_ATTACHMENT_BLOCKS = ("image", "document", "search_result", "container_upload")
_RATE_LIMIT_MESSAGE = (
    "This request would exceed the rate limit for your organization of 50 requests per minute. For "
    "details, refer to: https://docs.claude.com/en/api/rate-limits. You can see the response headers for "
    "current usage. Please reduce the prompt length or the maximum tokens requested, or try again later. "
    "You may also contact sales at https://www.anthropic.com/contact-sales to discuss your options for a "
    "rate limit increase."
)
_QUOTA_MESSAGE = (
    "Your credit balance is too low to access the Anthropic API. Please go to Plans & Billing to upgrade "
    "or purchase credits."
)
_PING = sse_event("ping", {"type": "ping"})


class AnthropicWire(WireFormat):
    name = "anthropic"

    def credentials(self, headers: Mapping[str, str], query: Mapping[str, str]) -> tuple[str | None, str | None]:
        if headers.get("x-api-key"):
            return "x-api-key", headers["x-api-key"]
        authorization = headers.get("authorization", "")  # newer SDKs send the key as a bearer token
        if authorization[:7].lower() == "bearer " and authorization[7:].strip():
            return "authorization", authorization[7:].strip()
        return None, None

    def precheck(self, headers: Mapping[str, str], query: Mapping[str, str], model: str) -> Problem | None:
        if not headers.get("anthropic-version"):
            return Problem(INVALID_REQUEST, 400, model=model, message="anthropic-version: header is required")
        return None

    # -- request ------------------------------------------------------------------------------------

    def parse(self, body: Mapping[str, Any], model: str) -> Prompt:
        for field in ("model", "max_tokens", "messages"):
            if field not in body:
                raise RequestError(f"{field}: Field required", field)
        max_tokens = positive_int(body.get("max_tokens"))
        if max_tokens is None:
            raise RequestError("max_tokens: Input should be a valid integer greater than 0", "max_tokens")
        messages = body["messages"]
        if not isinstance(messages, list) or not messages:
            raise RequestError("messages: at least one message is required", "messages")
        tally = TextTally()
        explicit_cache = "cache_control" in body
        system = body.get("system")
        if isinstance(system, list):
            explicit_cache |= any(isinstance(b, Mapping) and "cache_control" in b for b in system)
            _blocks_text(system, tally)
        else:
            tally.text(system)
        tools = _tools(body.get("tools"), tally)
        explicit_cache |= any("cache_control" in t for t in body.get("tools") or [] if isinstance(t, Mapping))
        tool_choice, forced = _tool_choice(body.get("tool_choice"), tools)
        prefix = (0, 0)
        last_text = ""
        answers_tool = False
        for index, message in enumerate(messages):
            if index == len(messages) - 1:
                prefix = (tally.chars, tally.attachments)
            if not isinstance(message, Mapping) or message.get("role") not in ("user", "assistant"):
                raise RequestError(
                    f"messages.{index}.role: Input should be 'user' or 'assistant'", f"messages.{index}.role"
                )
            content = message.get("content")
            if isinstance(content, list):
                explicit_cache |= any(isinstance(b, Mapping) and "cache_control" in b for b in content)
                text, has_result = _blocks_text(content, tally)
            else:
                text, has_result = tally.text(content), False
            if message["role"] == "user":
                last_text, answers_tool = text, has_result
        thinking = body.get("thinking")
        thinking_on = isinstance(thinking, Mapping) and thinking.get("type") in ("enabled", "adaptive")
        if isinstance(thinking, Mapping) and thinking.get("type") == "enabled":
            budget = positive_int(thinking.get("budget_tokens"))
            if budget is None or budget >= max_tokens:
                raise RequestError(
                    "`max_tokens` must be greater than `thinking.budget_tokens`.", "thinking.budget_tokens"
                )
        check_conversation(messages, thinking_on=thinking_on)
        return Prompt(
            model=model,
            last_user_text=last_text,
            input_chars=tally.chars,
            message_count=len(messages),
            attachments=tally.attachments,
            tools=tools,
            tool_choice=tool_choice,
            forced_tool=forced,
            answers_tool_result=answers_tool and messages[-1].get("role") == "user",
            output_schema=_output_schema(body),
            max_tokens=max_tokens,
            stop_sequences=string_list(body.get("stop_sequences")),
            stream=body.get("stream") is True,
            reasoning_visible=thinking_on,
            prefix_key=fingerprint(system, body.get("tools"), messages[:-1]),
            prefix_chars=prefix[0],
            prefix_attachments=prefix[1],
            prefix_messages=len(messages) - 1,
            explicit_cache=explicit_cache,
        )

    # -- answers ------------------------------------------------------------------------------------

    def render_json(self, ctx: RenderContext, prompt: Prompt, reply: Reply) -> bytes:
        content: list[dict[str, Any]] = []
        if reply.reasoning_text and REDACTED_TRIGGER in prompt.last_user_text:
            content.append({"type": "redacted_thinking", "data": redacted_data(ctx.token)})
        if reply.reasoning_text:
            content.append({"type": "thinking", "thinking": reply.reasoning_text,
                            "signature": sign_thinking(ctx.token, reply.reasoning_text)})
        if reply.text:
            content.append({"type": "text", "text": reply.text})
        if reply.tool_call is not None:
            content.append({
                "type": "tool_use",
                "id": f"toolu_01{ctx.token}",
                "name": reply.tool_call.name,
                "input": _parsed_arguments(reply.tool_call.arguments),
            })
        return dumps({
            "id": f"msg_01{ctx.token}",
            "type": "message",
            "role": "assistant",
            "model": ctx.model,
            "content": content,
            "stop_reason": _stop_reason(reply),
            "stop_sequence": reply.stop_sequence,
            "usage": {**_input_usage(reply), "output_tokens": reply.usage.output_tokens},
        })

    def render_stream(self, ctx: RenderContext, prompt: Prompt, reply: Reply) -> StreamBody:
        # Each block: its start, and its pieces as (delta type, field, text) spliced into precomputed bytes.
        blocks: list[tuple[dict[str, Any], list[tuple[bytes, bytes, str]]]] = []
        if reply.reasoning_text and REDACTED_TRIGGER in prompt.last_user_text:
            blocks.append(({"type": "redacted_thinking", "data": redacted_data(ctx.token)}, []))
        if reply.reasoning_text:
            deltas = [(b"thinking_delta", b"thinking", p) for p in split_text(reply.reasoning_text, ctx.chunks)]
            deltas.append((b"signature_delta", b"signature", sign_thinking(ctx.token, reply.reasoning_text)))
            blocks.append(({"type": "thinking", "thinking": "", "signature": ""}, deltas))
        if reply.text:
            deltas = [(b"text_delta", b"text", p) for p in split_text(reply.text, ctx.chunks)]
            blocks.append(({"type": "text", "text": ""}, deltas))
        if reply.tool_call is not None:
            call = reply.tool_call
            deltas = [(b"input_json_delta", b"partial_json", p) for p in split_text(call.arguments, ctx.chunks)]
            blocks.append(({"type": "tool_use", "id": f"toolu_01{ctx.token}", "name": call.name, "input": {}}, deltas))

        start = sse_event("message_start", {
            "type": "message_start",
            "message": {
                "id": f"msg_01{ctx.token}",
                "type": "message",
                "role": "assistant",
                "model": ctx.model,
                "content": [],
                "stop_reason": None,
                "stop_sequence": None,
                "usage": {**_input_usage(reply), "output_tokens": 1},
            },
        })
        paced: list[bytes] = []
        opening = start
        for index, (block, deltas) in enumerate(blocks):
            block_start = sse_event("content_block_start", {
                "type": "content_block_start", "index": index, "content_block": block,
            })
            events = [_delta_event(index, kind, field, piece) for kind, field, piece in deltas] or [b""]
            if index == 0:
                opening += block_start + _PING
            else:
                events[0] = block_start + events[0]
            events[-1] += sse_event("content_block_stop", {"type": "content_block_stop", "index": index})
            paced.extend(events)
        if not blocks:
            opening += _PING
        closing = sse_event("message_delta", {
            "type": "message_delta",
            "delta": {"stop_reason": _stop_reason(reply), "stop_sequence": reply.stop_sequence},
            "usage": {"output_tokens": reply.usage.output_tokens},
        }) + sse_event("message_stop", {"type": "message_stop"})
        return StreamBody(opening, tuple(paced), closing)

    def response_headers(self, ctx: RenderContext) -> Headers:
        return [(b"request-id", f"req_01{ctx.token}".encode())]

    def render_models(self, models: Sequence[tuple[str, int]]) -> bytes:
        data = [
            {"type": "model", "id": name, "display_name": name, "created_at": "2025-01-01T00:00:00Z"}
            for name, _ in models
        ]
        return dumps({
            "data": data,
            "has_more": False,
            "first_id": data[0]["id"] if data else None,
            "last_id": data[-1]["id"] if data else None,
        })

    # -- errors -------------------------------------------------------------------------------------

    def error(self, problem: Problem) -> ErrorReply:
        status, kind, message = self._wording(problem)
        body = {
            "type": "error",
            "error": {"type": kind, "message": problem.message or message},
            "request_id": f"req_01{secrets.token_hex(12)}",
        }
        return ErrorReply(status, dumps(body))

    def stream_error(self, problem: Problem) -> bytes:
        _, kind, message = self._wording(problem)
        return sse_event("error", {"type": "error", "error": {"type": kind, "message": problem.message or message}})

    def _wording(self, problem: Problem) -> tuple[int, str, str]:
        """(status, error type, message) as Anthropic words the problem."""
        case, status = problem.case, problem.status
        if case == INVALID_JSON:
            return 400, "invalid_request_error", "There was an error parsing the body of your request."
        if case == INVALID_REQUEST and status == 413:
            return 413, "request_too_large", "Request exceeds the maximum allowed number of bytes."
        if case == INVALID_REQUEST:
            return status, "invalid_request_error", "Invalid request."
        if case == MISSING_KEY:
            return 401, "authentication_error", "x-api-key header is required"
        if case == INVALID_KEY:
            return 401, "authentication_error", "invalid x-api-key"
        if case == PERMISSION:
            return 403, "permission_error", "Your API key does not have permission to use the specified resource."
        if case == MODEL_NOT_FOUND:
            return 404, "not_found_error", f"model: {problem.model}"
        if case == RATE_LIMIT:
            return 429, "rate_limit_error", _RATE_LIMIT_MESSAGE
        if case == QUOTA:  # Anthropic answers an empty balance with a 400, not a 429
            return 400, "invalid_request_error", _QUOTA_MESSAGE
        if case == CONTEXT_OVERFLOW:
            message = f"prompt is too long: {problem.tokens} tokens > {problem.limit} maximum"
            return 400, "invalid_request_error", message
        if case == UNKNOWN_PATH:
            return 404, "not_found_error", "Not Found"
        if status in (503, 529):
            return status, "overloaded_error", "Overloaded"
        if status == 504:
            return status, "timeout_error", "Request timeout"
        return status, "api_error", "Internal server error"


def _delta_event(index: int, kind: bytes, field: bytes, piece: str) -> bytes:
    """One ``content_block_delta`` event, the same bytes sse_event would encode."""
    return (
        b'event: content_block_delta\ndata: {"type":"content_block_delta","index":%d,"delta":{"type":"%s","%s":'
        % (index, kind, field) + json_string(piece) + b"}}\n\n"
    )


def _blocks_text(blocks: list[Any], tally: TextTally) -> tuple[str, bool]:
    """(the text of a block list, whether it holds a tool result), counting text and attachments."""
    texts: list[str] = []
    has_result = False
    for block in blocks:
        if not isinstance(block, Mapping):
            continue
        kind = block.get("type")
        if kind == "text":
            texts.append(tally.text(block.get("text")))
        elif kind in _ATTACHMENT_BLOCKS:
            tally.attachment()
        elif kind == "tool_use":
            tally.json(block.get("input"))
        elif kind == "tool_result":
            has_result = True
            content = block.get("content")
            if isinstance(content, list):
                texts.append(_blocks_text(content, tally)[0])
            else:
                texts.append(tally.text(content))
        elif kind == "thinking":
            tally.text(block.get("thinking"))
    return "\n".join(text for text in texts if text), has_result


def _tools(raw: Any, tally: TextTally) -> tuple[ToolSpec, ...]:
    if raw is None:
        return ()
    if not isinstance(raw, list):
        raise RequestError("tools: Input should be a valid list", "tools")
    tally.json(raw)
    tools = []
    for index, tool in enumerate(raw):
        if not isinstance(tool, Mapping) or not isinstance(tool.get("name"), str):
            raise RequestError(f"tools.{index}.name: Field required", f"tools.{index}.name")
        schema = tool.get("input_schema")
        if schema is None and "type" in tool:  # a server tool (web search, code execution): not callable here
            continue
        if not isinstance(schema, Mapping):
            raise RequestError(f"tools.{index}.input_schema: Field required", f"tools.{index}.input_schema")
        tools.append(ToolSpec(tool["name"], schema))
    return tuple(tools)


def _tool_choice(raw: Any, tools: tuple[ToolSpec, ...]) -> tuple[str, str | None]:
    if not isinstance(raw, Mapping):
        return "auto", None
    kind = raw.get("type")
    if kind == "none":
        return "none", None
    if kind == "any":
        return "required", None
    if kind == "tool":
        name = raw.get("name")
        if name not in {tool.name for tool in tools}:
            raise RequestError(f"Tool '{name}' not found in provided tools", "tool_choice.name")
        return "required", name
    return "auto", None


def _output_schema(body: Mapping[str, Any]) -> Mapping[str, Any] | None:
    """The JSON schema of structured outputs (``output_format`` or ``output_config.format``), if any."""
    spec = body.get("output_format")
    config = body.get("output_config")
    if spec is None and isinstance(config, Mapping):
        spec = config.get("format")
    schema = spec.get("schema") if isinstance(spec, Mapping) and spec.get("type") == "json_schema" else None
    return schema if isinstance(schema, Mapping) else None


def _stop_reason(reply: Reply) -> str:
    if reply.finish == FINISH_LENGTH:
        return "max_tokens"
    if reply.finish == FINISH_TOOL_CALLS:
        return "tool_use"
    if reply.finish == FINISH_STOP_SEQUENCE:
        return "stop_sequence"
    return "end_turn"


def _input_usage(reply: Reply) -> dict[str, Any]:
    usage = reply.usage
    fresh = max(usage.input_tokens - usage.cached_tokens - usage.cache_creation_tokens, 0)
    return {
        "input_tokens": fresh,
        "cache_creation_input_tokens": usage.cache_creation_tokens,
        "cache_read_input_tokens": usage.cached_tokens,
        "cache_creation": {"ephemeral_5m_input_tokens": usage.cache_creation_tokens, "ephemeral_1h_input_tokens": 0},
        "service_tier": "standard",
    }


def _parsed_arguments(arguments: str) -> Any:
    """Tool input as an object; a truncated argument text (not JSON) becomes ``{}``, as a cut-off block does."""
    try:
        value = json.loads(arguments)
    except ValueError:
        return {}
    return value


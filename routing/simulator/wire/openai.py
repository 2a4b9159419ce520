"""OpenAI chat completions (``POST .../chat/completions``): request parsing, JSON and SSE answers, errors.

Also the base of Azure OpenAI, which speaks the same body with a different envelope around it.
"""

from __future__ import annotations

from collections.abc import Mapping
from typing import Any

from routing.simulator.compose import FINISH_LENGTH, FINISH_TOOL_CALLS, Reply, split_text
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
    sse_data,
)
from routing.simulator.wire.openai_rules import check_chat_tool_messages

_ROLES = ("system", "developer", "user", "assistant", "tool", "function")
_ATTACHMENT_PARTS = ("image_url", "input_audio", "file", "input_image", "input_file")
# Hidden reasoning tokens reported for each reasoning_effort.
_REASONING_TOKENS = {"none": 0, "minimal": 0, "low": 64, "medium": 256, "high": 1024, "xhigh": 2048}
_SYSTEM_FINGERPRINT = "fp_simulator"
_DONE = b"data: [DONE]\n\n"

_INVALID_JSON_MESSAGE = (
    "We could not parse the JSON body of your request. (HINT: This likely means you aren't using your HTTP "
    "library correctly. The OpenAI API expects a JSON payload, but what was sent was not valid JSON. If you "
    "have trouble figuring out how to fix this, please contact us through our help center at "
    "help.openai.com.)"
)
_MISSING_KEY_MESSAGE = (
    "You didn't provide an API key. You need to provide your API key in an Authorization header using "
    "Bearer auth (i.e. Authorization: Bearer YOUR_KEY), or as the password field (with blank username) if "
    "you're accessing the API from your browser and are prompted for a username. You can obtain an API "
    "key from https://platform.openai.com/account/api-keys."
)
_QUOTA_MESSAGE = (
    "You exceeded your current quota, please check your plan and billing details. For more information "
    "on this error, read the docs: https://platform.openai.com/docs/guides/error-codes/api-errors."
)


class OpenAIWire(WireFormat):
    name = "openai"
    requires_key = False  # OpenAI-compatible local servers (vLLM, Ollama) run without keys

    def credentials(self, headers: Mapping[str, str], query: Mapping[str, str]) -> tuple[str | None, str | None]:
        authorization = headers.get("authorization", "")
        if authorization[:7].lower() == "bearer " and authorization[7:].strip():
            return "authorization", authorization[7:].strip()
        if headers.get("api-key"):
            return "api-key", headers["api-key"]
        return None, None

    # -- request ------------------------------------------------------------------------------------

    def parse(self, body: Mapping[str, Any], model: str) -> Prompt:
        if not model:
            raise RequestError("you must provide a model parameter", "model")
        messages = body.get("messages")
        if messages is None:
            raise RequestError("Missing required parameter: 'messages'.", "messages")
        if not isinstance(messages, list) or not messages:
            raise RequestError(f"Invalid 'messages': {messages!r} is too short - 'messages'.", "messages")
        tally = TextTally()
        tools = _tools(body.get("tools"), tally)
        tool_choice, forced = _tool_choice(body.get("tool_choice"), tools)
        last_user = ""
        prefix = (0, 0)
        for index, message in enumerate(messages):
            if index == len(messages) - 1:
                prefix = (tally.chars, tally.attachments)
            if not isinstance(message, Mapping):
                raise RequestError(f"Invalid type for 'messages[{index}]': expected an object.", f"messages[{index}]")
            role = message.get("role")
            if role not in _ROLES:
                raise RequestError(
                    f"Invalid value: {role!r}. Supported values are: 'system', 'assistant', 'user', "
                    "'function', 'tool', and 'developer'.",
                    f"messages[{index}].role",
                )
            text = _content_text(message.get("content"), tally)
            for call in message.get("tool_calls") or []:
                tally.json(call.get("function") if isinstance(call, Mapping) else call)
            if role in ("user", "tool", "function"):
                last_user = text
        check_chat_tool_messages(messages)
        last_role = messages[-1].get("role")
        schema, json_mode = _response_format(body.get("response_format"))
        effort = body.get("reasoning_effort")
        return Prompt(
            model=model,
            last_user_text=last_user,
            input_chars=tally.chars,
            message_count=len(messages),
            attachments=tally.attachments,
            tools=tools,
            tool_choice=tool_choice,
            forced_tool=forced,
            answers_tool_result=last_role in ("tool", "function"),
            output_schema=schema,
            json_mode=json_mode,
            max_tokens=positive_int(body.get("max_completion_tokens")) or positive_int(body.get("max_tokens")),
            stop_sequences=string_list(body.get("stop")),
            stream=body.get("stream") is True,
            include_usage=_include_usage(body.get("stream_options")),
            choices=min(positive_int(body.get("n")) or 1, 16),
            reasoning_tokens=_REASONING_TOKENS.get(effort, 0) if isinstance(effort, str) else 0,
            prefix_key=fingerprint(body.get("tools"), messages[:-1]) if len(messages) > 1 or tools else None,
            prefix_chars=prefix[0],
            prefix_attachments=prefix[1],
            prefix_messages=len(messages) - 1,
        )

    # -- answers ------------------------------------------------------------------------------------

    def render_json(self, ctx: RenderContext, prompt: Prompt, reply: Reply) -> bytes:
        message: dict[str, Any] = {"role": "assistant", "content": reply.text, "refusal": None, "annotations": []}
        if reply.tool_call is not None:
            message["content"] = reply.text or None
            message["tool_calls"] = [self._tool_call(ctx, reply)]
        choices = [
            self._decorate_choice({
                "index": index,
                "message": message,
                "logprobs": None,
                "finish_reason": _finish(reply),
            })
            for index in range(prompt.choices)
        ]
        body = {
            "id": f"chatcmpl-{ctx.token}",
            "object": "chat.completion",
            "created": ctx.created,
            "model": ctx.model,
            "choices": choices,
            "usage": _usage(reply),
            "service_tier": "default",
            "system_fingerprint": _SYSTEM_FINGERPRINT,
        }
        return dumps(self._decorate_completion(body))

    def render_stream(self, ctx: RenderContext, prompt: Prompt, reply: Reply) -> StreamBody:
        head = (
            b'data: {"id":' + dumps(f"chatcmpl-{ctx.token}")
            + b',"object":"chat.completion.chunk","created":' + str(ctx.created).encode()
            + b',"model":' + dumps(ctx.model)
            + b',"service_tier":"default","system_fingerprint":"' + _SYSTEM_FINGERPRINT.encode() + b'","choices":'
        )
        tail = b',"usage":null}\n\n' if prompt.include_usage else b"}\n\n"
        indexes = range(prompt.choices)

        def chunk(deltas: list[dict[str, Any]], finish: str | None = None) -> bytes:
            choices = [
                {"index": index, "delta": delta, "logprobs": None, "finish_reason": finish}
                for index in indexes for delta in deltas
            ]
            return head + dumps(choices) + tail

        call = reply.tool_call
        if call is not None:
            opening_delta: dict[str, Any] = {
                "role": "assistant",
                "content": None,
                "tool_calls": [{
                    "index": 0,
                    "id": f"call_{ctx.token}",
                    "type": "function",
                    "function": {"name": call.name, "arguments": ""},
                }],
                "refusal": None,
            }
            # The delta of every content chunk, cut around the piece so each chunk is spliced, not encoded.
            before, after = b'{"tool_calls":[{"index":0,"function":{"arguments":', b"}}]}"
            pieces = split_text(call.arguments, ctx.chunks)
        else:
            opening_delta = {"role": "assistant", "content": "", "refusal": None}
            before, after = b'{"content":', b"}"
            pieces = split_text(reply.text, ctx.chunks)
        opening = self._stream_preamble(ctx) + chunk([opening_delta])
        closing = chunk([{}], _finish(reply))
        if prompt.include_usage:
            closing += head + b'[],"usage":' + dumps(_usage(reply)) + b"}\n\n"
        paced = []
        for piece in pieces:
            delta = before + json_string(piece) + after
            choices = b",".join(
                b'{"index":%d,"delta":%s,"logprobs":null,"finish_reason":null}' % (index, delta) for index in indexes
            )
            paced.append(head + b"[" + choices + b"]" + tail)
        return StreamBody(opening, tuple(paced), closing + _DONE)

    def _tool_call(self, ctx: RenderContext, reply: Reply) -> dict[str, Any]:
        assert reply.tool_call is not None
        return {
            "id": f"call_{ctx.token}",
            "type": "function",
            "function": {"name": reply.tool_call.name, "arguments": reply.tool_call.arguments},
        }

    def _decorate_choice(self, choice: dict[str, Any]) -> dict[str, Any]:
        return choice

    def _decorate_completion(self, body: dict[str, Any]) -> dict[str, Any]:
        return body

    def _stream_preamble(self, ctx: RenderContext) -> bytes:
        return b""

    def response_headers(self, ctx: RenderContext) -> Headers:
        return [(b"x-request-id", f"req_{ctx.token}".encode()), (b"openai-processing-ms", b"1")]

    # -- errors -------------------------------------------------------------------------------------

    def error(self, problem: Problem) -> ErrorReply:
        status = problem.status
        message, kind, code, param = self._wording(problem)
        error: dict[str, Any] = {"message": problem.message or message, "type": kind, "param": param, "code": code}
        return ErrorReply(status, dumps({"error": error}))

    def _wording(self, problem: Problem) -> tuple[str, str, Any, str | None]:
        """(message, type, code, param) as OpenAI words the problem."""
        case, model = problem.case, problem.model
        if case == INVALID_JSON:
            return _INVALID_JSON_MESSAGE, "invalid_request_error", None, None
        if case == INVALID_REQUEST:
            return "Invalid request.", "invalid_request_error", None, problem.param
        if case == MISSING_KEY:
            return _MISSING_KEY_MESSAGE, "invalid_request_error", None, None
        if case == INVALID_KEY:
            return (
                f"Incorrect API key provided: {problem.key_hint or '***'}. You can find your API key at "
                "https://platform.openai.com/account/api-keys.",
                "invalid_request_error", "invalid_api_key", None,
            )
        if case == PERMISSION:
            return "You are not allowed to sample from this model", "invalid_request_error", None, None
        if case == MODEL_NOT_FOUND:
            return (
                f"The model `{model}` does not exist or you do not have access to it.",
                "invalid_request_error", "model_not_found", None,
            )
        if case == RATE_LIMIT:
            wait = problem.retry_after_s if problem.retry_after_s is not None else 1.0
            return (
                f"Rate limit reached for {model} in organization org-simulator on requests per min (RPM): "
                f"Limit 500, Used 500, Requested 1. Please try again in {wait:g}s. Visit "
                "https://platform.openai.com/account/rate-limits to learn more.",
                "requests", "rate_limit_exceeded", None,
            )
        if case == QUOTA:
            return _QUOTA_MESSAGE, "insufficient_quota", "insufficient_quota", None
        if case == CONTEXT_OVERFLOW:
            return (
                f"This model's maximum context length is {problem.limit} tokens. However, your messages "
                f"resulted in {problem.tokens} tokens. Please reduce the length of the messages.",
                "invalid_request_error", "context_length_exceeded", "messages",
            )
        if case == UNKNOWN_PATH:
            return f"Invalid URL ({problem.path})", "invalid_request_error", None, None
        return _server_wording(problem.status)

    def stream_error(self, problem: Problem) -> bytes:
        message, kind, code, param = self._wording(problem)
        return sse_data({"error": {"message": problem.message or message, "type": kind, "param": param, "code": code}})


def _server_wording(status: int) -> tuple[str, str, Any, str | None]:
    if status == 502:
        return "Bad gateway.", "cf_bad_gateway", 502, None
    if status == 504:
        return "Gateway timeout.", "cf_gateway_timeout", 504, None
    if status in (503, 529):
        return "The server is overloaded or not ready yet.", "server_error", None, None
    return "The server had an error while processing your request. Sorry about that!", "server_error", None, None


def _finish(reply: Reply) -> str:
    if reply.finish == FINISH_LENGTH:
        return "length"
    if reply.finish == FINISH_TOOL_CALLS:
        return "tool_calls"
    return "stop"


def _usage(reply: Reply) -> dict[str, Any]:
    usage = reply.usage
    return {
        "prompt_tokens": usage.input_tokens,
        "completion_tokens": usage.output_tokens,
        "total_tokens": usage.input_tokens + usage.output_tokens,
        "prompt_tokens_details": {"cached_tokens": usage.cached_tokens, "audio_tokens": 0},
        "completion_tokens_details": {
            "reasoning_tokens": usage.reasoning_tokens,
            "audio_tokens": 0,
            "accepted_prediction_tokens": 0,
            "rejected_prediction_tokens": 0,
        },
    }


def _content_text(content: Any, tally: TextTally) -> str:
    """The text of a message's content (string or parts), counting text and attachments."""
    return tally.parts(content, text_kinds=("text", "input_text"), attachment_kinds=_ATTACHMENT_PARTS)


def _tools(raw: Any, tally: TextTally) -> tuple[ToolSpec, ...]:
    if raw is None:
        return ()
    if not isinstance(raw, list):
        raise RequestError("Invalid type for 'tools': expected an array.", "tools")
    tally.json(raw)
    tools = []
    for index, tool in enumerate(raw):
        function = tool.get("function") if isinstance(tool, Mapping) else None
        if not isinstance(function, Mapping):
            raise RequestError(f"Missing required parameter: 'tools[{index}].function'.", f"tools[{index}].function")
        name = function.get("name")
        if not isinstance(name, str) or not name:
            raise RequestError(
                f"Missing required parameter: 'tools[{index}].function.name'.", f"tools[{index}].function.name"
            )
        parameters = function.get("parameters")
        tools.append(ToolSpec(name, parameters if isinstance(parameters, Mapping) else {"type": "object"}))
    return tuple(tools)


def _tool_choice(raw: Any, tools: tuple[ToolSpec, ...]) -> tuple[str, str | None]:
    if raw is None:
        return "auto", None
    if not tools:
        raise RequestError(
            "Invalid value for 'tool_choice': 'tool_choice' is only allowed when 'tools' are specified.",
            "tool_choice",
        )
    if raw in ("none", "auto", "required"):
        return raw, None
    function = raw.get("function") if isinstance(raw, Mapping) else None
    name = function.get("name") if isinstance(function, Mapping) else None
    if not isinstance(name, str) or name not in {tool.name for tool in tools}:
        raise RequestError(
            "Invalid value for 'tool_choice': 'tool_choice' must be 'none', 'auto', 'required', or a named "
            "function that is in 'tools'.",
            "tool_choice",
        )
    return "required", name


def _response_format(raw: Any) -> tuple[Mapping[str, Any] | None, bool]:
    if not isinstance(raw, Mapping):
        return None, False
    kind = raw.get("type")
    if kind == "json_schema":
        spec = raw.get("json_schema")
        schema = spec.get("schema") if isinstance(spec, Mapping) else None
        if not isinstance(schema, Mapping):
            raise RequestError("Missing required parameter: 'response_format.json_schema'.", "response_format")
        return schema, False
    if kind == "json_object":
        return None, True
    return None, False


def _include_usage(options: Any) -> bool:
    return isinstance(options, Mapping) and options.get("include_usage") is True

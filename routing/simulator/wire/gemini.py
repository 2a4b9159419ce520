"""Google Gemini (``POST /v1beta/models/{model}:generateContent`` and ``:streamGenerateContent``).

The key comes in ``x-goog-api-key`` or ``?key=``. Streams are SSE with ``alt=sse`` (events separated by
``\\r\\n\\r\\n``, the last one carrying ``finishReason`` and the full ``usageMetadata``), or without it a
JSON array sent piece by piece. Errors use Google's ``{"error": {"code", "message", "status"}}``; as on
the real service, a wrong key is a 400 ``INVALID_ARGUMENT`` with reason ``API_KEY_INVALID`` and a
missing key a 403 ``PERMISSION_DENIED``. Function calls carry Gemini 3's thought signature, and a current turn
that sends one back without it is refused as Gemini 3 refuses it (gemini_rules).
"""

from __future__ import annotations

import json
from collections.abc import Mapping, Sequence
from typing import Any

from routing.simulator.compose import FINISH_LENGTH, Reply, split_text
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
    Problem,
    RenderContext,
    RequestError,
    StreamBody,
    WireFormat,
    dumps,
    json_string,
)
from routing.simulator.wire.gemini_rules import check_thought_signatures, sign_function_call

_ATTACHMENT_PARTS = ("inlineData", "inline_data", "fileData", "file_data")
_DYNAMIC_THINKING_TOKENS = 256
_ERROR_INFO = "type.googleapis.com/google.rpc.ErrorInfo"
_RETRY_INFO = "type.googleapis.com/google.rpc.RetryInfo"
_QUOTA_FAILURE = "type.googleapis.com/google.rpc.QuotaFailure"
_EXHAUSTED = (
    "You exceeded your current quota, please check your plan and billing details. For more information on "
    "this error, head to: https://ai.google.dev/gemini-api/docs/rate-limits."
)


def _get(mapping: Mapping[str, Any], camel: str) -> Any:
    """A field by its camelCase name or its snake_case twin (the REST API accepts both)."""
    if camel in mapping:
        return mapping[camel]
    snake = "".join(f"_{c.lower()}" if c.isupper() else c for c in camel)
    return mapping.get(snake)


class GeminiWire(WireFormat):
    name = "gemini"

    def __init__(self, sse: bool = True) -> None:
        self.sse = sse  # streamGenerateContent with alt=sse; False: a streamed JSON array

    @property
    def stream_content_type(self) -> bytes:  # type: ignore[override]
        return b"text/event-stream" if self.sse else b"application/json; charset=UTF-8"

    def credentials(self, headers: Mapping[str, str], query: Mapping[str, str]) -> tuple[str | None, str | None]:
        if headers.get("x-goog-api-key"):
            return "x-goog-api-key", headers["x-goog-api-key"]
        if query.get("key"):
            return "key", query["key"]
        return None, None

    # -- request ------------------------------------------------------------------------------------

    def parse(self, body: Mapping[str, Any], model: str) -> Prompt:
        contents = body.get("contents")
        if not isinstance(contents, list) or not contents:
            raise RequestError("* GenerateContentRequest.contents: contents is not specified\n", "contents")
        check_thought_signatures(contents)
        tally = TextTally()
        system = _get(body, "systemInstruction")
        if isinstance(system, Mapping):
            _parts_text(system.get("parts"), tally)
        elif isinstance(system, str):
            tally.text(system)
        tools = _tools(body.get("tools"), tally)
        tool_choice, forced = _tool_choice(_get(body, "toolConfig"), tools)
        config = _get(body, "generationConfig") or {}
        if not isinstance(config, Mapping):
            raise RequestError("Invalid JSON payload received. Unknown name \"generationConfig\".", "generationConfig")
        prefix = (0, 0)
        last_text = ""
        answers_tool = False
        for index, content in enumerate(contents):
            if index == len(contents) - 1:
                prefix = (tally.chars, tally.attachments)
            if not isinstance(content, Mapping):
                raise RequestError(f"* GenerateContentRequest.contents[{index}]: must be an object\n", "contents")
            text, has_result = _parts_text(content.get("parts"), tally)
            if content.get("role", "user") in ("user", "function"):
                last_text, answers_tool = text, has_result
        schema = (
            _get(config, "responseJsonSchema") or config.get("_responseJsonSchema") or _get(config, "responseSchema")
        )
        thinking = _get(config, "thinkingConfig") or {}
        budget = _get(thinking, "thinkingBudget") if isinstance(thinking, Mapping) else None
        reasoning = 0
        if isinstance(budget, int) and not isinstance(budget, bool):
            reasoning = _DYNAMIC_THINKING_TOKENS if budget < 0 else min(budget, _DYNAMIC_THINKING_TOKENS)
        return Prompt(
            model=model,
            last_user_text=last_text,
            input_chars=tally.chars,
            message_count=len(contents),
            attachments=tally.attachments,
            tools=tools,
            tool_choice=tool_choice,
            forced_tool=forced,
            answers_tool_result=answers_tool,
            output_schema=schema if isinstance(schema, Mapping) else None,
            json_mode=_get(config, "responseMimeType") == "application/json",
            max_tokens=positive_int(_get(config, "maxOutputTokens")),
            stop_sequences=string_list(_get(config, "stopSequences")),
            reasoning_tokens=reasoning,
            reasoning_visible=isinstance(thinking, Mapping) and _get(thinking, "includeThoughts") is True,
            prefix_key=fingerprint(system, body.get("tools"), contents[:-1]),
            prefix_chars=prefix[0],
            prefix_attachments=prefix[1],
            prefix_messages=len(contents) - 1,
        )

    # -- answers ------------------------------------------------------------------------------------

    def render_json(self, ctx: RenderContext, prompt: Prompt, reply: Reply) -> bytes:
        parts: list[dict[str, Any]] = []
        if reply.reasoning_text:
            parts.append({"text": reply.reasoning_text, "thought": True})
        if reply.text:
            parts.append({"text": reply.text})
        if reply.tool_call is not None:
            parts.append(_function_call(ctx, reply))
        return dumps(self._response(ctx, parts or [{"text": ""}], reply, final=True))

    def render_stream(self, ctx: RenderContext, prompt: Prompt, reply: Reply) -> StreamBody:
        # Every chunk but the last differs only in its text: splice each piece between precomputed bytes
        # (the same bytes _response would encode).
        before = b'{"candidates":[{"content":{"parts":[{"text":'
        after = (
            b'}],"role":"model"},"index":0}],"usageMetadata":'
            + dumps({"promptTokenCount": reply.usage.input_tokens, "totalTokenCount": reply.usage.input_tokens})
            + b',"modelVersion":' + json_string(ctx.model) + b',"responseId":' + json_string(ctx.token) + b"}"
        )
        pieces = [before + json_string(p) + b',"thought":true' + after
                  for p in split_text(reply.reasoning_text, ctx.chunks)]
        pieces += [before + json_string(p) + after for p in split_text(reply.text, ctx.chunks)]
        if reply.tool_call is not None:  # Gemini sends a function call whole, in one chunk
            pieces.append(dumps(self._response(ctx, [_function_call(ctx, reply)], reply, final=False)))
        paced = [self._event_bytes(piece, first=index == 0) for index, piece in enumerate(pieces)]
        final = self._event(self._response(ctx, [{"text": ""}], reply, final=True), first=not pieces)
        return StreamBody(b"", tuple(paced), final if self.sse else final + b"]")

    def _event(self, value: dict[str, Any], *, first: bool) -> bytes:
        return self._event_bytes(dumps(value), first=first)

    def _event_bytes(self, encoded: bytes, *, first: bool) -> bytes:
        if self.sse:
            return b"data: " + encoded + b"\r\n\r\n"
        return (b"[" if first else b",\r\n") + encoded

    def _response(
        self, ctx: RenderContext, parts: list[dict[str, Any]], reply: Reply, *, final: bool
    ) -> dict[str, Any]:
        candidate: dict[str, Any] = {"content": {"parts": parts, "role": "model"}, "index": 0}
        usage = reply.usage
        metadata: dict[str, Any] = {"promptTokenCount": usage.input_tokens, "totalTokenCount": usage.input_tokens}
        if final:
            candidate["finishReason"] = "MAX_TOKENS" if reply.finish == FINISH_LENGTH else "STOP"
            metadata = {
                "promptTokenCount": usage.input_tokens,
                "candidatesTokenCount": usage.output_tokens - usage.reasoning_tokens,
                "totalTokenCount": usage.input_tokens + usage.output_tokens,
                "promptTokensDetails": [{"modality": "TEXT", "tokenCount": usage.input_tokens}],
            }
            if usage.cached_tokens:
                metadata["cachedContentTokenCount"] = usage.cached_tokens
            if usage.reasoning_tokens:
                metadata["thoughtsTokenCount"] = usage.reasoning_tokens
        return {
            "candidates": [candidate],
            "usageMetadata": metadata,
            "modelVersion": ctx.model,
            "responseId": ctx.token,
        }

    def render_models(self, models: Sequence[tuple[str, int]]) -> bytes:
        return dumps({"models": [
            {
                "name": f"models/{name}",
                "version": "001",
                "displayName": name,
                "inputTokenLimit": window,
                "outputTokenLimit": 65536,
                "supportedGenerationMethods": ["generateContent", "countTokens"],
            }
            for name, window in models
        ]})

    # -- errors -------------------------------------------------------------------------------------

    def error(self, problem: Problem) -> ErrorReply:
        status, message, code_status, details = self._wording(problem)
        error: dict[str, Any] = {"code": status, "message": problem.message or message, "status": code_status}
        if details:
            error["details"] = details
        return ErrorReply(status, dumps({"error": error}))

    def stream_error(self, problem: Problem) -> bytes:
        status, message, code_status, _ = self._wording(problem)
        return self._event({"error": {"code": status, "message": problem.message or message, "status": code_status}},
                           first=False)

    def _wording(self, problem: Problem) -> tuple[int, str, str, list[dict[str, Any]]]:
        """(status, message, Google status name, details) as Gemini words the problem."""
        case, status, model = problem.case, problem.status, problem.model
        if case == INVALID_JSON:
            return 400, "Invalid JSON payload received. Unexpected token.", "INVALID_ARGUMENT", []
        if case == INVALID_REQUEST:
            return status, "Request contains an invalid argument.", "INVALID_ARGUMENT", []
        if case == MISSING_KEY:
            return 403, (
                "Method doesn't allow unregistered callers (callers without established identity). Please use "
                "API Key or other form of API consumer identity to call this API."
            ), "PERMISSION_DENIED", []
        if case == INVALID_KEY and not problem.scripted:
            return 400, "API key not valid. Please pass a valid API key.", "INVALID_ARGUMENT", [{
                "@type": _ERROR_INFO,
                "reason": "API_KEY_INVALID",
                "domain": "googleapis.com",
                "metadata": {"service": "generativelanguage.googleapis.com"},
            }]
        if case == INVALID_KEY:
            return 401, "Request had invalid authentication credentials.", "UNAUTHENTICATED", []
        if case == PERMISSION:
            return 403, "Permission denied: Consumer does not have access to this model.", "PERMISSION_DENIED", []
        if case == MODEL_NOT_FOUND:
            return 404, (
                f"models/{model} is not found for API version v1beta, or is not supported for generateContent. "
                "Call ListModels to see the list of available models and their supported methods."
            ), "NOT_FOUND", []
        if case in (RATE_LIMIT, QUOTA):
            period = "PerDay" if case == QUOTA else "PerMinute"
            quota_id = f"GenerateRequests{period}PerProjectPerModel"
            details: list[dict[str, Any]] = [{
                "@type": _QUOTA_FAILURE,
                "violations": [{"quotaMetric": "generativelanguage.googleapis.com/generate_content_requests",
                                "quotaId": quota_id}],
            }]
            if case == RATE_LIMIT and problem.retry_after_s is not None:
                details.append({"@type": _RETRY_INFO, "retryDelay": f"{max(1, round(problem.retry_after_s))}s"})
            return 429, _EXHAUSTED, "RESOURCE_EXHAUSTED", details
        if case == CONTEXT_OVERFLOW:
            return 400, (
                f"The input token count ({problem.tokens}) exceeds the maximum number of tokens allowed "
                f"({problem.limit})."
            ), "INVALID_ARGUMENT", []
        if case == UNKNOWN_PATH:
            return 404, f"Method not found: {problem.path}", "NOT_FOUND", []
        if status in (503, 529):
            return status, "The model is overloaded. Please try again later.", "UNAVAILABLE", []
        if status == 504:
            return status, "Deadline expired before operation could complete.", "DEADLINE_EXCEEDED", []
        if status == 502:
            return status, "Bad gateway.", "UNAVAILABLE", []
        return status, (
            "An internal error has occurred. Please retry or report in "
            "https://developers.generativeai.google/guide/troubleshooting"
        ), "INTERNAL", []


def _parts_text(parts: Any, tally: TextTally) -> tuple[str, bool]:
    """(the text of a parts list, whether it answers a function call), counting text and attachments."""
    if not isinstance(parts, list):
        return "", False
    texts: list[str] = []
    has_result = False
    for part in parts:
        if not isinstance(part, Mapping):
            continue
        if "text" in part:
            text = tally.text(part.get("text"))
            if not part.get("thought"):
                texts.append(text)
        elif any(key in part for key in _ATTACHMENT_PARTS):
            tally.attachment()
        elif _get(part, "functionCall") is not None:
            tally.json(_get(part, "functionCall"))
        elif _get(part, "functionResponse") is not None:
            has_result = True
            response = _get(part, "functionResponse")
            tally.json(response)
            texts.append(json.dumps(response.get("response") if isinstance(response, Mapping) else response))
    return "\n".join(t for t in texts if t), has_result


def _tools(raw: Any, tally: TextTally) -> tuple[ToolSpec, ...]:
    if raw is None:
        return ()
    if not isinstance(raw, list):
        raise RequestError("Invalid JSON payload received. Unknown name \"tools\": expected a list.", "tools")
    tally.json(raw)
    tools = []
    for tool in raw:
        declarations = _get(tool, "functionDeclarations") if isinstance(tool, Mapping) else None
        for declaration in declarations or []:
            name = declaration.get("name") if isinstance(declaration, Mapping) else None
            if not isinstance(name, str) or not name:
                raise RequestError(
                    "* GenerateContentRequest.tools[0].function_declarations[0].name: Name cannot be empty.\n", "tools"
                )
            schema = _get(declaration, "parametersJsonSchema") or declaration.get("parameters") or {"type": "object"}
            tools.append(ToolSpec(name, schema))
    return tuple(tools)


def _tool_choice(raw: Any, tools: tuple[ToolSpec, ...]) -> tuple[str, str | None]:
    config = _get(raw, "functionCallingConfig") if isinstance(raw, Mapping) else None
    if not isinstance(config, Mapping):
        return "auto", None
    mode = str(config.get("mode", "AUTO")).upper()
    if mode == "NONE":
        return "none", None
    if mode == "ANY":
        allowed = _get(config, "allowedFunctionNames") or []
        declared = {tool.name for tool in tools}
        forced = next((name for name in allowed if name in declared), None)
        return "required", forced
    return "auto", None


def _function_call(ctx: RenderContext, reply: Reply) -> dict[str, Any]:
    """The answer's function call part, signed as Gemini 3 signs the first call of a step."""
    assert reply.tool_call is not None
    try:
        args = json.loads(reply.tool_call.arguments)
    except ValueError:  # cut short by truncation: Gemini never sends partial arguments
        args = {}
    return {"functionCall": {"name": reply.tool_call.name, "args": args},
            "thoughtSignature": sign_function_call(ctx.token, reply.tool_call.name)}

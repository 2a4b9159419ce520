"""Amazon Bedrock runtime: Converse (``POST /model/{modelId}/converse``), ConverseStream (``/converse-stream``,
binary AWS event-stream frames) and InvokeModel for embeddings (``/model/{modelId}/invoke``, see ``bedrock_embed``).

Authentication as Bedrock takes it: an Amazon Bedrock API key as ``Authorization: Bearer``, or a SigV4
signature ``AWS4-HMAC-SHA256 Credential=<key id>/<yyyymmdd>/<region>/bedrock/aws4_request,
SignedHeaders=...;host;...;x-amz-date;..., Signature=<64 hex>`` with an ``X-Amz-Date`` header. The simulator
cannot know the secret, so it accepts any well-formed signature (a test recomputes one with known credentials)
and answers 403 to a malformed one; the "key" a request authenticates with is the bearer key or the signature's
access key id (a model's ``api_keys`` may list either).

Errors are ``{"message": ...}`` with the exception's name in ``x-amzn-ErrorType``, and no ``Retry-After`` (Bedrock
sends none, even with a 429). A failure mid-stream is an exception frame (``:message-type: exception``).
"""

from __future__ import annotations

import json
import re
import zlib
from collections.abc import Mapping
from typing import Any

from routing.simulator.compose import FINISH_LENGTH, FINISH_STOP_SEQUENCE, FINISH_TOOL_CALLS, Reply, split_text
from routing.simulator.prompt import Prompt, TextTally, ToolSpec, fingerprint, positive_int, string_list
from routing.simulator.wire.anthropic_rules import check_conversation, sign_thinking
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
)

_SIGV4 = re.compile(
    r"^AWS4-HMAC-SHA256 Credential=(?P<key>[A-Z0-9]{16,128})/(?P<date>\d{8})/(?P<region>[a-z0-9-]+)/"
    r"(?P<service>[a-z0-9-]+)/aws4_request, ?SignedHeaders=(?P<signed>[a-z0-9;-]+), ?Signature=(?P<sig>[0-9a-f]{64})$"
)
_AMZ_DATE = re.compile(r"^\d{8}T\d{6}Z$")
_CORAL = ":http://internal.amazon.com/coral/com.amazon.bedrock/"
_THINKING_TOKENS = 256
# The exceptions ConverseStream sends inside the stream, by the name of the same error as a status.
_STREAM_EXCEPTIONS = {"ThrottlingException": "throttlingException",
                      "ServiceUnavailableException": "serviceUnavailableException",
                      "ValidationException": "validationException", "ModelErrorException": "modelStreamErrorException"}
# Bedrock pads each stream event's JSON with a "p" member of varying length (so sizes do not leak the text).
_PADDING = "abcdefghijklmnopqrstuvwxyzABCDEFGHIJKLMNOPQRSTUVWXYZ0123456789"


def event_frame(headers: Mapping[str, str], payload: bytes) -> bytes:
    """One AWS event-stream frame with string headers (prelude, headers, payload, both CRC32s)."""
    encoded = b"".join(
        bytes([len(name.encode())]) + name.encode() + b"\x07" + len(value.encode()).to_bytes(2, "big")
        + value.encode()
        for name, value in headers.items()
    )
    total = 12 + len(encoded) + len(payload) + 4
    prelude = total.to_bytes(4, "big") + len(encoded).to_bytes(4, "big")
    prelude += zlib.crc32(prelude).to_bytes(4, "big")
    body = prelude + encoded + payload
    return body + zlib.crc32(body).to_bytes(4, "big")


def _event(kind: str, value: dict[str, Any]) -> bytes:
    padded = {**value, "p": _PADDING[: 1 + len(kind) * 2 % len(_PADDING)]}
    return event_frame({":event-type": kind, ":content-type": "application/json", ":message-type": "event"},
                       dumps(padded))


def _exception(kind: str, message: str) -> bytes:
    return event_frame({":exception-type": kind, ":content-type": "application/json", ":message-type": "exception"},
                       dumps({"message": message}))


def signature_problem(authorization: str, headers: Mapping[str, str]) -> str | None:
    """Why a SigV4 ``Authorization`` header is not well-formed, or None."""
    match = _SIGV4.match(authorization)
    if match is None:
        return ("Authorization header requires 'Credential', 'SignedHeaders' and 'Signature' parameters in the "
                "AWS4-HMAC-SHA256 form.")
    amz_date = headers.get("x-amz-date", "")
    if not _AMZ_DATE.match(amz_date):
        return "Authorization header requires existence of either a 'X-Amz-Date' or a 'Date' header."
    if match.group("date") != amz_date[:8]:
        return "Date in Credential scope does not match YYYYMMDD from ISO-8601 version of date from HTTP."
    if match.group("service") != "bedrock":
        return f"Credential should be scoped to correct service: 'bedrock', not '{match.group('service')}'."
    signed = match.group("signed").split(";")
    if "host" not in signed or "x-amz-date" not in signed or signed != sorted(signed):
        return "The request signature we calculated does not match the signature you provided."
    if "x-amz-security-token" in headers and "x-amz-security-token" not in signed:
        return "The request signature we calculated does not match the signature you provided."
    return None


class BedrockWire(WireFormat):
    name = "bedrock"
    stream_content_type = b"application/vnd.amazon.eventstream"

    def credentials(self, headers: Mapping[str, str], query: Mapping[str, str]) -> tuple[str | None, str | None]:
        authorization = headers.get("authorization", "")
        if authorization[:7].lower() == "bearer " and authorization[7:].strip():
            return "authorization", authorization[7:].strip()
        match = _SIGV4.match(authorization)
        if match is not None:
            return "authorization", match.group("key")
        return None, None

    def precheck(self, headers: Mapping[str, str], query: Mapping[str, str], model: str) -> Problem | None:
        authorization = headers.get("authorization", "")
        if authorization.startswith("AWS4-"):
            problem = signature_problem(authorization, headers)
            if problem is not None:
                return Problem(INVALID_KEY, 403, model=model, message=problem)
        return None

    # -- request ------------------------------------------------------------------------------------

    def parse(self, body: Mapping[str, Any], model: str) -> Prompt:
        messages = body.get("messages")
        if not isinstance(messages, list) or not messages:
            raise RequestError("The model returned the following errors: messages: at least one message is required",
                               "messages")
        tally = TextTally()
        for block in body.get("system") or []:
            if isinstance(block, Mapping):
                tally.text(block.get("text"))
        tools, tool_choice, forced = _tool_config(body.get("toolConfig"), tally)
        last_user = ""
        prefix = (0, 0)
        uses_tools = False
        previous = None
        for index, message in enumerate(messages):
            if index == len(messages) - 1:
                prefix = (tally.chars, tally.attachments)
            role = message.get("role") if isinstance(message, Mapping) else None
            if role not in ("user", "assistant"):
                raise RequestError(f"messages.{index}.role: must be user or assistant", f"messages[{index}].role")
            if index == 0 and role != "user":
                raise RequestError("A conversation must start with a user message. Try again with a conversation "
                                   "that starts with a user message.", "messages[0].role")
            if role == previous:
                raise RequestError("A conversation must alternate between user and assistant roles. Make sure the "
                                   "conversation alternates between user and assistant roles and try again.",
                                   f"messages[{index}].role")
            previous = role
            assert isinstance(message, Mapping)
            text, has_tool_blocks = _content(message.get("content"), tally, f"messages[{index}].content")
            uses_tools = uses_tools or has_tool_blocks
            if role == "user":
                last_user = text
        if uses_tools and body.get("toolConfig") is None:
            raise RequestError("The toolConfig field must be defined when using toolUse and toolResult content "
                               "blocks.", "toolConfig")
        inference = body.get("inferenceConfig") if isinstance(body.get("inferenceConfig"), Mapping) else {}
        extra = body.get("additionalModelRequestFields")
        thinking = extra.get("thinking") if isinstance(extra, Mapping) else None
        thinking_on = isinstance(thinking, Mapping) and thinking.get("type") == "enabled"
        budget = positive_int(thinking.get("budget_tokens")) if isinstance(thinking, Mapping) else None
        if _is_claude(model):
            _check_claude_conversation(messages, thinking_on=thinking_on)
        last = messages[-1]
        answers_result = isinstance(last, Mapping) and any(
            isinstance(block, Mapping) and "toolResult" in block for block in last.get("content") or [])
        return Prompt(
            model=model,
            last_user_text=last_user,
            input_chars=tally.chars,
            message_count=len(messages),
            attachments=tally.attachments,
            tools=tools,
            tool_choice=tool_choice,
            forced_tool=forced,
            answers_tool_result=answers_result,
            max_tokens=positive_int(inference.get("maxTokens")),
            stop_sequences=string_list(inference.get("stopSequences")),
            reasoning_tokens=min(budget or _THINKING_TOKENS, _THINKING_TOKENS) if thinking_on else 0,
            reasoning_visible=thinking_on,
            prefix_key=fingerprint(body.get("toolConfig"), messages[:-1]) if len(messages) > 1 or tools else None,
            prefix_chars=prefix[0],
            prefix_attachments=prefix[1],
            prefix_messages=len(messages) - 1,
        )

    # -- answers ------------------------------------------------------------------------------------

    def render_json(self, ctx: RenderContext, prompt: Prompt, reply: Reply) -> bytes:
        content: list[dict[str, Any]] = []
        if reply.reasoning_text:
            content.append({"reasoningContent": {"reasoningText": {
                "text": reply.reasoning_text, "signature": sign_thinking(ctx.token, reply.reasoning_text)}}})
        if reply.text:
            content.append({"text": reply.text})
        if reply.tool_call is not None:
            content.append({"toolUse": {"toolUseId": _tool_use_id(ctx), "name": reply.tool_call.name,
                                        "input": _arguments(reply.tool_call.arguments)}})
        return dumps({
            "output": {"message": {"role": "assistant", "content": content}},
            "stopReason": _stop_reason(reply),
            "usage": _usage(reply),
            "metrics": {"latencyMs": 42},
        })

    def render_stream(self, ctx: RenderContext, prompt: Prompt, reply: Reply) -> StreamBody:
        opening = _event("messageStart", {"role": "assistant"})
        paced: list[bytes] = []
        index = 0
        if reply.reasoning_text:
            events = [_event("contentBlockDelta", {"contentBlockIndex": index,
                                                   "delta": {"reasoningContent": {"text": piece}}})
                      for piece in split_text(reply.reasoning_text, ctx.chunks)]
            events[-1] += _event("contentBlockDelta", {"contentBlockIndex": index, "delta": {
                "reasoningContent": {"signature": sign_thinking(ctx.token, reply.reasoning_text)}}})
            events[-1] += _event("contentBlockStop", {"contentBlockIndex": index})
            paced.extend(events)
            index += 1
        if reply.text:
            events = [_event("contentBlockDelta", {"contentBlockIndex": index, "delta": {"text": piece}})
                      for piece in split_text(reply.text, ctx.chunks)]
            events[-1] += _event("contentBlockStop", {"contentBlockIndex": index})
            paced.extend(events)
            index += 1
        if reply.tool_call is not None:
            start = _event("contentBlockStart", {"contentBlockIndex": index, "start": {"toolUse": {
                "toolUseId": _tool_use_id(ctx), "name": reply.tool_call.name}}})
            events = [_event("contentBlockDelta", {"contentBlockIndex": index, "delta": {"toolUse": {"input": piece}}})
                      for piece in split_text(reply.tool_call.arguments, ctx.chunks)] or [b""]
            events[0] = start + events[0]
            events[-1] += _event("contentBlockStop", {"contentBlockIndex": index})
            paced.extend(events)
        closing = _event("messageStop", {"stopReason": _stop_reason(reply)}) + _event(
            "metadata", {"usage": _usage(reply), "metrics": {"latencyMs": 42}})
        return StreamBody(opening, tuple(paced), closing)

    def response_headers(self, ctx: RenderContext) -> Headers:
        return [(b"x-amzn-requestid", _uuid(ctx.token).encode())]

    # -- errors -------------------------------------------------------------------------------------

    def error(self, problem: Problem) -> ErrorReply:
        status, _, message = self._wording(problem)
        return ErrorReply(status, dumps({"message": message}))

    def error_headers(self, problem: Problem, headers: Headers) -> Headers:
        """The exception's name; never a Retry-After (Bedrock sends none)."""
        _, kind, _ = self._wording(problem)
        kept = [(name, value) for name, value in headers if name.lower() not in (b"retry-after", b"retry-after-ms")]
        return [*kept, (b"x-amzn-errortype", (kind + _CORAL).encode())]

    def stream_error(self, problem: Problem) -> bytes:
        _, kind, message = self._wording(problem)
        return _exception(_STREAM_EXCEPTIONS.get(kind, "internalServerException"), message)

    def _wording(self, problem: Problem) -> tuple[int, str, str]:
        """(status, exception name, message) as Bedrock words the problem."""
        case, status = problem.case, problem.status
        if case == INVALID_JSON:
            return 400, "SerializationException", problem.message or "Malformed input request, please reformat "\
                                                                     "your input and try again."
        if case == MISSING_KEY:
            return 403, "MissingAuthenticationTokenException", problem.message or "Missing Authentication Token"
        if case == INVALID_KEY:
            return (403, "UnrecognizedClientException" if problem.message is None else "InvalidSignatureException",
                    problem.message or "The security token included in the request is invalid.")
        if case == PERMISSION:
            return 403, "AccessDeniedException", problem.message or ("You don't have access to the model with the "
                                                                     "specified model ID.")
        if case == MODEL_NOT_FOUND:
            return 404, "ResourceNotFoundException", problem.message or f"Model not found: {problem.model}."
        if case == RATE_LIMIT:
            return 429, "ThrottlingException", problem.message or "Too many requests, please wait before trying again."
        if case == QUOTA:
            return 400, "ServiceQuotaExceededException", problem.message or (
                "Your request exceeds the service quota for your account. You can view your quotas at Viewing "
                "service quotas. You can resubmit your request later.")
        if case == CONTEXT_OVERFLOW:
            return 400, "ValidationException", problem.message or (
                f"Input is too long for requested model. ({problem.tokens} input tokens, the model takes "
                f"{problem.limit})")
        if case == UNKNOWN_PATH:
            return 404, "UnknownOperationException", problem.message or f"Unknown operation: {problem.path}"
        if case == INVALID_REQUEST:
            return status, "ValidationException", problem.message or "Malformed input request."
        if status == 503:
            return status, "ServiceUnavailableException", problem.message or ("Bedrock is unable to process your "
                                                                              "request.")
        if status == 424:
            return status, "ModelErrorException", problem.message or "The model failed to process the request."
        if status in (408, 504):
            return status, "ModelTimeoutException", problem.message or "The request took too long to process."
        return status, "InternalServerException", problem.message or ("The server encountered an internal error "
                                                                      "while processing the request.")


def _content(content: Any, tally: TextTally, path: str) -> tuple[str, bool]:
    """(the text of a message's blocks, whether it holds tool blocks); RequestError for a malformed block."""
    if not isinstance(content, list) or not content:
        raise RequestError(f"{path}: at least one content block is required", path)
    texts: list[str] = []
    tools = False
    for j, block in enumerate(content):
        if not isinstance(block, Mapping) or len(block) != 1:
            raise RequestError(f"{path}.{j}: a content block holds exactly one member", f"{path}[{j}]")
        if "text" in block:
            if not isinstance(block["text"], str) or not block["text"].strip():
                raise RequestError("The text field in the ContentBlock object is blank. Add text to the text field, "
                                   "and try again.", f"{path}[{j}].text")
            texts.append(tally.text(block["text"]))
        elif "image" in block:
            image = block["image"]
            source = image.get("source") if isinstance(image, Mapping) else None
            if not isinstance(source, Mapping) or not isinstance(source.get("bytes"), str) or image.get(
                    "format") not in ("png", "jpeg", "gif", "webp"):
                raise RequestError(f"{path}.{j}.image: format and source.bytes are required", f"{path}[{j}].image")
            tally.attachment()
        elif "document" in block:
            tally.attachment()
        elif "toolUse" in block:
            tools = True
            use = block["toolUse"]
            if not isinstance(use, Mapping) or not isinstance(use.get("input"), Mapping):
                raise RequestError(f"{path}.{j}.toolUse.input must be an object", f"{path}[{j}].toolUse.input")
            tally.json(use)
        elif "toolResult" in block:
            tools = True
            result = block["toolResult"]
            for item in (result.get("content") if isinstance(result, Mapping) else None) or []:
                if isinstance(item, Mapping):
                    texts.append(tally.text(item.get("text")))
                    tally.json(item.get("json"))
        elif "reasoningContent" in block:
            tally.json(block["reasoningContent"])
        else:
            raise RequestError(f"{path}.{j}: unknown content block {next(iter(block))!r}", f"{path}[{j}]")
    return "\n".join(texts), tools


def _tool_config(raw: Any, tally: TextTally) -> tuple[tuple[ToolSpec, ...], str, str | None]:
    """(tools, tool choice word, forced tool name) of a ``toolConfig``."""
    if raw is None:
        return (), "auto", None
    if not isinstance(raw, Mapping) or not isinstance(raw.get("tools"), list) or not raw["tools"]:
        raise RequestError("toolConfig.tools: at least one tool is required", "toolConfig.tools")
    tally.json(raw["tools"])
    tools = []
    for index, tool in enumerate(raw["tools"]):
        spec = tool.get("toolSpec") if isinstance(tool, Mapping) else None
        name = spec.get("name") if isinstance(spec, Mapping) else None
        schema = spec.get("inputSchema", {}).get("json") if isinstance(spec, Mapping) and isinstance(
            spec.get("inputSchema"), Mapping) else None
        if not isinstance(name, str) or not name or not isinstance(schema, Mapping):
            raise RequestError(f"toolConfig.tools.{index}.toolSpec: name and inputSchema.json are required",
                               f"toolConfig.tools[{index}].toolSpec")
        tools.append(ToolSpec(name, schema))
    choice = raw.get("toolChoice")
    if choice is None or (isinstance(choice, Mapping) and "auto" in choice):
        return tuple(tools), "auto", None
    if isinstance(choice, Mapping) and "any" in choice:
        return tuple(tools), "required", None
    named = choice.get("tool") if isinstance(choice, Mapping) else None
    if isinstance(named, Mapping) and isinstance(named.get("name"), str):
        if named["name"] not in {tool.name for tool in tools}:
            raise RequestError(f"toolConfig.toolChoice.tool.name: {named['name']} is not a declared tool",
                               "toolConfig.toolChoice.tool.name")
        return tuple(tools), "required", named["name"]
    raise RequestError("toolConfig.toolChoice must be one of auto, any, tool", "toolConfig.toolChoice")


def _arguments(text: str) -> Any:
    """A tool call's arguments as the JSON object Converse returns (a cut-short text stays a string)."""
    try:
        return json.loads(text)
    except ValueError:
        return text


def _stop_reason(reply: Reply) -> str:
    if reply.finish == FINISH_LENGTH:
        return "max_tokens"
    if reply.finish == FINISH_TOOL_CALLS:
        return "tool_use"
    if reply.finish == FINISH_STOP_SEQUENCE:
        return "stop_sequence"
    return "end_turn"


def _usage(reply: Reply) -> dict[str, Any]:
    usage = reply.usage
    fresh = max(0, usage.input_tokens - usage.cached_tokens)  # Bedrock's inputTokens leave out cache reads
    out: dict[str, Any] = {"inputTokens": fresh, "outputTokens": usage.output_tokens,
                           "totalTokens": usage.input_tokens + usage.output_tokens}
    if usage.cached_tokens:
        out["cacheReadInputTokens"] = usage.cached_tokens
    return out


def _uuid(token: str) -> str:
    hexed = (token + "0" * 32)[:32]
    return f"{hexed[:8]}-{hexed[8:12]}-{hexed[12:16]}-{hexed[16:20]}-{hexed[20:32]}"


def _tool_use_id(ctx: RenderContext) -> str:
    return f"tooluse_{ctx.token[:22]}"


def _is_claude(model: str) -> bool:
    """An Anthropic model id (``anthropic.claude-...``, or a regional profile ``us.anthropic...``)."""
    head = model.rsplit("/", 1)[-1]
    return head.startswith("anthropic.") or head.split(".", 1)[-1].startswith("anthropic.")


def _check_claude_conversation(messages: list[Any], *, thinking_on: bool) -> None:
    """Claude's own conversation rules (anthropic_rules), which Bedrock relays as the model's errors."""
    shaped = [{"role": message.get("role"), "content": [_as_anthropic_block(block)
                                                        for block in message.get("content") or []
                                                        if isinstance(block, Mapping)]}
              for message in messages if isinstance(message, Mapping)]
    try:
        check_conversation(shaped, thinking_on=thinking_on)
    except RequestError as exc:
        raise RequestError(f"The model returned the following errors: {exc.message}", exc.param) from None


def _as_anthropic_block(block: Mapping[str, Any]) -> dict[str, Any]:
    """A Converse content block as the Anthropic block Claude reads it as."""
    if isinstance(block.get("toolUse"), Mapping):
        return {"type": "tool_use", "id": block["toolUse"].get("toolUseId")}
    if isinstance(block.get("toolResult"), Mapping):
        return {"type": "tool_result", "tool_use_id": block["toolResult"].get("toolUseId")}
    reasoning = block.get("reasoningContent")
    if isinstance(reasoning, Mapping):
        if "redactedContent" in reasoning:
            return {"type": "redacted_thinking", "data": reasoning.get("redactedContent")}
        text = reasoning.get("reasoningText")
        text = text if isinstance(text, Mapping) else {}
        return {"type": "thinking", "thinking": text.get("text"), "signature": text.get("signature")}
    return {"type": "text" if "text" in block else "other"}

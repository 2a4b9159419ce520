"""Bedrock Converse responses -> OpenAI chat completions (and, through them, Anthropic messages).

A Converse answer is ``output.message.content``: blocks of ``text``, ``toolUse`` (``toolUseId``, ``name``,
``input`` as a JSON object) and ``reasoningContent.reasoningText.text``; ``stopReason`` (end_turn,
stop_sequence, max_tokens, tool_use, guardrail_intervened, content_filtered, model_context_window_exceeded);
``usage`` with ``inputTokens`` that EXCLUDE ``cacheReadInputTokens`` and ``cacheWriteInputTokens`` (as
Anthropic counts; the total input is the sum). A call of the gateway's own ``JSON_TOOL`` (a JSON-schema answer,
see openai_to_bedrock) is the answer's text, with the finish reason ``stop``.
"""

from __future__ import annotations

import dataclasses
import json
from typing import Any

from routing.core.answer import (
    FINISH_CONTENT_FILTER,
    FINISH_LENGTH,
    FINISH_STOP,
    FINISH_TOOL_CALLS,
    FINISH_UNKNOWN,
    Answer,
    Usage,
)
from routing.providers.bedrock.request import JSON_TOOL
from routing.providers.common.shape import list_or_empty, object_or_empty
from routing.providers.common.thinking_ids import REDACTED, THINKING, ThinkingBlock, id_with_thinking
from routing.providers.errors import MalformedResponse
from routing.providers.pivot.chat_completion import (
    answer_from_openai,
    assistant_message,
    chat_completion,
    completion_choice,
)

_FROM_BEDROCK = {
    "end_turn": FINISH_STOP,
    "stop_sequence": FINISH_STOP,
    "max_tokens": FINISH_LENGTH,
    "model_context_window_exceeded": FINISH_LENGTH,
    "tool_use": FINISH_TOOL_CALLS,
    "guardrail_intervened": FINISH_CONTENT_FILTER,
    "content_filtered": FINISH_CONTENT_FILTER,
}


def finish_from_bedrock(reason: object, *, json_answer: bool = False) -> str:
    """The normalised finish word; the forced JSON tool's ``tool_use`` is a plain ``stop``."""
    finish = _FROM_BEDROCK.get(reason, FINISH_UNKNOWN) if isinstance(reason, str) else FINISH_UNKNOWN
    return FINISH_STOP if json_answer and finish == FINISH_TOOL_CALLS else finish


def _count(value: Any) -> int:
    return value if isinstance(value, int) and not isinstance(value, bool) and value > 0 else 0


def usage_from_bedrock(data: Any) -> Usage:
    """Usage from a Converse ``usage`` object (also the stream's ``metadata.usage``)."""
    usage = object_or_empty(data)
    cache_read = _count(usage.get("cacheReadInputTokens"))
    cache_write = _count(usage.get("cacheWriteInputTokens"))
    return Usage(
        input_tokens=_count(usage.get("inputTokens")) + cache_read + cache_write,
        output_tokens=_count(usage.get("outputTokens")),
        cached_input_tokens=cache_read,
        cache_creation_tokens=cache_write,
    )


def tool_call_of(block: dict[str, Any]) -> dict[str, Any]:
    """A Converse ``toolUse`` block in OpenAI's shape (arguments as a JSON string)."""
    tool_input = block.get("input")
    return {
        "id": str(block.get("toolUseId") or ""),
        "type": "function",
        "function": {
            "name": str(block.get("name") or ""),
            "arguments": json.dumps(tool_input if tool_input is not None else {}, ensure_ascii=False,
                                    separators=(",", ":")),
        },
    }


def bedrock_to_openai_completion(data: Any, *, public_model: str, created: int) -> tuple[dict[str, Any], Answer]:
    """The chat completion equivalent to a Converse answer, and its Answer (with the normalised finish word)."""
    if not isinstance(data, dict):
        raise MalformedResponse("the upstream response is not a JSON object")
    message = object_or_empty(data.get("output")).get("message")
    if not isinstance(message, dict) or not isinstance(message.get("content"), list):
        raise MalformedResponse("the Bedrock response has no output.message.content")
    texts: list[str] = []
    thoughts: list[str] = []
    calls: list[dict[str, Any]] = []
    json_answer = False
    thinking: list[ThinkingBlock] = []  # Claude's signed reasoning, for the id of the next tool call (thinking_ids)
    for block in list_or_empty(message.get("content")):
        if not isinstance(block, dict):
            continue
        if isinstance(block.get("text"), str):
            texts.append(block["text"])
        elif isinstance(block.get("toolUse"), dict):
            use = block["toolUse"]
            if use.get("name") == JSON_TOOL:
                json_answer = True
                texts.append(tool_call_of(use)["function"]["arguments"])
            else:
                call = tool_call_of(use)
                call["id"], thinking = id_with_thinking(call["id"], thinking), []
                calls.append(call)
        elif isinstance(block.get("reasoningContent"), dict):
            content = block["reasoningContent"]
            reasoning = object_or_empty(content.get("reasoningText"))
            if isinstance(reasoning.get("text"), str):
                thoughts.append(reasoning["text"])
                signature = reasoning.get("signature")
                thinking.append(ThinkingBlock(THINKING, reasoning["text"], signature if isinstance(signature, str)
                                              else ""))
            elif isinstance(content.get("redactedContent"), str):
                thinking.append(ThinkingBlock(REDACTED, content["redactedContent"]))
    text = "".join(texts)
    finish = finish_from_bedrock(data.get("stopReason"), json_answer=json_answer and not calls)
    message = assistant_message(text, "".join(thoughts) if thoughts else None, calls)
    body = chat_completion(
        upstream_id=None,  # Converse answers carry no id (the request id is a header)
        created=created,
        model=public_model,
        choices=[completion_choice(message, finish)],
        usage=usage_from_bedrock(data.get("usage")),
    )
    return body, dataclasses.replace(answer_from_openai(body), finish_reason=finish)

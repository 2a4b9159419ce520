"""Cohere Chat v2 responses -> OpenAI chat completions (and, through them, Anthropic messages).

A Cohere answer holds ``message.content`` (``text`` and ``thinking`` items), ``message.tool_calls`` in
OpenAI's own shape, and ``message.tool_plan``: the words the model says before its calls, which become
the OpenAI message's content. ``finish_reason`` is one of COMPLETE, STOP_SEQUENCE, MAX_TOKENS, TOOL_CALL,
ERROR and TIMEOUT. Usage comes twice: ``billed_units`` (what Cohere charges for, and so what the cost
is computed from) and ``tokens`` (the model's own count, prompt template included), read when the
billed units are absent; ``cached_tokens`` is the cached part of the input.
"""

from __future__ import annotations

import dataclasses
import json
from typing import Any

from routing.core.answer import (
    FINISH_LENGTH,
    FINISH_STOP,
    FINISH_TOOL_CALLS,
    FINISH_UNKNOWN,
    Answer,
    Usage,
)
from routing.providers.common.shape import list_or_empty, object_or_empty
from routing.providers.errors import MalformedResponse
from routing.providers.pivot.chat_completion import (
    answer_from_openai,
    assistant_message,
    chat_completion,
    completion_choice,
)

_FROM_COHERE = {
    "COMPLETE": FINISH_STOP,
    "STOP_SEQUENCE": FINISH_STOP,
    "MAX_TOKENS": FINISH_LENGTH,
    "TOOL_CALL": FINISH_TOOL_CALLS,
}


def finish_from_cohere(reason: object) -> str:
    """The normalised finish word; ERROR and TIMEOUT (an answer cut by the provider) are ``unknown``."""
    return _FROM_COHERE.get(reason, FINISH_UNKNOWN) if isinstance(reason, str) else FINISH_UNKNOWN


def _count(value: Any) -> int:
    if isinstance(value, bool) or not isinstance(value, int | float) or value <= 0:
        return 0
    return int(value)


def usage_from_cohere(data: Any) -> Usage:
    """Usage from a Cohere ``usage`` object: billed units first, the model's token counts otherwise."""
    usage = object_or_empty(data)
    billed = object_or_empty(usage.get("billed_units"))
    tokens = object_or_empty(usage.get("tokens"))
    source = billed if "input_tokens" in billed or "output_tokens" in billed else tokens
    return Usage(
        input_tokens=_count(source.get("input_tokens")),
        output_tokens=_count(source.get("output_tokens")),
        cached_input_tokens=_count(usage.get("cached_tokens")),
    )


def tool_call_of(call: Any) -> dict[str, Any]:
    """A Cohere tool call in OpenAI's shape (arguments as a JSON string)."""
    call = object_or_empty(call)
    function = object_or_empty(call.get("function"))
    arguments = function.get("arguments")
    return {
        "id": str(call.get("id") or ""),
        "type": "function",
        "function": {
            "name": str(function.get("name") or ""),
            "arguments": arguments if isinstance(arguments, str) else json.dumps(arguments or {}),
        },
    }


def cohere_to_openai_completion(data: Any, *, public_model: str, created: int) -> tuple[dict[str, Any], Answer]:
    """The chat completion equivalent to a Cohere answer, and its Answer (with Cohere's own finish word)."""
    if not isinstance(data, dict):
        raise MalformedResponse("the upstream response is not a JSON object")
    message = data.get("message")
    if not isinstance(message, dict):
        raise MalformedResponse("the Cohere response has no message")
    texts: list[str] = []
    thoughts: list[str] = []
    for item in list_or_empty(message.get("content")):
        if not isinstance(item, dict):
            continue
        if item.get("type") == "text" and isinstance(item.get("text"), str):
            texts.append(item["text"])
        elif item.get("type") == "thinking" and isinstance(item.get("thinking"), str):
            thoughts.append(item["thinking"])
    calls = [tool_call_of(call) for call in list_or_empty(message.get("tool_calls"))]
    text = "".join(texts)
    plan = message.get("tool_plan")
    if not text and isinstance(plan, str):
        text = plan
    finish = finish_from_cohere(data.get("finish_reason"))
    message = assistant_message(text, "".join(thoughts) if thoughts else None, calls)
    body = chat_completion(
        upstream_id=data.get("id"),
        created=created,
        model=public_model,
        choices=[completion_choice(message, finish)],
        usage=usage_from_cohere(data.get("usage")),
    )
    return body, dataclasses.replace(answer_from_openai(body), finish_reason=finish)

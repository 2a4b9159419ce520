"""An OpenAI chat completion -> the Anthropic Messages response an Anthropic client reads, whatever the upstream."""

from __future__ import annotations

import json
from typing import Any

from routing.core.answer import FINISH_CONTENT_FILTER
from routing.providers.common.finish_reasons import anthropic_stop_reason, finish_from_openai
from routing.providers.common.ids import anthropic_message_id, anthropic_tool_id
from routing.providers.common.usage import anthropic_usage, usage_from_openai
from routing.providers.errors import MalformedResponse
from routing.providers.pivot.chat_completion import first_message, message_text, reasoning_text, tool_calls_of


def openai_to_anthropic_message(body: Any, *, public_model: str) -> dict[str, Any]:
    """The Anthropic Messages response equivalent to a chat completion (first choice only)."""
    choice, message = first_message(body)
    content: list[dict[str, Any]] = []
    reasoning = reasoning_text(message)
    if reasoning:
        content.append({"type": "thinking", "thinking": reasoning, "signature": ""})
    text = message_text(message)
    if text:
        content.append({"type": "text", "text": text})
    refusal = message.get("refusal")
    if isinstance(refusal, str) and refusal:
        content.append({"type": "text", "text": refusal})
    for call in tool_calls_of(message):
        try:
            arguments = json.loads(call.arguments) if call.arguments else {}
        except (json.JSONDecodeError, RecursionError) as exc:
            raise MalformedResponse(f"tool call '{call.name}' has arguments that are not JSON") from exc
        if not isinstance(arguments, dict):
            raise MalformedResponse(f"tool call '{call.name}' has arguments that are not a JSON object")
        content.append({"type": "tool_use", "id": anthropic_tool_id(call.id), "name": call.name, "input": arguments})
    finish = FINISH_CONTENT_FILTER if refusal else finish_from_openai(choice.get("finish_reason"))
    return {
        "id": anthropic_message_id(body.get("id")),
        "type": "message",
        "role": "assistant",
        "model": public_model,
        "content": content,
        "stop_reason": anthropic_stop_reason(finish),
        "stop_sequence": None,
        "usage": anthropic_usage(usage_from_openai(body.get("usage"))),
    }

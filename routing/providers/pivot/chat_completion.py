"""OpenAI chat completion responses, the pivot every upstream answer is read into: the Answer they carry, and
the envelope the other formats' translators build their answers in."""

from __future__ import annotations

import json
from typing import Any

from routing.core.answer import Answer, ToolCall, Usage
from routing.providers.common.finish_reasons import finish_from_openai, openai_finish
from routing.providers.common.ids import openai_response_id
from routing.providers.common.shape import list_or_empty, object_or_empty
from routing.providers.common.usage import openai_usage
from routing.providers.errors import MalformedResponse


def first_message(body: Any) -> tuple[dict[str, Any], dict[str, Any]]:
    """The first choice and its message, or MalformedResponse when the envelope is not a chat completion."""
    if not isinstance(body, dict) or not isinstance(body.get("choices"), list):
        raise MalformedResponse("the upstream response has no 'choices' array")
    choices = body["choices"]
    if not choices:
        raise MalformedResponse("the upstream response has an empty 'choices' array")
    choice = choices[0]
    message = choice.get("message") if isinstance(choice, dict) else None
    if not isinstance(message, dict):
        raise MalformedResponse("the upstream response's first choice has no message")
    return choice, message


def message_text(message: dict[str, Any]) -> str:
    """The text content of a message whose content is a string, null or a list of text parts."""
    content = message.get("content")
    if isinstance(content, str):
        return content
    if isinstance(content, list):
        return "".join(p.get("text", "") for p in content if isinstance(p, dict) and p.get("type") == "text")
    return ""


def reasoning_text(message_or_delta: dict[str, Any]) -> str:
    """Reasoning text: ``reasoning_content`` (DeepSeek, vLLM, this gateway) or ``reasoning`` (OpenRouter,
    newer vLLM, Groq)."""
    value = message_or_delta.get("reasoning_content")
    if not isinstance(value, str):
        value = message_or_delta.get("reasoning")
    return value if isinstance(value, str) else ""


def tool_calls_of(message: dict[str, Any]) -> tuple[ToolCall, ...]:
    raw = message.get("tool_calls")
    if not raw:  # most answers: none, null or absent
        return ()
    calls = []
    for call in list_or_empty(raw):
        if not isinstance(call, dict):
            continue
        function = object_or_empty(call.get("function"))
        arguments = function.get("arguments")
        calls.append(
            ToolCall(
                id=str(call.get("id") or ""),
                name=str(function.get("name") or ""),
                arguments=arguments if isinstance(arguments, str) else json.dumps(arguments or {}),
            )
        )
    return tuple(calls)


def answer_from_openai(body: Any) -> Answer:
    """The first choice of a chat completion as an Answer."""
    choice, message = first_message(body)
    return Answer(
        text=message_text(message),
        finish_reason=finish_from_openai(choice.get("finish_reason")),
        tool_calls=tool_calls_of(message),
        reasoning_text=reasoning_text(message),
    )


def assistant_message(text: str, reasoning: str | None, tool_calls: list[dict[str, Any]]) -> dict[str, Any]:
    """An answer as OpenAI's assistant message: ``content`` null only when tool calls stand in its place, the
    reasoning as ``reasoning_content`` (the extension DeepSeek introduced) unless ``reasoning`` is None."""
    message: dict[str, Any] = {"role": "assistant", "content": text if text or not tool_calls else None}
    if reasoning is not None:
        message["reasoning_content"] = reasoning
    if tool_calls:
        message["tool_calls"] = tool_calls
    return message


def completion_choice(message: dict[str, Any], finish: str, *, index: int = 0) -> dict[str, Any]:
    """A choice of a chat completion, its normalised finish word as OpenAI's (``unknown`` is ``stop``)."""
    return {"index": index, "message": message, "finish_reason": openai_finish(finish), "logprobs": None}


def chat_completion(*, upstream_id: object, created: int, model: str, choices: list[dict[str, Any]],
                    usage: Usage) -> dict[str, Any]:
    """The envelope of a chat completion, in the order of OpenAI's own answers; its id is the upstream's (as a
    ``chatcmpl-`` id) or a new one when the upstream gave none."""
    return {
        "id": openai_response_id(upstream_id),
        "object": "chat.completion",
        "created": created,
        "model": model,
        "choices": choices,
        "usage": openai_usage(usage),
    }

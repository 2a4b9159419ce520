"""A chat completion -> the Response object of the Responses API, and the parts both directions share.

Output items, in the order OpenAI's own answers use: a ``reasoning`` item (the provider's reasoning text as
``reasoning_text`` content), a ``message`` with one ``output_text`` part (or a ``refusal``), then one
``function_call`` item per tool call (``call_id`` is the provider's tool call id, which the client echoes in its
``function_call_output``). A truncated answer is ``status: "incomplete"`` with ``incomplete_details.reason``
``max_output_tokens`` (``content_filter`` for a filtered one). The request's settings are echoed as OpenAI
echoes them, with the public model name.

Claude's signed thinking, which the chat translation folds into a tool call id (thinking_ids), is split back out:
the ``call_id`` is the provider's own id and the payload is the ``encrypted_content`` of the reasoning item before
that call (the first call's on the leading reasoning item, a later call's on a reasoning item of its own), which
the client sends back with its next turn.
"""

from __future__ import annotations

from typing import Any

from routing.core.answer import FINISH_CONTENT_FILTER, FINISH_LENGTH, Answer, Usage
from routing.providers.common.finish_reasons import finish_from_openai
from routing.providers.common.thinking_ids import split_payload
from routing.providers.common.usage import usage_from_openai
from routing.providers.pivot.chat_completion import first_message, message_text, reasoning_text, tool_calls_of
from routing.providers.responses_api.ids import item_id
from routing.providers.responses_api.inbound_request import ResponsesRequest

INCOMPLETE_REASONS = {FINISH_LENGTH: "max_output_tokens", FINISH_CONTENT_FILTER: "content_filter"}


def responses_usage(usage: Usage) -> dict[str, Any]:
    """A Responses ``usage`` object (input includes cached tokens, output includes reasoning ones)."""
    return {
        "input_tokens": usage.input_tokens,
        "input_tokens_details": {"cached_tokens": usage.cached_input_tokens,
                                 "cache_write_tokens": usage.cache_creation_tokens},
        "output_tokens": usage.output_tokens,
        "output_tokens_details": {"reasoning_tokens": usage.reasoning_tokens},
        "total_tokens": usage.total_tokens,
    }


def status_of(finish: str) -> tuple[str, dict[str, str] | None]:
    """The response ``status`` and ``incomplete_details`` for a normalised finish reason."""
    reason = INCOMPLETE_REASONS.get(finish)
    return ("incomplete", {"reason": reason}) if reason else ("completed", None)


def echo(request: ResponsesRequest) -> dict[str, Any]:
    """The request's settings as a Response repeats them (OpenAI's defaults where the request said nothing)."""
    body = request.body
    reasoning = body.get("reasoning") if isinstance(body.get("reasoning"), dict) else {}
    text = body.get("text") if isinstance(body.get("text"), dict) else {}
    return {
        "instructions": request.instructions,
        "max_output_tokens": body.get("max_output_tokens"),
        "metadata": body.get("metadata") or {},
        "parallel_tool_calls": body.get("parallel_tool_calls", True),
        "previous_response_id": request.previous_response_id,
        "reasoning": {"effort": reasoning.get("effort"), "summary": reasoning.get("summary")},
        "store": request.store,
        "temperature": body.get("temperature", 1.0),
        "text": {"format": text.get("format") or {"type": "text"}, **({"verbosity": text["verbosity"]}
                                                                         if text.get("verbosity") else {})},
        "tool_choice": body.get("tool_choice", "auto"),
        "tools": body.get("tools") or [],
        "top_p": body.get("top_p", 1.0),
        "truncation": body.get("truncation", "disabled"),
        "user": body.get("user"),
    }


def response_object(
    *, response_id: str, public_model: str, created: int, request: ResponsesRequest, status: str,
    output: list[dict[str, Any]], usage: Usage | None, incomplete_details: dict[str, str] | None = None,
    error: dict[str, str] | None = None,
) -> dict[str, Any]:
    return {
        "id": response_id,
        "object": "response",
        "created_at": created,
        "status": status,
        "background": False,
        "error": error,
        "incomplete_details": incomplete_details,
        "model": public_model,
        "output": output,
        **echo(request),
        "usage": responses_usage(usage) if usage is not None else None,
    }


def message_item(text: str, *, item: str, refusal: str = "", status: str = "completed") -> dict[str, Any]:
    content: list[dict[str, Any]] = []
    if text:
        content.append(output_text_part(text))
    if refusal:
        content.append({"type": "refusal", "refusal": refusal})
    return {"id": item, "type": "message", "status": status, "role": "assistant",
            "content": content}


def output_text_part(text: str) -> dict[str, Any]:
    return {"type": "output_text", "text": text, "annotations": [], "logprobs": []}


def function_call_item(call_id: str, name: str, arguments: str, *, item: str,
                       status: str = "completed") -> dict[str, Any]:
    return {"id": item, "type": "function_call", "status": status, "call_id": call_id,
            "name": name, "arguments": arguments}


def reasoning_item(text: str, *, item: str, encrypted: str = "") -> dict[str, Any]:
    """A reasoning item: its text, and the signed thinking it carries as ``encrypted_content`` (if any)."""
    out: dict[str, Any] = {"id": item, "type": "reasoning", "summary": [],
                           "content": [{"type": "reasoning_text", "text": text}] if text else []}
    if encrypted:
        out["encrypted_content"] = encrypted
    return out


def output_of_answer(answer: Answer, *, response_id: str, refusal: str = "") -> list[dict[str, Any]]:
    """The output items of an answer, their ids made for ``response_id``."""
    calls = [(split_payload(call.id), call) for call in answer.tool_calls]
    leading = calls[0][0][1] if calls else ""
    output: list[dict[str, Any]] = []
    if answer.reasoning_text or leading:
        output.append(reasoning_item(answer.reasoning_text, item=item_id("rs", response_id), encrypted=leading))
    if answer.text or refusal:
        output.append(message_item(answer.text, item=item_id("msg", response_id), refusal=refusal))
    for number, ((call_id, payload), call) in enumerate(calls):
        if payload and number > 0:
            output.append(reasoning_item("", item=item_id("rs", response_id), encrypted=payload))
        output.append(function_call_item(call_id, call.name, call.arguments or "{}", item=item_id("fc", response_id)))
    return output


def chat_completion_to_response(
    completion: Any, *, request: ResponsesRequest, response_id: str, public_model: str, created: int
) -> dict[str, Any]:
    """The Response object equivalent to a chat completion (its first choice)."""
    choice, message = first_message(completion)
    refusal = message.get("refusal") if isinstance(message.get("refusal"), str) else ""
    finish = FINISH_CONTENT_FILTER if refusal else finish_from_openai(choice.get("finish_reason"))
    answer = Answer(text=message_text(message), finish_reason=finish, tool_calls=tool_calls_of(message),
                    reasoning_text=reasoning_text(message))
    status, incomplete = status_of(finish)
    return response_object(
        response_id=response_id, public_model=public_model, created=created, request=request, status=status,
        output=output_of_answer(answer, response_id=response_id, refusal=refusal),
        usage=usage_from_openai(completion.get("usage")), incomplete_details=incomplete,
    )

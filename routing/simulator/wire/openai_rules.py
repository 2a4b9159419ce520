"""The tool call pairing OpenAI enforces, with its own wording: on chat completions every ``tool`` message answers
a ``tool_calls`` id of the assistant message before it and every such id is answered; on Responses every
``function_call_output`` answers a ``function_call`` of the same input (the simulator keeps no stored
responses, as an upstream call with ``store: false`` has none) and every ``function_call`` has its output.
Each refusal is a 400 ``invalid_request_error`` naming the parameter as OpenAI names it.
"""

from __future__ import annotations

from collections.abc import Mapping, Sequence
from typing import Any

from routing.simulator.wire.base import RequestError


def _call_ids(message: Mapping[str, Any]) -> list[str]:
    calls = message.get("tool_calls")
    if not isinstance(calls, list):
        return []
    return [call["id"] for call in calls if isinstance(call, Mapping) and isinstance(call.get("id"), str)]


def check_chat_tool_messages(messages: Sequence[Any]) -> None:
    """Refuse, as OpenAI does, a ``tool`` message that answers nothing and a tool call left unanswered."""
    asked: list[str] = []  # the tool_calls ids of the assistant message before the current run of tool messages
    asked_at = -1
    answered: set[str] = set()
    for index, message in enumerate(messages):
        if not isinstance(message, Mapping):
            continue
        role = message.get("role")
        if role == "tool":
            if asked_at < 0:
                raise RequestError("Invalid parameter: messages with role 'tool' must be a response to a "
                                   "preceeding message with 'tool_calls'.", f"messages.[{index}].role")
            call_id = message.get("tool_call_id")
            if not isinstance(call_id, str) or not call_id:
                raise RequestError("Missing parameter 'tool_call_id': messages with role 'tool' must have a "
                                   "'tool_call_id'.", f"messages.[{index}].tool_call_id")
            if call_id not in asked:
                raise RequestError(f"Invalid parameter: 'tool_call_id' of '{call_id}' not found in 'tool_calls' "
                                   "of previous message.", f"messages.[{index}].tool_call_id")
            answered.add(call_id)
            continue
        _refuse_unanswered(asked, answered, asked_at)
        asked = _call_ids(message) if role == "assistant" else []
        asked_at, answered = (index if asked else -1), set()
    _refuse_unanswered(asked, answered, asked_at)


def _refuse_unanswered(asked: list[str], answered: set[str], asked_at: int) -> None:
    missing = [call_id for call_id in asked if call_id not in answered]
    if missing:
        raise RequestError("An assistant message with 'tool_calls' must be followed by tool messages responding to "
                           "each 'tool_call_id'. The following tool_call_ids did not have response messages: "
                           + ", ".join(missing), f"messages.[{asked_at}].role")


def check_responses_tool_items(items: Sequence[Mapping[str, Any]]) -> None:
    """Refuse, as OpenAI does, a ``function_call_output`` with no ``function_call`` of its ``call_id`` in the input
    and a ``function_call`` with no output."""
    calls = [item.get("call_id") for item in items if item.get("type") == "function_call"]
    outputs = {item.get("call_id") for item in items if item.get("type") == "function_call_output"}
    for item in items:
        if item.get("type") == "function_call_output" and item.get("call_id") not in calls:
            raise RequestError(f"No tool call found for function call output with call_id {item.get('call_id')}.",
                               "input")
    for call_id in calls:
        if call_id not in outputs:
            raise RequestError(f"No tool output found for function call {call_id}.", "input")

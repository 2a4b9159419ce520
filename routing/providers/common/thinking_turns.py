"""Whether a chat conversation can keep Claude's thinking on: its final tool turn must open with thinking.

Anthropic refuses a request with thinking enabled whose final assistant turn holds ``tool_use`` but does not
start with a ``thinking``/``redacted_thinking`` block. The translations rebuild those blocks from the tool call
ids (thinking_ids); when the client's turn carries none (a turn another provider answered, one answered with
thinking off, an id the client rewrote), the request is sent with thinking disabled instead of being refused
upstream, and the gateway says so (``X-GoModel-Thinking: off``, the attempt's ``thinking`` in the audit event).
"""

from __future__ import annotations

from collections.abc import Mapping
from typing import Any

from routing.providers.common.thinking_ids import split_id

_TRANSPARENT_ROLES = ("system", "developer")  # lifted out of the turns, so they do not split an assistant turn


def thinking_requested(body: Mapping[str, Any]) -> bool:
    """The chat body asks for thinking (a ``reasoning_effort`` other than ``none``)."""
    effort = body.get("reasoning_effort")
    return effort is not None and effort != "none"


def final_tool_turn_has_thinking(messages: Any) -> bool | None:
    """For chat ``messages``: None when the final assistant turn calls no tool (no thinking is required), else
    whether its first tool call carries the thinking that opens it."""
    if not isinstance(messages, list):
        return None
    run: list[Mapping[str, Any]] = []
    for message in reversed(messages):
        if not isinstance(message, Mapping):
            return None
        role = message.get("role")
        if role == "assistant":
            run.append(message)
        elif role in _TRANSPARENT_ROLES:
            continue
        elif run:
            break
    if not run:
        return None
    run.reverse()  # the turn's messages in order: consecutive assistant messages make one Anthropic turn
    if not any(message.get("tool_calls") for message in run):
        return None
    calls = run[0].get("tool_calls")
    if not isinstance(calls, list) or not calls or not isinstance(calls[0], Mapping):
        return False  # the merged turn opens with text
    call_id = calls[0].get("id")
    return isinstance(call_id, str) and bool(split_id(call_id)[1])


def thinking_turned_off(body: Mapping[str, Any]) -> bool:
    """Thinking was asked for, but the conversation's final tool turn lost its thinking: it is sent off."""
    return thinking_requested(body) and final_tool_turn_has_thinking(body.get("messages")) is False

"""Stop reasons between the wire formats and the normalised words of routing.core.answer.

Validation reads the normalised word, so a reason with no honest equivalent becomes ``unknown`` there
(a contract that requires ``stop`` then refuses it) while the client still gets a word its SDK accepts.
"""

from __future__ import annotations

from routing.core.answer import (
    FINISH_CONTENT_FILTER,
    FINISH_LENGTH,
    FINISH_STOP,
    FINISH_TOOL_CALLS,
    FINISH_UNKNOWN,
)

_FROM_OPENAI = {
    "stop": FINISH_STOP,
    "length": FINISH_LENGTH,
    "tool_calls": FINISH_TOOL_CALLS,
    "function_call": FINISH_TOOL_CALLS,
    "content_filter": FINISH_CONTENT_FILTER,
}

_FROM_ANTHROPIC = {
    "end_turn": FINISH_STOP,
    "stop_sequence": FINISH_STOP,
    "max_tokens": FINISH_LENGTH,
    "model_context_window_exceeded": FINISH_LENGTH,
    "tool_use": FINISH_TOOL_CALLS,
    "refusal": FINISH_CONTENT_FILTER,
}

_TO_ANTHROPIC = {
    FINISH_STOP: "end_turn",
    FINISH_LENGTH: "max_tokens",
    FINISH_TOOL_CALLS: "tool_use",
    FINISH_CONTENT_FILTER: "refusal",
}

_FROM_GEMINI = {
    "STOP": FINISH_STOP,
    "MAX_TOKENS": FINISH_LENGTH,
    "SAFETY": FINISH_CONTENT_FILTER,
    "RECITATION": FINISH_CONTENT_FILTER,
    "BLOCKLIST": FINISH_CONTENT_FILTER,
    "PROHIBITED_CONTENT": FINISH_CONTENT_FILTER,
    "SPII": FINISH_CONTENT_FILTER,
    "IMAGE_SAFETY": FINISH_CONTENT_FILTER,
    "IMAGE_PROHIBITED_CONTENT": FINISH_CONTENT_FILTER,
    "IMAGE_RECITATION": FINISH_CONTENT_FILTER,
}


def finish_from_openai(reason: object) -> str:
    return _FROM_OPENAI.get(reason, FINISH_UNKNOWN) if isinstance(reason, str) else FINISH_UNKNOWN


def finish_from_anthropic(reason: object) -> str:
    return _FROM_ANTHROPIC.get(reason, FINISH_UNKNOWN) if isinstance(reason, str) else FINISH_UNKNOWN


def finish_from_gemini(reason: object, *, has_tool_calls: bool) -> str:
    """Gemini says STOP after function calls too; OpenAI and Anthropic clients expect a tool-call reason."""
    finish = _FROM_GEMINI.get(reason, FINISH_UNKNOWN) if isinstance(reason, str) else FINISH_UNKNOWN
    return FINISH_TOOL_CALLS if finish == FINISH_STOP and has_tool_calls else finish


def openai_finish(finish: str) -> str:
    """The OpenAI wire word for a normalised reason; ``unknown`` becomes ``stop`` (the SDK has no other)."""
    return finish if finish in _FROM_OPENAI.values() else FINISH_STOP


def anthropic_stop_reason(finish: str) -> str:
    """The Anthropic wire word for a normalised reason; ``unknown`` becomes ``end_turn``."""
    return _TO_ANTHROPIC.get(finish, "end_turn")

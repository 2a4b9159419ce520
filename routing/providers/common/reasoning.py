"""Reasoning effort (OpenAI) <-> thinking budget in tokens (Anthropic, Gemini).

One table for every direction, so a request that crosses formats twice lands where it started:
``effort_for_budget(budget_for_effort(e)) == e`` for low, medium and high.
"""

from __future__ import annotations

from typing import Any

from routing.providers.common.shape import as_str
from routing.providers.errors import RequestShapeError

MIN_ANTHROPIC_BUDGET = 1024  # Anthropic refuses a smaller budget_tokens

BUDGET_FOR_EFFORT = {
    "minimal": 1024,
    "low": 2048,
    "medium": 8192,
    "high": 16384,
    "xhigh": 32768,
    "max": 32768,
}

# Anthropic's output_config.effort words -> OpenAI reasoning_effort words.
EFFORT_FROM_ANTHROPIC = {"low": "low", "medium": "medium", "high": "high", "xhigh": "xhigh", "max": "xhigh"}


def budget_for_effort(effort: str) -> int | None:
    """Thinking tokens for an OpenAI ``reasoning_effort``; None for an effort word not in the table."""
    return BUDGET_FOR_EFFORT.get(effort)


def thinking_budget(effort: Any) -> int:
    """Thinking tokens for a client's ``reasoning_effort`` other than ``none``; RequestShapeError for a value that
    is not an effort word in the table."""
    budget = budget_for_effort(as_str(effort, "reasoning_effort"))
    if budget is None:
        raise RequestShapeError(f"unknown reasoning_effort '{effort}'", "reasoning_effort")
    return budget


def effort_for_budget(budget: int) -> str:
    """The OpenAI ``reasoning_effort`` closest to a thinking budget (low, medium or high)."""
    if budget <= BUDGET_FOR_EFFORT["low"]:
        return "low"
    if budget <= BUDGET_FOR_EFFORT["medium"]:
        return "medium"
    return "high"

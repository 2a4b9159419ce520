"""Audit events shaped as the request path builds them (docs/audit.md), for tests and the fault harness."""

from __future__ import annotations

import copy
import time
import uuid
from typing import Any

_TEMPLATE: dict[str, Any] = {
    "operation_id": "op-1",
    "key_id": 3,
    "key_name": "ci-bot",
    "session_hash": "5e55" * 16,
    "session_source": "x-session-id",
    "endpoint": "openai",
    "requested_model": "normal",
    "stream": False,
    "tier": {
        "alias": "normal",
        "tier": "hard",
        "target": "normal-hard",
        "score": 7,
        "signals": [
            {"name": "code", "points": 3, "detail": "fenced code block"},
            {"name": "length", "points": 4, "detail": "prompt over 6000 characters"},
        ],
        "reasoning_shortcut": False,
        "forced": False,
        "pinned": True,
        "escalated": True,
        "pin_before": "easy",
    },
    "selection": {
        "virtual_model": "normal-hard",
        "strategy": "adaptive",
        "winner": "anthropic/claude",
        "why": "p2c: lower load",
        "affinity": None,
        "candidates": [
            {"target": "anthropic/claude", "weight": 1.0, "latency_ms": 120.0, "in_flight": 2,
             "cooldown_until": None, "status": "healthy"},
            {"target": "openai/gpt-5", "weight": 1.0, "latency_ms": 300.0, "in_flight": 5,
             "cooldown_until": None, "status": "healthy"},
        ],
        "skipped": [{"target": "google/gemini", "reason": "cooling"}],
        "rejected": [{"target": "local/tiny", "reason": "context window 4096 below the estimated input"}],
        "nested": [{"virtual_model": "claude-pool", "strategy": "weighted", "winner": "anthropic/claude",
                    "why": "weighted pick", "affinity": None, "candidates": [], "skipped": []}],
    },
    "target": "anthropic/claude",
    "status": 200,
    "error_class": None,
    "error_message": None,
    "latency_ms": 812.3,
    "ttfb_ms": 95.1,
    "usage": {"input_tokens": 1000, "output_tokens": 200, "cached_input_tokens": 0, "reasoning_tokens": 0},
    "cost_usd": 0.012,
    "validation": "accepted",
    "config_version": 12,
    "workload": None,
    "deadline_ms": 8000,
    "prompt_text": "Please review this code for alice@example.com, card 4111 1111 1111 1111.",
    "output_text": "Looks fine.",
    "attempts": [
        {"attempt_id": "a1", "seq": 1, "target": "openai/gpt-5", "provider": "openai", "status": 429,
         "error_class": "transient", "reason": "rate_limited", "latency_ms": 30.0, "ttfb_ms": None,
         "usage": {}, "cost_usd": None, "action": "fallback", "validation": "not_run",
         "health": {"status": "healthy", "latency_ms": 100.0, "in_flight": 1, "cooldown_until": None}},
        {"attempt_id": "a2", "seq": 2, "target": "anthropic/claude", "provider": "anthropic", "status": 200,
         "error_class": None, "reason": "", "latency_ms": 780.0, "ttfb_ms": 95.1,
         "usage": {"input_tokens": 1000, "output_tokens": 200}, "cost_usd": 0.012, "action": "accepted",
         "validation": "accepted",
         "health": {"status": "healthy", "latency_ms": 120.0, "in_flight": 2, "cooldown_until": None}},
    ],
}


def make_event(request_id: str | None = None, **overrides: Any) -> dict[str, Any]:
    """A complete event; ``overrides`` replace top-level fields."""
    event = copy.deepcopy(_TEMPLATE)
    event["request_id"] = request_id or uuid.uuid4().hex
    event["created_at"] = time.time()
    event.update(overrides)
    return event

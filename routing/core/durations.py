"""Durations written the Go way (``30s``, ``5m``, ``1h30m``, ``250ms``; protobuf's ``1.5s`` too).

One parser for the settings (``PRO_ROUTING_COOLDOWN_BASE=30s``) and for what providers send (OpenAI's
``x-ratelimit-reset-requests: 6m0s``, Gemini's ``retryDelay: "32s"``).
"""

from __future__ import annotations

import re

_DURATION_PART = re.compile(r"(\d+(?:\.\d+)?)(ns|us|µs|ms|s|m|h)")
_UNIT_SECONDS = {"ns": 1e-9, "us": 1e-6, "µs": 1e-6, "ms": 1e-3, "s": 1.0, "m": 60.0, "h": 3600.0}


def parse_duration(text: str) -> float | None:
    """Seconds in a Go or protobuf duration, or None when ``text`` is not one. A bare ``0`` is zero, as in Go."""
    text = text.strip()
    if text == "0":
        return 0.0
    if not text:
        return None
    total = 0.0
    position = 0
    for match in _DURATION_PART.finditer(text):
        if match.start() != position:
            return None
        total += float(match.group(1)) * _UNIT_SECONDS[match.group(2)]
        position = match.end()
    return total if position == len(text) else None

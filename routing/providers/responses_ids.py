"""Ids of the Responses API: ``resp_`` for a response, ``msg_``/``fc_``/``rs_`` for its output items.

A response id the gateway makes starts with its creation time in milliseconds (12 hex digits) before 36 random
ones: a follow-up that names a response a moment old can tell that the response's record may still be on its way
to the database (routing/clients/responses_store.py), and wait for it rather than call the id unknown.
"""

from __future__ import annotations

import re
import secrets

_GATEWAY_ID = re.compile(r"resp_([0-9a-f]{12})[0-9a-f]{36}")


def new_response_id(now_unix: float) -> str:
    return f"resp_{int(now_unix * 1000):012x}{secrets.token_hex(18)}"


def response_created_unix(response_id: str) -> float | None:
    """When a gateway-made response id was made, or None for any other id."""
    match = _GATEWAY_ID.fullmatch(response_id)
    return int(match.group(1), 16) / 1000 if match else None


def item_id(prefix: str) -> str:
    """A new output item id: ``msg``, ``fc`` or ``rs`` followed by 48 hex digits."""
    return f"{prefix}_{secrets.token_hex(24)}"

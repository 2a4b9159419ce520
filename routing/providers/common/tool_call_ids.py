"""The tool call ids the gateway mints (``call_<24 hex>``) for calls the upstream names no id for, and the
Gemini thought signature such an id carries through the client and back.

Gemini 3 refuses a conversation whose function calls lack the ``thoughtSignature`` it issued with them.
OpenAI and Anthropic clients keep nothing but the tool call id, so the signature travels inside it:
``call_<24 hex>_ts_<signature in URL-safe base64>``. URL-safe base64 keeps the id inside Anthropic's
``[a-zA-Z0-9_-]`` pattern, so the conversation may later go to Anthropic too. A call that never came from
Gemini gets Gemini's documented sentinel that skips the check.
"""

from __future__ import annotations

import uuid

SKIP_SIGNATURE = "skip_thought_signature_validator"
_PREFIX = "call_"
_HEX_LEN = 24
_MARK = "_ts_"
_MARK_AT = len(_PREFIX) + _HEX_LEN


def new_tool_call_id(signature: str | None = None) -> str:
    """A fresh tool call id, with ``signature`` (standard base64, as Gemini sends it) folded in."""
    base = _PREFIX + uuid.uuid4().hex[:_HEX_LEN]
    if not signature:
        return base
    return base + _MARK + signature.replace("+", "-").replace("/", "_").rstrip("=")


def signature_from_id(tool_call_id: str) -> str | None:
    """The thought signature folded into an id by ``new_tool_call_id``, or None."""
    if not tool_call_id.startswith(_PREFIX) or tool_call_id[_MARK_AT : _MARK_AT + len(_MARK)] != _MARK:
        return None
    encoded = tool_call_id[_MARK_AT + len(_MARK) :]
    if not encoded:
        return None
    standard = encoded.replace("-", "+").replace("_", "/")
    return standard + "=" * (-len(standard) % 4)

"""The opaque values the simulator issues and checks back, as providers sign what a client must return unchanged
(Anthropic's thinking signatures and redacted thinking, Gemini's thought signatures).

A value is ``base64(mark + nonce + HMAC-SHA256(key, mark + nonce + payload))``: the mark says what kind of value
it is, the nonce comes from the request's token, and the key is fixed in the code, so every simulator process
accepts what any other issued and a value moved to another payload is refused.
"""

from __future__ import annotations

import base64
import binascii
import hashlib
import hmac
from typing import Any

_TOKEN_BYTES = 12


def seal(key: bytes, mark: bytes, token: str, payload: bytes = b"") -> str:
    """The value of kind ``mark`` issued for the request ``token`` (24 hex characters) over ``payload``."""
    nonce = bytes.fromhex(token)[:_TOKEN_BYTES]
    mac = hmac.new(key, mark + nonce + payload, hashlib.sha256).digest()
    return base64.b64encode(mark + nonce + mac).decode("ascii")


def sealed(key: bytes, mark: bytes, value: Any, payload: bytes = b"") -> bool:
    """Whether ``value`` is one ``seal`` issued with this key and mark over exactly ``payload``."""
    if not isinstance(value, str) or not value:
        return False
    try:
        raw = base64.b64decode(value, validate=True)
    except (binascii.Error, ValueError):
        return False
    if not raw.startswith(mark) or len(raw) != len(mark) + _TOKEN_BYTES + hashlib.sha256().digest_size:
        return False
    nonce, mac = raw[len(mark) : len(mark) + _TOKEN_BYTES], raw[len(mark) + _TOKEN_BYTES :]
    return hmac.compare_digest(mac, hmac.new(key, mark + nonce + payload, hashlib.sha256).digest())

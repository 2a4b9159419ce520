"""Ids of the Responses API: ``resp_`` for a response, ``msg_``/``fc_``/``rs_`` for its output items.

A response id the gateway makes is ``resp_`` and 40 URL-safe base64 characters: 30 bytes, which are its creation
time in milliseconds (6), a flags byte (whether the response is to be stored), 11 random bytes, and the first 12
bytes of an HMAC-SHA256 over all that and the scope (the gateway key) it was made for. The MAC's key is derived
from a secret the caller passes (the gateway's Django SECRET_KEY) with a purpose string of its own, so it is good
for nothing else. A follow-up's ``previous_response_id`` is therefore checked without the database: an id the
gateway never made, or made for another key, or for a response it did not store, is refused at once; the time in a
genuine id says whether its row may still be on its way to the database (routing/clients/responses_store.py).

Ids made before they carried a MAC (``resp_``, 12 hex digits of creation time, 36 random ones) are read as
``legacy``: only their row can say whose they are. Everything here is pure: the key is a parameter.

An output item id the gateway makes is its prefix (``msg``, ``fc``, ``rs``), ``_``, the 40 characters of the
response id it belongs to, and 6 random hex digits, unique within the response. So an ``item_reference`` to such
an item says, through its response id's MAC, whether it is this key's, to be stored and made moments ago (its
turn's row may still be on its way), without the database. Ids a provider made (an OpenAI-kind answer passed on
as it came) say nothing of the kind.
"""

from __future__ import annotations

import base64
import binascii
import hashlib
import hmac
import re
import secrets
from collections.abc import Sequence
from dataclasses import dataclass

PREFIX = "resp_"
_PURPOSE = b"gomodel.responses.response-id.v1"
_TIME_BYTES, _FLAGS_BYTES, _RANDOM_BYTES, _TAG_BYTES = 6, 1, 11, 12
_BODY_BYTES = _TIME_BYTES + _FLAGS_BYTES + _RANDOM_BYTES
_STORED = 0x01
_ISSUED = re.compile(r"resp_[A-Za-z0-9_-]{40}")  # 30 bytes: no padding, so one spelling per id
_LEGACY = re.compile(r"resp_([0-9a-f]{12})[0-9a-f]{36}")


@dataclass(frozen=True)
class ResponseIdInfo:
    """What a response id says about itself, once it is known to be one the gateway made."""

    created_unix: float
    stored: bool  # the response was to be kept (``store`` was not false)
    legacy: bool  # made before ids carried a MAC: the scope it belongs to is on its row only


def response_id_key(secret: str | bytes) -> bytes:
    """The MAC key for response ids, derived from ``secret`` for this one purpose (HMAC-SHA256)."""
    raw = secret.encode() if isinstance(secret, str) else secret
    return hmac.new(raw, _PURPOSE, hashlib.sha256).digest()


def _tag(key: bytes, scope: str, body: bytes) -> bytes:
    # The scope goes in front with a separator no scope contains, so (scope, body) pairs never collide.
    return hmac.new(key, scope.encode() + b"\x00" + body, hashlib.sha256).digest()[:_TAG_BYTES]


def new_response_id(now_unix: float, *, scope: str, stored: bool, key: bytes) -> str:
    """A new response id for ``scope`` (the gateway key's id, or ``open``), made at ``now_unix``."""
    body = (int(now_unix * 1000).to_bytes(_TIME_BYTES, "big") + bytes([_STORED if stored else 0])
            + secrets.token_bytes(_RANDOM_BYTES))
    return PREFIX + base64.urlsafe_b64encode(body + _tag(key, scope, body)).decode()


def read_response_id(response_id: str, *, scope: str, keys: Sequence[bytes]) -> ResponseIdInfo | None:
    """What ``response_id`` says if the gateway made it for ``scope`` under one of ``keys`` (the current key
    first, then the ones it replaced), or if it is a legacy id; None for anything else."""
    if _ISSUED.fullmatch(response_id):
        try:
            raw = base64.urlsafe_b64decode(response_id[len(PREFIX):])
        except (binascii.Error, ValueError):
            return None
        body, tag = raw[:_BODY_BYTES], raw[_BODY_BYTES:]
        flags = body[_TIME_BYTES]
        if flags & ~_STORED or not any(hmac.compare_digest(tag, _tag(key, scope, body)) for key in keys):
            return None
        created_ms = int.from_bytes(body[:_TIME_BYTES], "big")
        return ResponseIdInfo(created_ms / 1000, stored=bool(flags & _STORED), legacy=False)
    legacy = _LEGACY.fullmatch(response_id)
    if legacy:
        return ResponseIdInfo(int(legacy.group(1), 16) / 1000, stored=True, legacy=True)
    return None


_ITEM = re.compile(r"(?:msg|fc|rs)_([A-Za-z0-9_-]{40})[0-9a-f]{6}")


def item_id(prefix: str, response_id: str) -> str:
    """A new output item id of ``response_id``: ``msg``, ``fc`` or ``rs``, then the response id's own 40
    characters and 6 random hex digits (48 random ones for a response id of another form)."""
    if _ISSUED.fullmatch(response_id):
        return f"{prefix}_{response_id[len(PREFIX):]}{secrets.token_hex(3)}"
    return f"{prefix}_{secrets.token_hex(24)}"


def response_id_of_item(item: str) -> str | None:
    """The response id an output item id the gateway made belongs to, or None for an id of any other form."""
    match = _ITEM.fullmatch(item)
    return PREFIX + match.group(1) if match else None

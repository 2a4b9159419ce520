"""Redaction of audit events: what may leave the gateway process's memory.

By default (``AUDIT_STORE_BODIES=false``) a prompt or output is kept only as its sha256 and a short preview in
which e-mail addresses, long digit runs and anything that looks like a credential are masked. With
``AUDIT_STORE_BODIES=true`` the body is kept too, capped at ``AUDIT_BODY_MAX_BYTES`` and with credentials
masked. Free-text fields (error messages, attempt reasons) always have credentials masked: a provider's error
body may echo the key it was sent.

Every function here is idempotent, so the worker can run the same redaction again on what it receives.
"""

from __future__ import annotations

import hashlib
import re
import string
from typing import Any

PREVIEW_CHARS = 80
# The preview is masked over a window this many characters longer than itself (whitespace already collapsed),
# more than any pattern below needs to match, so whatever starts inside the preview is seen whole.
_PREVIEW_MARGIN = 100
# Raw characters read to fill that window: whitespace collapses, and the rest of a long body is never needed.
_PREVIEW_SOURCE = 4 * (PREVIEW_CHARS + _PREVIEW_MARGIN)
# The characters of every token, address and number the patterns mask. A window's end that falls inside a run
# of them drops the run: a credential cut in two would match no pattern, and its first part would show.
_RUN_CHARS = string.ascii_letters + string.digits + "_-+=./~%@"

SECRET_MASK = "[secret]"  # noqa: S105 - the mask put in place of a secret, not one
EMAIL_MASK = "[email]"
DIGITS_MASK = "[digits]"

_NAMED_SECRET = re.compile(
    r"(?i)((?:api[_-]?key|x-api-key|secret|token|password|passwd|authorization)[\"']?\s*[:=]\s*[\"']?)"
    r"(?!\$\{)[^\s\"',;]{6,}"
)
_BEARER = re.compile(r"(?i)\bbearer\s+[A-Za-z0-9._~+/=\-]{8,}")
# Each token pattern with the texts it cannot match without. The regex engine tries a pattern at every
# position of the text; looking for a literal first (in the text the pattern would run on) is far cheaper,
# and most text holds none of them.
_TOKEN_PATTERNS = (
    (re.compile(r"\bsk-[A-Za-z0-9_\-]{12,}"), ("sk-",)),
    (re.compile(r"\bAKIA[0-9A-Z]{16}\b"), ("AKIA",)),
    (re.compile(r"\bAIza[0-9A-Za-z_\-]{30,}"), ("AIza",)),
    (re.compile(r"\bgh[pousr]_[A-Za-z0-9]{30,}"), ("ghp_", "gho_", "ghu_", "ghs_", "ghr_")),
    (re.compile(r"\bxox[abprs]-[A-Za-z0-9\-]{10,}"), ("xox",)),
    (re.compile(r"\beyJ[A-Za-z0-9_\-]{10,}\.[A-Za-z0-9_\-]{10,}\.[A-Za-z0-9_\-]{10,}"), ("eyJ",)),  # JWT
)
# A long run of letters and digits where digits and capitals are frequent is treated as a credential: random
# tokens (hex, base64) have many, model names and words have few. Over-masking a hash is harmless.
_LONG_TOKEN = re.compile(r"[A-Za-z0-9_\-+=]{32,}")
_EMAIL = re.compile(r"[A-Za-z0-9._%+\-]+@[A-Za-z0-9.\-]+\.[A-Za-z]{2,}")
_DIGITS = re.compile(r"\d(?:[ \-.]?\d){5,}")


def _mask_long_token(match: re.Match[str]) -> str:
    token = match.group(0)
    digits = sum(c.isdigit() for c in token)
    capitals = sum(c.isupper() for c in token)
    looks_random = digits > 0 and (digits + capitals) / len(token) >= 0.3
    return SECRET_MASK if looks_random else token


# Cheap gates: the named and bearer patterns need one of these words (the named one also a ":" or "="),
# every token pattern needs a run of at least ten token characters. Most free text passes neither gate, and
# skips the expensive patterns.
_KEYWORDS = ("key", "secret", "token", "passw", "authoriz", "bearer")
_HAS_DIGIT = re.compile(r"\d")
# The gates run on every preview and free-text field, so they are not regular expressions: the regex engine
# tries a character class at each position (3 us for a 180-character preview), where a byte translation and
# a substring search take a fraction of that. The text, one byte per character (what is not ASCII becomes
# "?", a character no token has), is translated to "t" for every character of ``[A-Za-z0-9_\-+=]`` and to a
# space for every other: a run of ten token characters is then ten "t"s in a row. Every token pattern above
# needs a run of ten (its prefix and at least ten more), ``_LONG_TOKEN`` a run of 32; masking a token puts
# "[secret]" in its place, whose brackets are no token characters, so it never makes a longer run.
_TOKEN_CHARS = (string.ascii_letters + string.digits + "_-+=").encode()
_AS_TOKEN_RUNS = bytes(ord("t") if byte in _TOKEN_CHARS else ord(" ") for byte in range(256))
_TOKEN_RUN_OF_TEN = b"t" * 10
_LONG_TOKEN_RUN = b"t" * 32
_ASCII_DIGITS = string.digits.encode()
_NUMBER_DIGITS = 6  # the fewest digits a match of _DIGITS holds


def _token_runs(text: str) -> bytes:
    """``text`` one byte per character: "t" for a token character (letters, digits, ``_-+=``), else a space."""
    return text.encode("ascii", "replace").translate(_AS_TOKEN_RUNS)


def _may_hold_number(text: str) -> bool:
    """False only when ``_DIGITS`` cannot match: ASCII text with fewer than six digits, or text without any
    decimal digit (what the pattern \\d matches, ASCII or not)."""
    if text.isascii():
        spelt = text.encode("ascii")
        return len(spelt) - len(spelt.translate(None, _ASCII_DIGITS)) >= _NUMBER_DIGITS
    return _HAS_DIGIT.search(text) is not None


def _contains_any(text: str, parts: tuple[str, ...]) -> bool:
    # A plain loop: any() over a generator costs twice as much, and this runs for every free-text field.
    for part in parts:  # noqa: SIM110
        if part in text:
            return True
    return False


def mask_secrets(text: str) -> str:
    """``text`` with anything that looks like a credential replaced by ``[secret]``."""
    if len(text) < 6:
        return text
    lowered = text.lower()
    keyword = _contains_any(lowered, _KEYWORDS)
    if "bearer" in lowered:  # exact: case-insensitively, only what lower() turns into b, e, a, r matches them
        text = _BEARER.sub(SECRET_MASK, text)  # bearer tokens first: "Authorization: Bearer x"
    runs = _token_runs(text)
    if _TOKEN_RUN_OF_TEN in runs:
        for pattern, literals in _TOKEN_PATTERNS:
            if _contains_any(text, literals):
                text = pattern.sub(SECRET_MASK, text)
        if _LONG_TOKEN_RUN in runs:  # English has words of ten letters; a run of 32 is rare but in tokens
            text = _LONG_TOKEN.sub(_mask_long_token, text)
    if keyword and (":" in text or "=" in text):
        text = _NAMED_SECRET.sub(lambda m: m.group(1) + SECRET_MASK, text)
    return text


def _cut(text: str, end: int) -> str:
    """``text[:end]``, less the run of token characters the cut would split."""
    head = text[:end]
    if len(text) > end and text[end] in _RUN_CHARS and head and head[-1] in _RUN_CHARS:
        head = head.rstrip(_RUN_CHARS)
    return head


def preview(text: str, limit: int = PREVIEW_CHARS) -> str:
    """The first ``limit`` characters of ``text`` on one line, with credentials, e-mails and numbers masked."""
    window = " ".join(_cut(text, _PREVIEW_SOURCE).split())
    shortened = len(text) > _PREVIEW_SOURCE
    if len(window) > limit + _PREVIEW_MARGIN:
        window = _cut(window, limit + _PREVIEW_MARGIN)
        shortened = True
    window = mask_secrets(window)
    if "@" in window:
        window = _EMAIL.sub(EMAIL_MASK, window)
    if _may_hold_number(window):
        window = _DIGITS.sub(DIGITS_MASK, window)
    if len(window) > limit or shortened:
        return window[: limit - 1].rstrip() + "…"
    return window


def sha256_hex(text: str) -> str:
    return hashlib.sha256(text.encode("utf-8", "surrogatepass")).hexdigest()


def cap_bytes(text: str, max_bytes: int) -> str:
    """``text`` cut to at most ``max_bytes`` UTF-8 bytes, never inside a character."""
    raw = text.encode("utf-8", "surrogatepass")
    if len(raw) <= max_bytes:
        return text
    return raw[:max_bytes].decode("utf-8", "ignore")


def redact_bodies(event: dict[str, Any], *, store_bodies: bool, max_bytes: int) -> dict[str, Any]:
    """Replace ``prompt_text``/``output_text`` by hash and preview (and the capped body when allowed).

    Changes ``event`` in place and returns it. Already-redacted events pass through unchanged, apart from
    the body being dropped again when bodies are not to be stored.
    """
    for part in ("prompt", "output"):
        text = event.pop(f"{part}_text", None)
        if not isinstance(text, str):
            continue
        if not event.get(f"{part}_hash"):
            event[f"{part}_hash"] = sha256_hex(text)
        if not event.get(f"{part}_preview"):
            event[f"{part}_preview"] = preview(text)
        if store_bodies and text:
            event[f"{part}_text"] = cap_bytes(mask_secrets(text), max_bytes)
    return event

"""The audit event: defensive validation of what the request path hands to the publisher.

``prepare_event`` turns whatever arrived into a well-formed event (the shape is documented in docs/audit.md):
every field coerced to its type or to a neutral default, strings stripped of NUL characters and capped,
lists bounded, bodies redacted and credentials masked. It never raises, so one malformed event cannot block
a batch, and it is idempotent, so the worker runs it again on what it receives. An event without a usable
``request_id`` gets one derived from its content, so a redelivered copy still collapses into one row.
"""

from __future__ import annotations

import hashlib
import json
import math
import re
import time
import uuid
from typing import Any

from audit.delivery.redact import mask_secrets, redact_bodies

MAX_SIGNALS = 64
MAX_CANDIDATES = 64
MAX_ATTEMPTS = 64
MAX_NESTED = 8
MAX_ERROR_CHARS = 2000
MAX_UNIX_TIME = 253_402_300_799  # 9999-12-31T23:59:59Z, the last second a datetime can hold
_REQUEST_ID = re.compile(r"^[A-Za-z0-9_.:\-]{1,64}$")
# The limit that refused a request: "<key|team>:<rpm|tpm|concurrency|budget>" today; a scope or limit added later
# still fits, anything else is not a limit name and is dropped.
_LIMIT = re.compile(r"[a-z]{1,12}:[a-z_]{1,19}")
_USAGE_FIELDS = ("input_tokens", "output_tokens", "cached_input_tokens", "reasoning_tokens")
# Built once: ``isinstance(value, int | float)`` would build the union on every call.
_NUMBER = int | float
_SEQUENCE = list | tuple


def _str(value: Any, limit: int) -> str:
    if value.__class__ is str and value.isascii():  # what the request path hands over, nearly always
        if "\x00" in value:
            value = value.replace("\x00", "")
        return value if len(value) <= limit else value[:limit]
    if value is None:
        return ""
    if not isinstance(value, str):
        value = str(value)
    return _storable(value.replace("\x00", "")[:limit])


def _storable(text: str) -> str:
    """``text`` with lone surrogates replaced by U+FFFD. JSON lets a client send one (``"\\ud800"``), no
    database can store it, and it would fail the whole batch on every delivery."""
    if text.isascii():
        return text
    try:
        text.encode("utf-8")
    except UnicodeEncodeError:
        return text.encode("utf-16", "surrogatepass").decode("utf-16", "replace")
    return text


# Free-text fields are mostly the gateway's own words, the same on many events ("p2c: lower load", a tier signal's
# detail, "rate_limited"): their masked form is kept, by text and cap. Bounded: a full table starts again.
_MASKED_TEXTS: dict[tuple[str, int], str] = {}
_MASKED_TEXTS_MAX = 4096
_MASKED_TEXT_CHARS = 256  # longer texts (a provider's error message) are rarely repeated: masked each time


def _text(value: Any, limit: int) -> str:
    """A free-text field: capped and with credentials masked."""
    if not value and (value is None or value == ""):
        return ""
    if value.__class__ is str and len(value) <= _MASKED_TEXT_CHARS:
        known = _MASKED_TEXTS.get((value, limit))
        if known is None:
            if len(_MASKED_TEXTS) >= _MASKED_TEXTS_MAX:
                _MASKED_TEXTS.clear()
            known = _MASKED_TEXTS[(value, limit)] = mask_secrets(_str(value, limit * 2))[:limit]
        return known
    return mask_secrets(_str(value, limit * 2))[:limit]


def _int(value: Any) -> int | None:
    if value.__class__ is int:  # the common case first; bool, a subclass, is refused below
        return value if -(2**62) < value < 2**62 else None
    if isinstance(value, bool):
        return None
    if isinstance(value, int):
        return value if -(2**62) < value < 2**62 else None
    if isinstance(value, float) and math.isfinite(value):
        return int(value)
    if isinstance(value, str):
        try:
            return int(value.strip())
        except ValueError:
            return None
    return None


def _int32(value: Any) -> int | None:
    """An integer that fits a 32-bit column, or None."""
    if value.__class__ is int:
        return value if -(2**31) <= value < 2**31 else None
    number = _int(value)
    return number if number is not None and -(2**31) <= number < 2**31 else None


def _float(value: Any) -> float | None:
    if value.__class__ is float:
        return value if math.isfinite(value) else None
    if value is None:
        return None
    if isinstance(value, bool):
        return None
    if isinstance(value, _NUMBER):
        try:
            number = float(value)
        except OverflowError:  # an int beyond a float's range
            return None
        return number if math.isfinite(number) else None
    if isinstance(value, str):
        try:
            number = float(value.strip())
        except ValueError:
            return None
        return number if math.isfinite(number) else None
    return None


def _bool(value: Any) -> bool:
    return value is True or (isinstance(value, str) and value.lower() in {"true", "1", "yes"})


def _dict(value: Any) -> dict[str, Any]:
    return value if isinstance(value, dict) else {}


def _list(value: Any, limit: int) -> list[Any]:
    return list(value[:limit]) if isinstance(value, _SEQUENCE) else []


def _usage(value: Any) -> dict[str, int]:
    raw = _dict(value)
    counts = {}
    for name in _USAGE_FIELDS:
        count = raw.get(name)
        # A count as the request path writes it is kept as it is; anything else is coerced (0 at worst).
        counts[name] = count if count.__class__ is int and 0 <= count < 2**62 else max(0, _int(count) or 0)
    return counts


def _health(value: Any, *, caused_by: str = "") -> dict[str, Any]:
    raw = _dict(value)
    health = {
        "status": _str(raw.get("status"), 16),
        "latency_ms": _float(raw.get("latency_ms")),
        "in_flight": _int32(raw.get("in_flight")),
        "cooldown_until": _float(raw.get("cooldown_until")),
    }
    if caused_by:
        health["caused_by"] = caused_by
    return health


def _signal(value: Any) -> dict[str, Any]:
    raw = _dict(value)
    return {
        "name": _str(raw.get("name"), 64),
        "points": _float(raw.get("points")) or 0,
        "detail": _text(raw.get("detail"), 200),
    }


def _tier(value: Any) -> dict[str, Any] | None:
    if not isinstance(value, dict):
        return None
    return {
        "alias": _str(value.get("alias"), 200),
        "tier": _str(value.get("tier"), 16),
        "target": _str(value.get("target"), 200),
        "score": _float(value.get("score")),
        "signals": [_signal(s) for s in _list(value.get("signals"), MAX_SIGNALS)],
        "reasoning_shortcut": _bool(value.get("reasoning_shortcut")),
        "forced": _bool(value.get("forced")),
        "pinned": _bool(value.get("pinned")),
        "escalated": _bool(value.get("escalated")),
        "pin_before": _str(value.get("pin_before"), 16),
        "escalation": _str(value.get("escalation"), 16),
    }


def _candidate(value: Any) -> dict[str, Any]:
    raw = _dict(value)
    return {
        "target": _str(raw.get("target"), 200),
        "weight": _float(raw.get("weight")),
        "latency_ms": _float(raw.get("latency_ms")),
        "in_flight": _int32(raw.get("in_flight")),
        "cooldown_until": _float(raw.get("cooldown_until")),
        "status": _str(raw.get("status"), 16),
        "observations": _int32(raw.get("observations")),
        "cold_start": _bool(raw.get("cold_start")),
    }


def _reason(value: Any) -> dict[str, str]:
    raw = _dict(value)
    return {"target": _str(raw.get("target"), 200), "reason": _text(raw.get("reason"), 200)}


def _reasons(value: Any) -> list[dict[str, str]]:
    return [_reason(s) for s in _list(value, MAX_CANDIDATES)]


def _selection(value: Any, depth: int = 0) -> dict[str, Any] | None:
    """The selection of the resolved virtual model; nested virtual models (bounded depth) and the targets
    the workload contract filtered out come along when present."""
    if not isinstance(value, dict):
        return None
    selection = {
        "virtual_model": _str(value.get("virtual_model"), 200),
        "strategy": _str(value.get("strategy"), 32),
        "winner": _str(value.get("winner"), 200),
        "why": _text(value.get("why"), 500),
        "affinity": _str(value.get("affinity"), 16),
        "candidates": [_candidate(c) for c in _list(value.get("candidates"), MAX_CANDIDATES)],
        "skipped": _reasons(value.get("skipped")),
        "explored": _bool(value.get("explored")),
        "exploration": _float(value.get("exploration")),
    }
    if depth == 0:
        selection["rejected"] = _reasons(value.get("rejected"))
        # What is not a dict is left out (_selection would give None for it).
        nested = _list(value.get("nested"), MAX_NESTED)
        selection["nested"] = [_selection(n, depth + 1) for n in nested if isinstance(n, dict)]
    return selection


def _limit(value: Any) -> str:
    """The limit that refused the request (``key:rpm``), or "" for none or for what is not a limit's name."""
    return value if isinstance(value, str) and _LIMIT.fullmatch(value) else ""


def _policy(value: Any) -> dict[str, Any]:
    """The routing policy decision (routing.gateway.records.PolicyDecision.as_event); {} without a policy.

    An empty object stays empty: the worker prepares what the publisher prepared, and a request without a
    policy must not come out of the second pass with a decision of empty names."""
    if not isinstance(value, dict) or not value:
        return {}
    steps = [{"from": _str(s.get("from"), 200), "to": _str(s.get("to"), 200),
              "virtual_model": _str(s.get("virtual_model"), 200), "reason": _str(s.get("reason"), 200)}
             for s in _list(value.get("steps"), MAX_NESTED * 2) if isinstance(s, dict)]
    return {
        "selected": _str(value.get("selected"), 200),
        "source": _str(value.get("source"), 16),
        "policy": _str(value.get("policy"), 200),
        "strategy": _str(value.get("strategy"), 16),
        "steps": steps,
        "applied_to": [_str(v, 200) for v in _list(value.get("applied_to"), MAX_CANDIDATES)],
        "unmet": _str(value.get("unmet"), 200),
    }


def _cache(value: Any) -> dict[str, Any] | None:
    """The response cache's part: its outcome, why it was not read or written, the request that filled a hit's
    entry, what that answer had cost and a semantic hit's similarity (None for a request of a name not cached)."""
    if not isinstance(value, dict):
        return None
    saved = _float(value.get("saved_usd"))
    similarity = _float(value.get("similarity"))
    return {"name": _str(value.get("name"), 200), "outcome": _str(value.get("outcome"), 16),
            "scope": _str(value.get("scope"), 200), "reason": _str(value.get("reason"), 16),
            "filled_by": _str(value.get("filled_by"), 64),
            "saved_usd": saved if saved is not None and saved >= 0 else 0.0,
            "similarity": similarity if similarity is not None and -1.0 <= similarity <= 1.0 else None}


def _attempt(value: Any, position: int) -> dict[str, Any]:
    raw = _dict(value)
    seq = _int(raw.get("seq"))
    return {
        "attempt_id": _str(raw.get("attempt_id"), 64),
        "seq": seq if seq is not None and 0 < seq < 32000 else position,
        "target": _str(raw.get("target"), 200),
        "provider": _str(raw.get("provider"), 100),
        "status": _int32(raw.get("status")),
        "error_class": _str(raw.get("error_class"), 32),
        "reason": _text(raw.get("reason"), 200),
        "latency_ms": _float(raw.get("latency_ms")) or 0.0,
        "ttfb_ms": _float(raw.get("ttfb_ms")),
        "usage": _usage(raw.get("usage")),
        "cost_usd": _float(raw.get("cost_usd")),
        "usage_estimated": raw.get("usage_estimated") is True,
        "action": _str(raw.get("action"), 32),
        "validation": _str(raw.get("validation"), 64),
        # Whose failure the attempt was ("target", "client", "gateway"), kept with the health it did or did not touch.
        "health": _health(raw.get("health"), caused_by=_str(raw.get("caused_by"), 16)),
    }


def content_request_id(raw: Any) -> str:
    """A stable id for an event that came without one: the sha256 of its canonical JSON."""
    try:
        canonical = json.dumps(raw, sort_keys=True, default=str, ensure_ascii=True)
    except (TypeError, ValueError, RecursionError):  # keys of mixed types cannot be sorted; too deep to encode
        try:
            canonical = repr(raw)
        except RecursionError:
            return "derived-" + uuid.uuid4().hex  # no stable form: unique, so at least nothing collapses wrongly
    return "derived-" + hashlib.sha256(canonical.encode("utf-8", "surrogatepass")).hexdigest()[:48]


def _attempts_unique(attempts: list[dict[str, Any]]) -> list[dict[str, Any]]:
    """Attempts with distinct sequence numbers (a duplicate seq is renumbered after the highest)."""
    seen: set[int] = set()
    highest = max((a["seq"] for a in attempts), default=0)
    for attempt in attempts:
        if attempt["seq"] in seen:
            highest += 1
            attempt["seq"] = highest
        seen.add(attempt["seq"])
    return attempts


def prepare_event(raw: Any, *, store_bodies: bool, max_bytes: int) -> dict[str, Any]:
    """The cleaned, redacted event for ``raw``; never raises, idempotent."""
    if not isinstance(raw, dict):
        # Kept as an event of only these fields, so that a prepared event always has every field.
        raw = {"request_id": content_request_id(repr(raw)), "validation": "malformed_event",
               "error_message": f"malformed audit event: {raw!r}"}
    event = dict(raw)
    request_id = event.get("request_id")
    if not (isinstance(request_id, str) and _REQUEST_ID.match(request_id)):
        request_id = content_request_id({k: v for k, v in event.items() if k not in ("prompt_text", "output_text")})
    redact_bodies(event, store_bodies=store_bodies, max_bytes=max_bytes)
    created_at = _float(event.get("created_at"))
    key_id = _int(event.get("key_id"))
    attempts = [_attempt(a, i + 1) for i, a in enumerate(_list(event.get("attempts"), MAX_ATTEMPTS))]
    cleaned: dict[str, Any] = {
        "request_id": request_id,
        "operation_id": _str(event.get("operation_id"), 128),
        "created_at": created_at if created_at is not None and 0 < created_at <= MAX_UNIX_TIME else time.time(),
        "key_id": key_id,
        "key_name": _str(event.get("key_name"), 200),
        "team": _str(event.get("team"), 200),
        "limit": _limit(event.get("limit")),
        "session_hash": _str(event.get("session_hash"), 64),
        "session_source": _str(event.get("session_source"), 40),
        "endpoint": _str(event.get("endpoint"), 16),
        "requested_model": _str(event.get("requested_model"), 200),
        "stream": _bool(event.get("stream")),
        "tier": _tier(event.get("tier")),
        "category": _str(event.get("category"), 32),
        "category_rule": _str(event.get("category_rule"), 16),
        "category_detail": _text(event.get("category_detail"), 200),
        "category_alias": _str(event.get("category_alias"), 200),
        "category_target": _str(event.get("category_target"), 200),
        "policy": _str(event.get("policy"), 200),
        "policy_chain": _str(event.get("policy_chain"), 500),
        "policy_decision": _policy(event.get("policy_decision")),
        "selection": _selection(event.get("selection")),
        "target": _str(event.get("target"), 200),
        "status": _int32(event.get("status")),
        "error_class": _str(event.get("error_class"), 32),
        "error_message": _text(event.get("error_message"), MAX_ERROR_CHARS),
        "latency_ms": _float(event.get("latency_ms")) or 0.0,
        "ttfb_ms": _float(event.get("ttfb_ms")),
        "usage": _usage(event.get("usage")),
        "usage_estimated": event.get("usage_estimated") is True or any(a["usage_estimated"] for a in attempts),
        "cost_usd": _float(event.get("cost_usd")),
        "validation": _str(event.get("validation"), 64),
        "config_version": _int32(event.get("config_version")),
        "workload": _str(event.get("workload"), 100),
        "deadline_ms": _int32(event.get("deadline_ms")),
        "attempts": _attempts_unique(attempts),
        "cache": _cache(event.get("cache")),
    }
    for part in ("prompt", "output"):
        cleaned[f"{part}_hash"] = _str(event.get(f"{part}_hash"), 64)
        cleaned[f"{part}_preview"] = _str(event.get(f"{part}_preview"), 200)
        if store_bodies and isinstance(event.get(f"{part}_text"), str):
            cleaned[f"{part}_text"] = _storable(event[f"{part}_text"].replace("\x00", ""))
    return cleaned

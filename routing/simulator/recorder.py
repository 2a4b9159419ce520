"""What the simulator received: a bounded ring of request records and per-model counters.

Records never hold a key: auth headers and the ``key`` query parameter are masked, and the record says
instead whether a key was sent, its fingerprint (see :func:`key_fingerprint`) and which of the model's
configured keys it matched.
"""

from __future__ import annotations

import hashlib
import threading
import time
from collections import deque
from collections.abc import Iterable, Mapping
from typing import Any
from urllib.parse import parse_qsl, urlencode

AUTH_HEADERS = frozenset({"authorization", "x-api-key", "api-key", "x-goog-api-key", "proxy-authorization", "cookie",
                          "x-amz-security-token"})
AUTH_QUERY = frozenset({"key"})
MASK = "***"


def key_fingerprint(key: str) -> str:
    """The 12-hex-digit fingerprint recorded for a key, for tests to tell which key was sent."""
    return hashlib.sha256(key.encode("utf-8")).hexdigest()[:12]


def masked_headers(raw: Iterable[tuple[bytes, bytes]]) -> dict[str, str]:
    """Request headers by lower-case name (repeats joined by ", "), auth values replaced by ``***``."""
    headers: dict[str, str] = {}
    for name_bytes, value_bytes in raw:
        name = name_bytes.decode("latin-1").lower()
        value = MASK if name in AUTH_HEADERS else value_bytes.decode("latin-1")
        headers[name] = f"{headers[name]}, {value}" if name in headers else value
    return headers


def masked_query(query: str) -> str:
    if not query:
        return ""
    pairs = parse_qsl(query, keep_blank_values=True)
    return urlencode([(name, MASK if name in AUTH_QUERY else value) for name, value in pairs])


class _ModelStats:
    __slots__ = ("requests", "statuses", "faults", "input_tokens", "output_tokens", "cost_usd")

    def __init__(self) -> None:
        self.requests = 0
        self.statuses: dict[str, int] = {}
        self.faults: dict[str, int] = {}
        self.input_tokens = 0
        self.output_tokens = 0
        self.cost_usd = 0.0

    def as_dict(self) -> dict[str, Any]:
        return {
            "requests": self.requests,
            "statuses": dict(self.statuses),
            "faults": dict(self.faults),
            "input_tokens": self.input_tokens,
            "output_tokens": self.output_tokens,
            "cost_usd": round(self.cost_usd, 10),
        }


class Recorder:
    """Request records (newest last, at most ``limit``) and counters; safe to read from any thread."""

    def __init__(self, limit: int = 10_000) -> None:
        self._lock = threading.Lock()
        self._records: deque[dict[str, Any]] = deque(maxlen=limit)
        self._models: dict[str, _ModelStats] = {}
        self._sequence = 0
        self.in_flight = 0
        self.max_in_flight = 0

    def open(self, **fields: Any) -> dict[str, Any]:
        """Start a record (appended at once, so a held request is visible while it waits)."""
        record = {"seq": 0, "time": time.time(), **fields, "status": None, "outcome": "pending", "fault": None}
        with self._lock:
            self._sequence += 1
            record["seq"] = self._sequence
            self._records.append(record)
            self.in_flight += 1
            if self.in_flight > self.max_in_flight:
                self.max_in_flight = self.in_flight
        return record

    def close(self, record: dict[str, Any], *, counted_model: str | None) -> None:
        """Finish a record; its model's counters take its status, fault, tokens and cost."""
        with self._lock:
            self.in_flight -= 1
            if counted_model is None:
                return
            stats = self._models.get(counted_model)
            if stats is None:
                stats = self._models[counted_model] = _ModelStats()
            stats.requests += 1
            status = str(record.get("status"))
            stats.statuses[status] = stats.statuses.get(status, 0) + 1
            fault = record.get("fault")
            if fault:
                stats.faults[fault] = stats.faults.get(fault, 0) + 1
            usage = record.get("usage")
            if usage:
                stats.input_tokens += usage["input_tokens"]
                stats.output_tokens += usage["output_tokens"]
            stats.cost_usd += record.get("cost_usd") or 0.0

    def records(self, model: str | None = None, limit: int | None = None) -> list[dict[str, Any]]:
        """Copies of the kept records, oldest first, for ``model`` (its name or Azure deployment) if given."""
        with self._lock:
            chosen = [
                dict(record) for record in self._records
                if model is None or model in (record.get("model"), record.get("deployment"))
            ]
        return chosen[-limit:] if limit else chosen

    def stats(self) -> dict[str, Any]:
        with self._lock:
            return {
                "requests_total": self._sequence,
                "in_flight": self.in_flight,
                "max_in_flight": self.max_in_flight,
                "models": {name: stats.as_dict() for name, stats in self._models.items()},
            }

    def reset(self) -> None:
        """Forget records and counters (requests still in flight keep counting as in flight)."""
        with self._lock:
            self._records.clear()
            self._models.clear()
            self._sequence = 0
            self.max_in_flight = self.in_flight


def auth_summary(header: str | None, key: str | None, allowed: Mapping[str, int] | None) -> dict[str, Any]:
    """What the record says about the key: sent or not, its fingerprint, which configured key it is."""
    return {
        "header": header,
        "present": key is not None,
        "fingerprint": key_fingerprint(key) if key is not None else None,
        "key_index": allowed.get(key) if allowed is not None and key is not None else None,
    }

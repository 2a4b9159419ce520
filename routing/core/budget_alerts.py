"""Budget alerts: which thresholds a settlement crossed, what an alert says, and how its body is signed.

A threshold (a percentage of a key's or team's ``budget_usd``) is crossed by the one settlement that carries the
budget period's spend from below its level to at or above it. The stores compare the spend before and after each
settlement (``crossed``), so detection costs a few integer compares and never a read. Each threshold fires once per
scope and budget period: the stores claim it (a set member in Redis, in the same script that adds the spend; this
process's memory without Redis) and the audit trail's unique row settles what is left (a restart, a Redis that lost
its keys).

The webhook body is signed as Stripe signs its events: ``X-GoModel-Signature: t=<unix seconds>,v1=<hex>``, the
HMAC-SHA256 of ``"<t>.<body>"`` under the shared secret, so a receiver that checks ``t`` against its clock refuses a
replayed body. Pure: the time is a parameter.
"""

from __future__ import annotations

import hashlib
import hmac
import json
from dataclasses import dataclass
from datetime import UTC, datetime
from typing import Any

from routing.core.limits import NANOS_PER_USD, LimitScope, period_bounds

SIGNATURE_HEADER = "X-GoModel-Signature"
ALERT_ID_HEADER = "X-GoModel-Alert-Id"
EVENT_TYPE = "budget.threshold_crossed"
DEFAULT_THRESHOLDS = (50, 80, 100)
MAX_RETRY_DELAY_S = 600.0


def parse_thresholds(text: str) -> tuple[int, ...]:
    """``"50,80,100"`` as sorted distinct whole percentages from 1 to 100; ``ValueError`` saying what is wrong; an
    empty text is no thresholds (alerts off)."""
    found: set[int] = set()
    for part in text.split(","):
        item = part.strip().rstrip("%").strip()
        if not item:
            continue
        if not item.isdigit() or not 1 <= int(item) <= 100:
            raise ValueError(f"expected whole percentages from 1 to 100 separated by commas, got {part.strip()!r}")
        found.add(int(item))
    return tuple(sorted(found))


def alert_levels(budget_nanos: int, thresholds: tuple[int, ...]) -> tuple[int, ...]:
    """The spend, in nano-dollars, at which each threshold is crossed (rounded up: 50% of 3 nanos is 2)."""
    return tuple(-(-budget_nanos * pct // 100) for pct in thresholds)


def crossed(levels: tuple[int, ...], thresholds: tuple[int, ...], before: int, after: int) -> tuple[int, ...]:
    """The thresholds whose level lies in ``(before, after]``: the ones this settlement crossed. A budget of 0
    has every level at 0, which no spend crosses from below."""
    return tuple(pct for pct, level in zip(thresholds, levels, strict=True) if before < level <= after)


@dataclass(frozen=True, slots=True)
class BudgetCrossing:
    """One threshold crossed by one settlement, as the store that counted it saw it."""

    scope: LimitScope
    period: str  # the period id (``day:2026-12-02``, ``total``)
    threshold: int  # percent
    spend_nanos: int  # the period's spend after the settlement that crossed it
    at: float  # unix time

    @property
    def budget_usd(self) -> float:
        return float(self.scope.limits.budget_usd or 0.0)


def _iso(unix: float) -> str:
    return datetime.fromtimestamp(unix, tz=UTC).isoformat().replace("+00:00", "Z")


def alert_document(crossing: BudgetCrossing, alert_id: str) -> dict[str, Any]:
    """The alert as plain JSON: the webhook's body, the Celery task's argument, the audit row's fields. It names
    the key or team, the budget and the spend; never a secret, a provider key or a gateway key."""
    scope = crossing.scope
    limits = scope.limits
    start, end = period_bounds(limits.budget_period, crossing.at)
    return {
        "type": EVENT_TYPE,
        "id": alert_id,
        "created_at": _iso(crossing.at),
        "scope": {"kind": scope.kind, "name": scope.name, "team": scope.team or None},
        "threshold_percent": crossing.threshold,
        "budget_usd": crossing.budget_usd,
        "budget_period": limits.budget_period,
        "period": crossing.period,
        "period_start": _iso(start) if end is not None else None,
        "period_end": _iso(end) if end is not None else None,
        "spend_usd": crossing.spend_nanos / NANOS_PER_USD,
    }


def encode_body(document: dict[str, Any]) -> bytes:
    """The exact bytes posted (and signed): compact JSON with sorted keys."""
    return json.dumps(document, separators=(",", ":"), sort_keys=True).encode()


def signature(secret: str, timestamp: int, body: bytes) -> str:
    """The hex HMAC-SHA256 of ``"<timestamp>.<body>"`` under ``secret``."""
    return hmac.new(secret.encode(), f"{timestamp}.".encode() + body, hashlib.sha256).hexdigest()


def signature_header(secret: str, timestamp: int, body: bytes) -> str:
    """``X-GoModel-Signature``'s value: ``t=<timestamp>,v1=<signature>``."""
    return f"t={timestamp},v1={signature(secret, timestamp, body)}"


def verify_signature(secret: str, header: str, body: bytes, now: float, *, tolerance_s: float = 300.0) -> bool:
    """Whether ``header`` signs ``body`` under ``secret`` with a timestamp within ``tolerance_s`` of ``now``: what
    a receiver checks (docs/governance.md shows the same recipe for receivers in other languages)."""
    parts = dict(item.split("=", 1) for item in header.split(",") if "=" in item)
    stamp, given = parts.get("t", ""), parts.get("v1", "")
    if not stamp.isdigit() or abs(now - int(stamp)) > tolerance_s:
        return False
    return hmac.compare_digest(signature(secret, int(stamp), body), given)


def retry_delay(attempt: int, base_s: float) -> float:
    """The wait before delivery attempt ``attempt + 1`` after ``attempt`` failed ones: ``base_s`` doubled each
    time, at most ten minutes."""
    return min(base_s * float(2 ** max(attempt - 1, 0)), MAX_RETRY_DELAY_S)


def retryable(status: int | None) -> bool:
    """Whether a failed post is worth another try: no answer (``None``), a server error, 408 or 429. Any other
    4xx is the receiver refusing this alert (a signature it does not accept, a URL that is wrong): the same body
    would be refused again."""
    return status is None or status >= 500 or status in (408, 425, 429)

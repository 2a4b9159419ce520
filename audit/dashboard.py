"""What the admin's dashboard shows of the audit: traffic, errors, latency, cost and cache hits over a window.

Every query reads ``RevisionRollup`` rows of one span in a bucket range (a range scan of its unique index), so the
cost depends on the window's buckets and the keys, models and statuses active in it, not on the number of
revisions stored. Percentiles come from the rollup's latency histogram, interpolated inside a bucket (as
Prometheus' ``histogram_quantile``): good to the bucket's width, which the page says.
"""

from __future__ import annotations

import datetime as dt
from collections.abc import Sequence
from dataclasses import dataclass, field

from django.db.models import Q, QuerySet, Sum

from audit.models import LATENCY_BOUNDS_MS, LATENCY_COLUMNS, NO_KEY, RevisionRollup
from audit.rollup import HOUR, MINUTE, bucket_start

ERRORS = Q(status__gte=400) | Q(status=0)
SERVER_ERRORS = Q(status__gte=500) | Q(status=0)


@dataclass(frozen=True)
class Window:
    """A dashboard window: ``slots`` points of ``slot`` seconds each, read from rows of ``span`` seconds."""

    name: str
    span: int
    slot: int
    slots: int
    label: str  # strftime of a point's label

    def bounds(self, now: dt.datetime) -> tuple[dt.datetime, dt.datetime]:
        """The first slot's start and the end of the current slot (the current slot is the last point)."""
        end = bucket_start(now, self.slot) + dt.timedelta(seconds=self.slot)
        return end - dt.timedelta(seconds=self.slot * self.slots), end


WINDOWS = {
    "hour": Window("hour", MINUTE, 60, 60, "%H:%M"),
    "day": Window("day", HOUR, 3600, 24, "%H:%M"),
    "week": Window("week", HOUR, 6 * 3600, 28, "%m-%d %H:00"),
}


def percentile(counts: Sequence[int], q: float) -> float | None:
    """The ``q`` quantile (0-1) of a latency histogram (counts per LATENCY_COLUMNS), in ms; None when empty.

    Interpolated linearly inside the bucket it falls in; the open last bucket answers its lower bound."""
    total = sum(counts)
    if total <= 0:
        return None
    rank = q * total
    seen = 0.0
    lower = 0.0
    for count, upper in zip(counts, (*LATENCY_BOUNDS_MS, None), strict=True):
        if count and seen + count >= rank:
            if upper is None:
                return lower
            return lower + (upper - lower) * max(0.0, rank - seen) / count
        seen += count
        lower = float(upper) if upper is not None else lower
    return lower


@dataclass
class Totals:
    """Sums over some rollup rows."""

    requests: int = 0
    errors: int = 0
    server_errors: int = 0
    cost_usd: float = 0.0
    input_tokens: int = 0
    output_tokens: int = 0
    cache_hits: int = 0
    cache_semantic_hits: int = 0
    cache_misses: int = 0
    histogram: list[int] = field(default_factory=lambda: [0] * len(LATENCY_COLUMNS))

    def add(self, row: dict[str, object]) -> None:
        self.requests += int(row["requests"] or 0)  # type: ignore[call-overload]
        self.errors += int(row["errors"] or 0)  # type: ignore[call-overload]
        self.server_errors += int(row["server_errors"] or 0)  # type: ignore[call-overload]
        self.cost_usd += float(row["cost"] or 0.0)  # type: ignore[arg-type]
        self.input_tokens += int(row["input"] or 0)  # type: ignore[call-overload]
        self.output_tokens += int(row["output"] or 0)  # type: ignore[call-overload]
        self.cache_hits += int(row["cache_hits"] or 0)  # type: ignore[call-overload]
        self.cache_semantic_hits += int(row["cache_semantic_hits"] or 0)  # type: ignore[call-overload]
        self.cache_misses += int(row["cache_misses"] or 0)  # type: ignore[call-overload]
        for i, column in enumerate(LATENCY_COLUMNS):
            self.histogram[i] += int(row[column] or 0)  # type: ignore[call-overload]

    @property
    def error_rate(self) -> float | None:
        return self.errors / self.requests if self.requests else None

    @property
    def cache_lookups(self) -> int:
        """Requests the response cache looked up (a bypass is none): hits of either kind and misses."""
        return self.cache_hits + self.cache_semantic_hits + self.cache_misses

    @property
    def cache_hit_rate(self) -> float | None:
        """Hits (exact and semantic) per cacheable lookup; None without a lookup."""
        lookups = self.cache_lookups
        return (self.cache_hits + self.cache_semantic_hits) / lookups if lookups else None

    @property
    def p50_ms(self) -> float | None:
        return percentile(self.histogram, 0.5)

    @property
    def p99_ms(self) -> float | None:
        return percentile(self.histogram, 0.99)


@dataclass(frozen=True)
class Slot:
    start: dt.datetime
    totals: Totals


def _rows(window: Window, now: dt.datetime) -> QuerySet[RevisionRollup]:
    start, end = window.bounds(now)
    return RevisionRollup.objects.filter(span=window.span, bucket__gte=start, bucket__lt=end)


def _sums() -> dict[str, Sum]:
    return {
        "requests_sum": Sum("requests"), "errors": Sum("requests", filter=ERRORS),
        "server_errors": Sum("requests", filter=SERVER_ERRORS), "cost": Sum("cost_usd"),
        "input": Sum("input_tokens"), "output": Sum("output_tokens"),
        **{column: Sum(column) for column in ("cache_hits", "cache_semantic_hits", "cache_misses")},
        **{column: Sum(column) for column in LATENCY_COLUMNS},
    }


def window_slots(window: Window, now: dt.datetime) -> list[Slot]:
    """Every slot of the window, oldest first, quiet ones included (their totals are zero)."""
    start, _ = window.bounds(now)
    slots = [Slot(start + dt.timedelta(seconds=window.slot * i), Totals()) for i in range(window.slots)]
    for row in _rows(window, now).values("bucket").annotate(**_sums()).order_by():
        row["requests"] = row.pop("requests_sum")
        index = int((row["bucket"] - start).total_seconds()) // window.slot
        if 0 <= index < len(slots):
            slots[index].totals.add(row)
    return slots


def window_totals(slots: Sequence[Slot]) -> Totals:
    totals = Totals()
    for slot in slots:
        t = slot.totals
        totals.requests += t.requests
        totals.errors += t.errors
        totals.server_errors += t.server_errors
        totals.cost_usd += t.cost_usd
        totals.input_tokens += t.input_tokens
        totals.output_tokens += t.output_tokens
        totals.cache_hits += t.cache_hits
        totals.cache_semantic_hits += t.cache_semantic_hits
        totals.cache_misses += t.cache_misses
        totals.histogram = [a + b for a, b in zip(totals.histogram, t.histogram, strict=True)]
    return totals


@dataclass(frozen=True)
class Share:
    label: str
    requests: int
    share: float


def tier_mix(window: Window, now: dt.datetime) -> list[Share]:
    """Requests by tier (easy, hard, then none: a model that is not a tier alias), with their share."""
    counts = {row["tier"]: int(row["n"] or 0)
              for row in _rows(window, now).values("tier").annotate(n=Sum("requests")).order_by()}
    total = sum(counts.values())
    order = sorted(counts, key=lambda t: ({"easy": 0, "hard": 1}.get(t, 2), t))
    return [Share(tier or "no tier", counts[tier], counts[tier] / total if total else 0.0) for tier in order]


@dataclass(frozen=True)
class Spender:
    label: str
    key_id: int | None  # a key's id (None for a team, or a request without a key)
    team: str
    cost_usd: float
    requests: int


def top_keys(window: Window, now: dt.datetime, limit: int = 10) -> list[Spender]:
    """The keys that spent most in the window (billed cost), then by requests."""
    rows = (_rows(window, now).values("key_id", "key_name").annotate(cost=Sum("cost_usd"), n=Sum("requests"))
            .order_by("-cost", "-n", "key_name")[:limit])
    return [Spender(label=r["key_name"] or ("no key" if r["key_id"] == NO_KEY else f"key #{r['key_id']}"),
                    key_id=None if r["key_id"] == NO_KEY else int(r["key_id"]), team="",
                    cost_usd=float(r["cost"] or 0.0), requests=int(r["n"] or 0)) for r in rows]


def top_teams(window: Window, now: dt.datetime, limit: int = 10) -> list[Spender]:
    """The teams that spent most in the window; requests of keys without a team are left out."""
    rows = (_rows(window, now).exclude(team="").values("team").annotate(cost=Sum("cost_usd"), n=Sum("requests"))
            .order_by("-cost", "-n", "team")[:limit])
    return [Spender(label=r["team"], key_id=None, team=r["team"], cost_usd=float(r["cost"] or 0.0),
                    requests=int(r["n"] or 0)) for r in rows]

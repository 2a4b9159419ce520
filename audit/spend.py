"""Spend per key or team per period: requests, tokens and USD, aggregated in the database.

A request's spend is what the providers billed for it (``AuditRevision.billed_*``: every attempt that came
back with usage, priced at its model's prices when the gateway recorded it); rows stored before those
columns existed count the answer the client got (``cost_usd``, ``input_tokens``, ``output_tokens``).

A report is two GROUP BY queries over the range, each one index range scan on ``created_at`` (or on the
key's or team's composite index when the page is filtered by one), never a loop over rows in Python:

1. totals per group (key or team) over the whole range, biggest spender first: the table, and the top N;
2. totals per period (``date_trunc``) and per slot, where a slot is one of the top N groups or "other":
   the chart, the per-period table and the grand totals.
"""

from __future__ import annotations

import datetime as dt
from collections.abc import Iterator, Mapping
from dataclasses import dataclass, field
from typing import Any

from django.db.models import Case, Count, F, IntegerField, Q, QuerySet, Sum, Value, When
from django.db.models.functions import Coalesce, Trunc

from audit.models import AuditRevision
from audit.selectors import NO_VALUE, key_filter

PERIODS = ("day", "week", "month")
GROUPINGS = ("key", "team")
MAX_GROUP_ROWS = 500  # groups listed in the table; the rest are summed up in one line
OTHER = -1  # the slot of every group outside the top N

_COST = Coalesce(F("billed_cost_usd"), F("cost_usd"))
_INPUT = Coalesce(F("billed_input_tokens"), F("input_tokens"))
_OUTPUT = Coalesce(F("billed_output_tokens"), F("output_tokens"))
_UNPRICED = Q(billed_cost_usd__isnull=True, cost_usd__isnull=True)


@dataclass(frozen=True)
class SpendQuery:
    """What a report covers: ``[start, end)`` in buckets of ``period``, grouped by key or team."""

    start: dt.datetime
    end: dt.datetime
    period: str = "day"
    group_by: str = "key"
    key: str | None = None
    team: str | None = None
    top: int = 8


@dataclass(frozen=True)
class Totals:
    requests: int = 0
    input_tokens: int = 0
    output_tokens: int = 0
    cost_usd: float = 0.0
    unpriced: int = 0  # requests whose model had no price: their spend is unknown, not zero

    def __add__(self, other: Totals) -> Totals:
        return Totals(
            requests=self.requests + other.requests,
            input_tokens=self.input_tokens + other.input_tokens,
            output_tokens=self.output_tokens + other.output_tokens,
            cost_usd=self.cost_usd + other.cost_usd,
            unpriced=self.unpriced + other.unpriced,
        )


@dataclass(frozen=True)
class Group:
    """One key (id and the name it had) or one team, as recorded on the requests."""

    kind: str
    key_id: int | None = None
    key_name: str = ""
    team: str = ""

    @property
    def label(self) -> str:
        if self.kind == "team":
            return self.team or "(no team)"
        if self.key_name:
            return self.key_name
        return f"#{self.key_id}" if self.key_id is not None else "(no key)"

    def history_filter(self) -> dict[str, str]:
        """The history filter that selects this group's requests (a key by id whenever it has one)."""
        if self.kind == "team":
            return {"team": self.team or NO_VALUE}
        if self.key_id is not None:
            return {"key": str(self.key_id)}
        return {"key": self.key_name or NO_VALUE}

    def q(self) -> Q:
        if self.kind == "team":
            return Q(team=self.team)
        if self.key_id is None:
            return Q(key_id__isnull=True, key_name=self.key_name)
        return Q(key_id=self.key_id, key_name=self.key_name)


@dataclass(frozen=True)
class GroupRow:
    group: Group
    totals: Totals
    share: float  # of the range's spend (0 when nothing was priced)


@dataclass(frozen=True)
class PeriodRow:
    start: dt.datetime
    end: dt.datetime
    totals: Totals
    by_slot: Mapping[int, float] = field(default_factory=dict)  # spend per top-N index, and OTHER


@dataclass(frozen=True)
class SpendReport:
    query: SpendQuery
    totals: Totals
    periods: list[PeriodRow]
    groups: list[GroupRow]  # the biggest MAX_GROUP_ROWS
    more_groups: Totals | None  # the groups past MAX_GROUP_ROWS, summed; None when there are none
    top: list[Group]  # the chart's series: the biggest spenders first; OTHER collects the rest


# -- periods ------------------------------------------------------------------------------------------------


def period_floor(instant: dt.datetime, period: str) -> dt.datetime:
    """The start (UTC) of the period that holds ``instant``: a day, a week from Monday, or a month."""
    day = instant.astimezone(dt.UTC).replace(hour=0, minute=0, second=0, microsecond=0)
    if period == "week":
        return day - dt.timedelta(days=day.weekday())
    if period == "month":
        return day.replace(day=1)
    return day


def period_after(start: dt.datetime, period: str, count: int = 1) -> dt.datetime:
    """The start of the period ``count`` periods after the one starting at ``start`` (negative: before)."""
    if period == "month":
        months = start.year * 12 + start.month - 1 + count
        return start.replace(year=months // 12, month=months % 12 + 1, day=1)
    return start + dt.timedelta(days=count * (7 if period == "week" else 1))


def period_starts(start: dt.datetime, end: dt.datetime, period: str) -> list[dt.datetime]:
    """The start of every period that overlaps ``[start, end)``, in order."""
    starts = []
    current = period_floor(start, period)
    while current < end:
        starts.append(current)
        current = period_after(current, period)
    return starts


def period_count(start: dt.datetime, end: dt.datetime, period: str) -> int:
    """How many periods overlap ``[start, end)``, without listing them."""
    if end <= start:
        return 0
    first, last = period_floor(start, period), period_floor(end - dt.timedelta(microseconds=1), period)
    if period == "month":
        return (last.year - first.year) * 12 + last.month - first.month + 1
    return (last - first).days // (7 if period == "week" else 1) + 1


# -- the report ---------------------------------------------------------------------------------------------


def _revisions(query: SpendQuery) -> QuerySet[AuditRevision]:
    qs = AuditRevision.objects.filter(created_at__gte=query.start, created_at__lt=query.end)
    if query.key:
        qs = key_filter(qs, query.key)
    if query.team:
        qs = qs.filter(team="" if query.team == NO_VALUE else query.team)
    return qs


def _aggregates() -> dict[str, Any]:
    # COUNT(created_at), not COUNT(id): every column read is in the spend index (never null there), so
    # PostgreSQL answers from the index alone.
    return {
        "requests": Count("created_at"),
        "input_sum": Sum(_INPUT),
        "output_sum": Sum(_OUTPUT),
        "cost_sum": Sum(_COST),
        "unpriced": Count("created_at", filter=_UNPRICED),
    }


def _totals(row: Mapping[str, Any]) -> Totals:
    # SUM of a bigint is a numeric in PostgreSQL (a Decimal here); SUM over no priced row is NULL.
    return Totals(
        requests=int(row["requests"]),
        input_tokens=int(row["input_sum"] or 0),
        output_tokens=int(row["output_sum"] or 0),
        cost_usd=float(row["cost_sum"] or 0.0),
        unpriced=int(row["unpriced"]),
    )


def _group_fields(group_by: str) -> tuple[str, ...]:
    return ("team",) if group_by == "team" else ("key_id", "key_name")


def _group(group_by: str, row: Mapping[str, Any]) -> Group:
    if group_by == "team":
        return Group(kind="team", team=row["team"])
    return Group(kind="key", key_id=row["key_id"], key_name=row["key_name"])


def group_totals(query: SpendQuery, *, limit: int | None = None) -> list[tuple[Group, Totals]]:
    """Each group's totals over the range, the biggest spender first (then the most requests)."""
    fields = _group_fields(query.group_by)
    rows = (
        _revisions(query)
        .values(*fields)
        .annotate(**_aggregates())
        .order_by(F("cost_sum").desc(nulls_last=True), "-requests", *fields)
    )
    if limit is not None:
        rows = rows[:limit]
    return [(_group(query.group_by, row), _totals(row)) for row in rows]


def period_totals(query: SpendQuery, top: list[Group]) -> list[PeriodRow]:
    """Every period of the range (empty ones too) with its totals and the spend of each top group."""
    slot = Case(
        *[When(group.q(), then=Value(i)) for i, group in enumerate(top)],
        default=Value(OTHER),
        output_field=IntegerField(),
    ) if top else Value(OTHER, output_field=IntegerField())
    rows = (
        _revisions(query)
        .annotate(bucket=Trunc("created_at", query.period, tzinfo=dt.UTC), slot=slot)
        .values("bucket", "slot")
        .annotate(**_aggregates())
        .order_by("bucket", "slot")
    )
    totals: dict[dt.datetime, Totals] = {}
    spend: dict[dt.datetime, dict[int, float]] = {}
    for row in rows:
        bucket = row["bucket"].astimezone(dt.UTC)
        part = _totals(row)
        totals[bucket] = totals.get(bucket, Totals()) + part
        spend.setdefault(bucket, {})[row["slot"]] = part.cost_usd
    starts = period_starts(query.start, query.end, query.period)
    return [
        PeriodRow(
            start=start,
            end=min(period_after(start, query.period), query.end),
            totals=totals.get(start, Totals()),
            by_slot=spend.get(start, {}),
        )
        for start in starts
    ]


def spend_report(query: SpendQuery) -> SpendReport:
    """The totals, the per-period rows and the per-group rows of ``query`` (two queries)."""
    listed = group_totals(query, limit=MAX_GROUP_ROWS + 1)
    more = listed[MAX_GROUP_ROWS:]
    listed = listed[:MAX_GROUP_ROWS]
    top = [group for group, totals in listed[: query.top] if totals.cost_usd > 0]  # a series needs some spend
    periods = period_totals(query, top)
    total = Totals()
    for period in periods:
        total += period.totals
    shown = Totals()
    for _, totals in listed:
        shown += totals
    return SpendReport(
        query=query,
        totals=total,
        periods=periods,
        groups=[
            GroupRow(group=group, totals=totals, share=totals.cost_usd / total.cost_usd if total.cost_usd else 0.0)
            for group, totals in listed
        ],
        more_groups=_difference(total, shown) if more else None,
        top=top,
    )


def _difference(total: Totals, part: Totals) -> Totals:
    return Totals(
        requests=total.requests - part.requests,
        input_tokens=total.input_tokens - part.input_tokens,
        output_tokens=total.output_tokens - part.output_tokens,
        cost_usd=total.cost_usd - part.cost_usd,
        unpriced=total.unpriced - part.unpriced,
    )


def period_group_rows(query: SpendQuery) -> Iterator[tuple[dt.datetime, Group, Totals]]:
    """Every (period, group) pair with requests, by period then biggest spender (for the CSV export)."""
    fields = _group_fields(query.group_by)
    rows = (
        _revisions(query)
        .annotate(bucket=Trunc("created_at", query.period, tzinfo=dt.UTC))
        .values("bucket", *fields)
        .annotate(**_aggregates())
        .order_by("bucket", F("cost_sum").desc(nulls_last=True), "-requests", *fields)
    )
    for row in rows.iterator(chunk_size=2000):
        yield row["bucket"].astimezone(dt.UTC), _group(query.group_by, row), _totals(row)

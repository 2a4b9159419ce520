"""Parsing the auditor pages' filters from a query string: the history's (shared by the history page, the
tuning page and exports) and the spend page's."""

from __future__ import annotations

import datetime as dt
from collections.abc import Mapping

from django.utils.dateparse import parse_date, parse_datetime

from audit.selectors import HistoryFilters
from audit.spend import GROUPINGS, PERIODS, SpendQuery, period_after, period_count, period_floor

TEXT_FILTERS = ("key", "team", "session", "model", "tier", "target", "status", "error_class", "category", "policy",
                "limit")
MAX_FILTER_CHARS = 200


def parse_instant(text: str) -> dt.datetime | None:
    """An aware datetime from ``2026-11-30``, ``2026-11-30T10:15`` or a full ISO timestamp (naive = UTC)."""
    text = text.strip()
    if not text:
        return None
    try:
        value = parse_datetime(text)
        if value is None:
            day = parse_date(text)
            value = dt.datetime(day.year, day.month, day.day) if day else None
    except ValueError:
        return None
    if value is None:
        return None
    return value if value.tzinfo else value.replace(tzinfo=dt.UTC)


def filters_from_query(query: Mapping[str, str]) -> tuple[HistoryFilters, list[str]]:
    """The filters in ``query`` and a message for each value that could not be used (and was ignored)."""
    errors: list[str] = []
    values: dict[str, object] = {}
    for name in ("since", "until"):
        raw = (query.get(name) or "").strip()
        if raw:
            instant = parse_instant(raw)
            if instant is None:
                errors.append(f"{name}: not a date or time: {raw[:40]!r}")
            values[name] = instant
    for name in TEXT_FILTERS:
        raw = (query.get(name) or "").strip()
        if raw:
            values[name] = raw[:MAX_FILTER_CHARS]
    raw_version = (query.get("config_version") or "").strip()
    if raw_version:
        if raw_version.isdigit():
            values["config_version"] = int(raw_version)
        else:
            errors.append(f"config_version: not a number: {raw_version[:20]!r}")
    return HistoryFilters(**values), errors  # type: ignore[arg-type]


# -- the spend page -----------------------------------------------------------------------------------------

MAX_PERIODS = 400  # bars in one chart
MAX_TOP = 10
DEFAULT_TOP = 8
# The range shown when none is given: the last 30 days, 12 weeks or 12 months, today's included.
DEFAULT_PERIODS = {"day": 30, "week": 12, "month": 12}
EARLIEST_DAY = dt.date(1970, 1, 1)
LATEST_DAY = dt.date(9998, 12, 31)


def _choice(query: Mapping[str, str], name: str, choices: tuple[str, ...], errors: list[str]) -> str:
    raw = (query.get(name) or "").strip()
    if raw and raw not in choices:
        errors.append(f"{name}: one of {', '.join(choices)}, not {raw[:20]!r}; showing {choices[0]}")
    return raw if raw in choices else choices[0]


def _day(query: Mapping[str, str], name: str, errors: list[str]) -> dt.date | None:
    raw = (query.get(name) or "").strip()
    if not raw:
        return None
    try:
        day = parse_date(raw)
    except ValueError:
        day = None
    if day is None or not EARLIEST_DAY <= day <= LATEST_DAY:
        errors.append(f"{name}: not a day between {EARLIEST_DAY} and {LATEST_DAY}: {raw[:40]!r}")
        return None
    return day


def _midnight(day: dt.date) -> dt.datetime:
    return dt.datetime(day.year, day.month, day.day, tzinfo=dt.UTC)


def spend_query_from_query(query: Mapping[str, str], *, now: dt.datetime) -> tuple[SpendQuery, list[str]]:
    """The spend page's query in ``query`` (``from`` and ``to`` are days, both included, in UTC) and a
    message for each value that could not be used."""
    errors: list[str] = []
    period = _choice(query, "period", PERIODS, errors)
    group_by = _choice(query, "group", GROUPINGS, errors)
    raw_top = (query.get("top") or "").strip()
    top = DEFAULT_TOP
    if raw_top:
        if raw_top.isdigit() and len(raw_top) < 4 and 1 <= int(raw_top) <= MAX_TOP:
            top = int(raw_top)
        else:
            errors.append(f"top: a number from 1 to {MAX_TOP}, not {raw_top[:20]!r}; showing {DEFAULT_TOP}")
    first, last = _day(query, "from", errors), _day(query, "to", errors)
    if first and last and first > last:
        errors.append("from: after to; the two were swapped")
        first, last = last, first
    end = _midnight(last) + dt.timedelta(days=1) if last else period_floor(now, "day") + dt.timedelta(days=1)
    newest = period_floor(end - dt.timedelta(microseconds=1), period)
    start = _midnight(first) if first else period_after(newest, period, 1 - DEFAULT_PERIODS[period])
    count = period_count(start, end, period)
    if count > MAX_PERIODS:
        start = period_after(newest, period, 1 - MAX_PERIODS)
        errors.append(f"from: the range holds {count} {period}s, more than a chart shows; "
                      f"showing the last {MAX_PERIODS}")
    values: dict[str, str] = {}
    for name in ("key", "team"):
        raw = (query.get(name) or "").strip()
        if raw:
            values[name] = raw[:MAX_FILTER_CHARS]
    return SpendQuery(start=start, end=end, period=period, group_by=group_by, top=top, **values), errors

"""Parsing the history filters from a query string (shared by the history page, the tuning page and exports)."""

from __future__ import annotations

import datetime as dt
from collections.abc import Mapping

from django.utils.dateparse import parse_date, parse_datetime

from audit.selectors import HistoryFilters

TEXT_FILTERS = ("key", "session", "model", "tier", "target", "status", "error_class")
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

"""Streamed exports of a filtered history: CSV (one row per request) and JSON Lines (the full record); and the
spend page's aggregate as CSV (one row per period and key or team).

Rows are read in keyset chunks (``selectors.iter_revisions``), so an export of millions of rows runs in
bounded memory and starts sending at once.
"""

from __future__ import annotations

import csv
import json
from collections.abc import Iterator
from typing import Any

from audit.models import AuditRevision
from audit.selectors import HistoryFilters, iter_revisions
from audit.spend import SpendQuery, period_group_rows

CSV_COLUMNS = (
    "request_id", "created_at", "key_id", "key_name", "team", "session_hash", "endpoint", "requested_model", "stream",
    "tier", "score", "tier_target", "target", "strategy", "status", "error_class", "validation", "latency_ms",
    "ttfb_ms", "input_tokens", "output_tokens", "cached_input_tokens", "reasoning_tokens", "cost_usd",
    "billed_input_tokens", "billed_output_tokens", "billed_cost_usd",
    "attempt_count", "fell_back", "config_version", "workload", "operation_id",
    # Added later, so appended: a reader that goes by position keeps working.
    "tier_escalation", "category", "category_rule", "category_target", "policy", "policy_chain", "explored",
    "limit_refused",
)
_FORMULA_START = ("=", "+", "-", "@", "\t", "\r")


class _Line:
    """A file-like object whose write returns what was written (for csv.writer in a generator)."""

    def write(self, value: str) -> str:
        return value


def _cell(value: Any) -> Any:
    if value is None:
        return ""
    if hasattr(value, "isoformat"):
        return value.isoformat()
    if isinstance(value, str) and value.startswith(_FORMULA_START):
        return "'" + value  # a spreadsheet must not evaluate a key or model name as a formula
    return value


def csv_lines(filters: HistoryFilters) -> Iterator[str]:
    """The header and one CSV line per matching revision."""
    writer = csv.writer(_Line())
    yield writer.writerow(CSV_COLUMNS)
    for revision in iter_revisions(filters):
        yield writer.writerow([_cell(getattr(revision, column)) for column in CSV_COLUMNS])


def revision_record(revision: AuditRevision) -> dict[str, Any]:
    """The full JSON record of a revision with its attempts (as exported and as shown to auditors)."""
    record: dict[str, Any] = {}
    for field in revision._meta.concrete_fields:
        value = getattr(revision, field.attname)
        record[field.name if field.attname == field.name else field.attname] = (
            value.isoformat() if hasattr(value, "isoformat") else value
        )
    record.pop("id", None)
    record["attempts"] = [
        {
            field.name: getattr(attempt, field.attname)
            for field in attempt._meta.concrete_fields
            if field.name not in ("id", "revision")
        }
        for attempt in revision.attempts.all()
    ]
    return record


def jsonl_lines(filters: HistoryFilters) -> Iterator[str]:
    """One JSON object per line per matching revision, attempts included."""
    for revision in iter_revisions(filters, with_attempts=True):
        yield json.dumps(revision_record(revision), ensure_ascii=False, default=str) + "\n"


def spend_csv_lines(query: SpendQuery) -> Iterator[str]:
    """The header and one CSV line per period and key (or team) with requests in ``query``'s range."""
    writer = csv.writer(_Line())
    names = ("team",) if query.group_by == "team" else ("key_id", "key_name")
    yield writer.writerow(("period", "period_start", *names, "requests", "input_tokens", "output_tokens",
                           "cost_usd", "unpriced_requests"))
    for start, group, totals in period_group_rows(query):
        identity = (group.team,) if query.group_by == "team" else (group.key_id, group.key_name)
        yield writer.writerow([_cell(v) for v in (
            query.period, start.date(), *identity, totals.requests, totals.input_tokens, totals.output_tokens,
            round(totals.cost_usd, 9), totals.unpriced,
        )])

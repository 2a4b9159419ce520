"""The audit rollup: requests summed per minute and per hour, per key, team, model, tier and status, with their
tokens, cost, latency histogram and response cache lookups (exact hits, semantic hits, misses).

The dashboard reads these sums instead of the revisions, so it answers from a few thousand rows whatever the size
of the audit table. ``rollup_add`` runs inside the transaction that inserts a batch of revisions and is given only
the revisions that insert stored: a redelivered batch adds nothing, and a batch rolled back takes its sums with
it. Rows are upserted with their sums added (``ON CONFLICT ... DO UPDATE SET n = n + excluded.n``, on PostgreSQL
and SQLite alike), in the order of their key, so two workers adding to the same rows never deadlock.

Minute rows serve the last hour and are kept ``MINUTE_RETENTION``; hour rows are kept as long as the revisions
(``rollup_purge``, called by the audit retention). ``rollup_rebuild`` recomputes a range from the revisions
(``manage.py rollup_audit``), for revisions stored before the rollup existed.
"""

from __future__ import annotations

import bisect
import datetime as dt
from collections.abc import Iterable, Mapping
from typing import Any

from django.db import connections, router, transaction
from django.db.backends.base.base import BaseDatabaseWrapper
from django.utils import timezone

from audit.models import (
    LATENCY_BOUNDS_MS,
    LATENCY_COLUMNS,
    NO_KEY,
    ROLLUP_DIMENSIONS,
    AuditRevision,
    RevisionRollup,
)

MINUTE = 60
HOUR = 3600
SPANS = (MINUTE, HOUR)
MINUTE_RETENTION = dt.timedelta(days=2)
# The cache columns by the revision's cache_outcome that each counts ("bypass" and "" count in none).
CACHE_COLUMNS = {"hit": "cache_hits", "semantic-hit": "cache_semantic_hits", "miss": "cache_misses"}
SUMS = ("requests", "cost_usd", "input_tokens", "output_tokens", "latency_ms_sum", *CACHE_COLUMNS.values(),
        *LATENCY_COLUMNS)
COLUMNS = (*ROLLUP_DIMENSIONS, *SUMS)
TABLE = RevisionRollup._meta.db_table

Key = tuple[Any, ...]


def bucket_start(when: dt.datetime, span: int) -> dt.datetime:
    """The start of the ``span``-second bucket holding ``when`` (UTC; spans divide a day)."""
    when = when.astimezone(dt.UTC)
    seconds = when.hour * 3600 + when.minute * 60 + when.second
    return when.replace(hour=0, minute=0, second=0, microsecond=0) + dt.timedelta(seconds=seconds - seconds % span)


def latency_slot(latency_ms: float) -> int:
    """The histogram column of a latency: the first bound at least as large, else the last (slower) column."""
    return bisect.bisect_left(LATENCY_BOUNDS_MS, latency_ms)


def rollup_rows(revisions: Iterable[Mapping[str, Any]]) -> list[dict[str, Any]]:
    """The rollup rows (sums by dimensions, both spans) of revisions given as AuditRevision values by attname."""
    rows: dict[Key, dict[str, Any]] = {}
    # A batch's revisions fall in a few buckets: each bucket's start is worked out once, by (span, the
    # span's number since the epoch), which determines it in UTC, where every span divides a day.
    starts: dict[tuple[int, int], dt.datetime] = {}
    for revision in revisions:
        created_at = revision["created_at"]
        epoch = int(created_at.timestamp())
        latency = float(revision.get("latency_ms") or 0.0)
        billed = revision.get("billed_cost_usd")
        cost = float(billed if billed is not None else revision.get("cost_usd") or 0.0)
        slot = LATENCY_COLUMNS[latency_slot(latency)]
        cache_column = CACHE_COLUMNS.get(revision.get("cache_outcome") or "")
        key_id = revision.get("key_id")
        for span in SPANS:
            start = starts.get((span, epoch // span))
            if start is None:
                start = starts[span, epoch // span] = bucket_start(created_at, span)
            key: Key = (
                span, start, NO_KEY if key_id is None else int(key_id),
                revision.get("key_name") or "", revision.get("team") or "", revision.get("requested_model") or "",
                revision.get("tier") or "", int(revision.get("status") or 0),
            )
            row = rows.get(key)
            if row is None:
                row = rows[key] = {**dict(zip(ROLLUP_DIMENSIONS, key, strict=True)), **dict.fromkeys(SUMS, 0)}
            row["requests"] += 1
            row["cost_usd"] += cost
            row["input_tokens"] += int(revision.get("input_tokens") or 0)
            row["output_tokens"] += int(revision.get("output_tokens") or 0)
            row["latency_ms_sum"] += latency
            row[slot] += 1
            if cache_column is not None:
                row[cache_column] += 1
    return [rows[key] for key in sorted(rows)]


def _upsert_sql(connection: BaseDatabaseWrapper) -> str:
    quote = connection.ops.quote_name
    names = ", ".join(quote(c) for c in COLUMNS)
    dimensions = ", ".join(quote(c) for c in ROLLUP_DIMENSIONS)
    sums = ", ".join(f"{quote(c)} = {quote(TABLE)}.{quote(c)} + excluded.{quote(c)}" for c in SUMS)
    placeholders = ", ".join(["%s"] * len(COLUMNS))
    return (
        f"INSERT INTO {quote(TABLE)} ({names}) VALUES ({placeholders}) "  # noqa: S608 - names come from the model
        f"ON CONFLICT ({dimensions}) DO UPDATE SET {sums}"
    )


def rollup_add(rows: list[dict[str, Any]], *, using: str | None = None) -> None:
    """Add ``rows`` (from rollup_rows, sorted) to the rollup in the current transaction."""
    if not rows:
        return
    connection = connections[using or router.db_for_write(RevisionRollup)]
    adapt = connection.ops.adapt_datetimefield_value
    params = [[adapt(row[c]) if c == "bucket" else row[c] for c in COLUMNS] for row in rows]
    with connection.cursor() as cursor:
        cursor.executemany(_upsert_sql(connection), params)


def rollup_revisions(revisions: Iterable[Mapping[str, Any]], *, using: str | None = None) -> None:
    """Count revisions (AuditRevision values by attname) just stored in the current transaction."""
    rollup_add(rollup_rows(revisions), using=using)


def rollup_purge(*, older_than: dt.datetime, now: dt.datetime | None = None) -> int:
    """Delete hour rows before ``older_than`` and minute rows older than MINUTE_RETENTION; the rows deleted."""
    minutes_before = max(older_than, (now or timezone.now()) - MINUTE_RETENTION)
    hours, _ = RevisionRollup.objects.filter(span=HOUR, bucket__lt=bucket_start(older_than, HOUR)).delete()
    minutes, _ = RevisionRollup.objects.filter(span=MINUTE, bucket__lt=bucket_start(minutes_before, MINUTE)).delete()
    return hours + minutes


def _histogram_sql() -> str:
    parts = []
    lower: float | None = None
    for column, bound in zip(LATENCY_COLUMNS, (*LATENCY_BOUNDS_MS, None), strict=True):
        conditions = [f"latency_ms > {lower}"] if lower is not None else []
        if bound is not None:
            conditions.append(f"latency_ms <= {bound}")
        parts.append(f"count(*) FILTER (WHERE {' AND '.join(conditions)}) AS {column}")
        lower = bound
    return ", ".join(parts)


def _cache_sql() -> str:
    return ", ".join(f"count(*) FILTER (WHERE cache_outcome = '{outcome}') AS {column}"
                     for outcome, column in CACHE_COLUMNS.items())


def _rebuild_postgresql(connection: BaseDatabaseWrapper, since: dt.datetime, until: dt.datetime) -> None:
    revisions = AuditRevision._meta.db_table
    dimensions = ", ".join(ROLLUP_DIMENSIONS)
    with connection.cursor() as cursor:
        # Ingest waits while the range is recomputed: a batch stored meanwhile is counted once, after it.
        cursor.execute(f"LOCK TABLE {TABLE} IN EXCLUSIVE MODE")
        for span in SPANS:
            start = since if span == HOUR else max(since, until - MINUTE_RETENTION)
            start = bucket_start(start, span)
            cursor.execute(f"DELETE FROM {TABLE} WHERE span = %s AND bucket >= %s AND bucket < %s",  # noqa: S608
                           [span, start, until])
            cursor.execute(
                f"INSERT INTO {TABLE} ({', '.join(COLUMNS)}) "  # noqa: S608 - names come from the models
                "SELECT %s, to_timestamp(floor(extract(epoch FROM created_at) / %s) * %s), "
                f"coalesce(key_id, {NO_KEY}), key_name, team, requested_model, tier, coalesce(status, 0), count(*), "
                "coalesce(sum(coalesce(billed_cost_usd, cost_usd, 0)), 0), sum(input_tokens), sum(output_tokens), "
                f"sum(latency_ms), {_cache_sql()}, {_histogram_sql()} "
                f"FROM {revisions} WHERE created_at >= %s AND created_at < %s "
                f"GROUP BY 1, 2, 3, 4, 5, 6, 7, 8 "
                f"ON CONFLICT ({dimensions}) DO NOTHING",
                [span, span, span, start, until],
            )


def rollup_rebuild(*, since: dt.datetime, until: dt.datetime | None = None) -> int:
    """Recompute the rollup from the revisions created since ``since`` (whole hours); the revisions counted.

    Replaces the rows of the range, so it may run any number of times; minute rows only for their retention.
    """
    until = until or timezone.now() + dt.timedelta(hours=1)
    since, until = bucket_start(since, HOUR), bucket_start(until, HOUR)
    connection = connections[router.db_for_write(RevisionRollup)]
    counted = AuditRevision.objects.filter(created_at__gte=since, created_at__lt=until).count()
    with transaction.atomic(using=connection.alias):
        if connection.vendor == "postgresql":
            _rebuild_postgresql(connection, since, until)
            return counted
        for span in SPANS:
            start = since if span == HOUR else max(since, until - MINUTE_RETENTION)
            RevisionRollup.objects.filter(span=span, bucket__gte=bucket_start(start, span), bucket__lt=until).delete()
        fields = ("created_at", "key_id", "key_name", "team", "requested_model", "tier", "status", "latency_ms",
                  "cost_usd", "billed_cost_usd", "input_tokens", "output_tokens", "cache_outcome")
        values = AuditRevision.objects.filter(created_at__gte=since, created_at__lt=until).values(*fields)
        rows = rollup_rows(values.iterator(chunk_size=2000))
        minute_start = bucket_start(max(since, until - MINUTE_RETENTION), MINUTE)
        rollup_add([r for r in rows if r["span"] == HOUR or r["bucket"] >= minute_start], using=connection.alias)
    return counted

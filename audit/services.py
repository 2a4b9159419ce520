"""Writes to the audit tables: ingesting event batches, recording config revisions, retention.

``revisions_ingest`` is what the Celery worker (and, without a broker, the publisher thread) calls with one
batch. It inserts the whole batch in one transaction with ``request_id`` unique and conflicts ignored, so a
redelivered batch changes nothing, and links attempts to the ids of their revisions, inserted now or earlier
(a redelivered revision's attempts are ignored the same way, through the unique ``(revision, seq)``).
"""

from __future__ import annotations

import dataclasses
import datetime as dt
import functools
import json
import logging
import types
from collections.abc import Iterable, Mapping
from typing import Any

import orjson
import psycopg
from django.conf import settings
from django.db import DatabaseError, InterfaceError, OperationalError, connections, router, transaction
from django.db.backends.base.base import BaseDatabaseWrapper
from django.db.backends.utils import CursorWrapper
from django.db.models import Model
from django.utils import timezone

from audit.configdiff import diff_snapshots, scrub_snapshot
from audit.delivery.event import prepare_event
from audit.models import AttemptRecord, AuditRevision, ConfigRevision, UndeliverableEvent
from audit.rollup import rollup_purge, rollup_revisions

log = logging.getLogger("gomodel.audit")
# Errors that mean "the database is unreachable or busy": retried as they are. Any other DatabaseError means it
# refuses the data (a constraint, a trigger, a missing privilege, a value out of range).
UNREACHABLE = (OperationalError, InterfaceError)


class BatchRefused(Exception):
    """The database refused a batch for a reason other than a lost connection (raised with keep_refused=False)."""


def _is_refusal(exc: BaseException) -> bool:
    return isinstance(exc, DatabaseError) and not isinstance(exc, UNREACHABLE)


def _when(unix: float) -> dt.datetime:
    return dt.datetime.fromtimestamp(unix, tz=dt.UTC)


# The columns of an event without a tier decision or a selection (read-only: the lists are tuples).
_NO_TIER: Mapping[str, Any] = types.MappingProxyType({
    "alias": "", "tier": "", "target": "", "score": None, "signals": (), "reasoning_shortcut": False, "forced": False,
    "pinned": False, "escalated": False, "pin_before": "", "escalation": "",
})
_NO_SELECTION: Mapping[str, Any] = types.MappingProxyType({
    "virtual_model": "", "strategy": "", "winner": "", "why": "", "explored": False, "exploration": None,
    "affinity": "", "candidates": (), "skipped": (), "rejected": (), "nested": (),
})


def revision_values(event: Mapping[str, Any]) -> dict[str, Any]:
    """The AuditRevision values of a prepared event, by attname (which is also the column name).

    The only mapping from an event to a revision row: the ORM path builds ``AuditRevision(**values)`` from
    it and the PostgreSQL path sends it as it is, so the two cannot drift apart. ``prepare_event`` gives every
    field (the bodies only when they are stored), so they are read by subscript: one call fewer for each of
    about ninety fields of every event the writer stores.
    """
    tier = event["tier"] or _NO_TIER
    selection = event["selection"] or _NO_SELECTION
    usage = event["usage"]
    attempts = event["attempts"]
    tried = {a["target"] for a in attempts if a["target"]}
    return {
        "request_id": event["request_id"],
        "operation_id": event["operation_id"],
        "created_at": _when(event["created_at"]),
        "key_id": event["key_id"],
        "key_name": event["key_name"],
        "team": event["team"],
        "session_hash": event["session_hash"],
        "session_source": event["session_source"],
        "endpoint": event["endpoint"],
        "requested_model": event["requested_model"],
        "stream": event["stream"],
        "workload": event["workload"],
        "deadline_ms": event["deadline_ms"],
        "config_version": event["config_version"],
        "tier_alias": tier["alias"],
        "tier": tier["tier"],
        "tier_target": tier["target"],
        "category": event["category"],
        "category_rule": event["category_rule"],
        "category_detail": event["category_detail"],
        "category_alias": event["category_alias"],
        "category_target": event["category_target"],
        "policy": event["policy"],
        "policy_chain": event["policy_chain"],
        "policy_detail": event["policy_decision"] or {},
        "score": tier["score"],
        "signals": tier["signals"],
        "reasoning_shortcut": tier["reasoning_shortcut"],
        "tier_forced": tier["forced"],
        "tier_pinned": tier["pinned"],
        "tier_escalated": tier["escalated"],
        "pin_before": tier["pin_before"],
        "tier_escalation": tier["escalation"],
        "virtual_model": selection["virtual_model"],
        "strategy": selection["strategy"],
        "winner": selection["winner"],
        "selection_why": selection["why"],
        "explored": selection["explored"],
        "exploration": selection["exploration"],
        "affinity": selection["affinity"],
        "candidates": selection["candidates"],
        "skipped": selection["skipped"],
        "rejected": selection["rejected"],
        "nested_selections": selection["nested"],
        "limit_refused": event["limit"],
        "target": event["target"],
        "status": event["status"],
        "error_class": event["error_class"],
        "error_message": event["error_message"],
        "validation": event["validation"],
        "latency_ms": event["latency_ms"],
        "ttfb_ms": event["ttfb_ms"],
        "input_tokens": usage["input_tokens"],
        "output_tokens": usage["output_tokens"],
        "cached_input_tokens": usage["cached_input_tokens"],
        "reasoning_tokens": usage["reasoning_tokens"],
        "cost_usd": event["cost_usd"],
        **billed_values(event),
        "usage_estimated": event["usage_estimated"],
        **_cache_values(event["cache"] or {}),
        "attempt_count": min(len(attempts), 32767),
        "fell_back": len(tried) > 1 or any(a["action"] == "fallback" for a in attempts),
        "prompt_hash": event["prompt_hash"],
        "prompt_preview": event["prompt_preview"],
        "prompt_text": event.get("prompt_text", ""),  # only when bodies are stored
        "output_hash": event["output_hash"],
        "output_preview": event["output_preview"],
        "output_text": event.get("output_text", ""),
    }


def _cache_values(cache: Mapping[str, Any]) -> dict[str, Any]:
    """The response cache's columns of an event (empty for a request of a name that is not cached)."""
    hit = cache.get("outcome") in ("hit", "semantic-hit")
    return {"cache_outcome": str(cache.get("outcome", ""))[:16], "cache_reason": str(cache.get("reason", ""))[:16],
            "cache_filled_by": str(cache.get("filled_by", ""))[:64],
            "cache_saved_usd": cache.get("saved_usd") if hit else None, "cache_similarity": cache.get("similarity")}


def billed_values(event: Mapping[str, Any]) -> dict[str, Any]:
    """What the providers billed for a prepared event: the sums over its attempts (an answer that validation
    rejected was billed too), never less than the answer the client got (the event's own cost and usage)."""
    attempts = event.get("attempts") or []
    usage = event["usage"]
    costs = [a["cost_usd"] for a in attempts if a["cost_usd"] is not None]
    own_cost = event.get("cost_usd")
    cost = max(sum(costs), own_cost or 0.0) if costs else own_cost
    return {
        "billed_cost_usd": cost,
        "billed_input_tokens": max(sum(a["usage"]["input_tokens"] for a in attempts), usage["input_tokens"]),
        "billed_output_tokens": max(sum(a["usage"]["output_tokens"] for a in attempts), usage["output_tokens"]),
    }


def attempt_values(revision_id: int, attempt: Mapping[str, Any]) -> dict[str, Any]:
    """The AttemptRecord values of a prepared attempt, by attname (as ``revision_values``)."""
    usage = attempt["usage"]
    health = attempt.get("health") or {}
    return {
        "revision_id": revision_id,
        "seq": attempt["seq"],
        "attempt_id": attempt["attempt_id"],
        "target": attempt["target"],
        "provider": attempt["provider"],
        "status": attempt["status"],
        "error_class": attempt["error_class"],
        "reason": attempt["reason"],
        "action": attempt["action"],
        "validation": attempt["validation"],
        "latency_ms": attempt["latency_ms"],
        "ttfb_ms": attempt["ttfb_ms"],
        "input_tokens": usage["input_tokens"],
        "output_tokens": usage["output_tokens"],
        "cached_input_tokens": usage["cached_input_tokens"],
        "reasoning_tokens": usage["reasoning_tokens"],
        "cost_usd": attempt["cost_usd"],
        "usage_estimated": attempt.get("usage_estimated", False),
        "health_status": health.get("status", ""),
        "health": health,
    }


def _insert(events: list[dict[str, Any]]) -> None:
    """Insert prepared events in the current transaction; existing request ids are left as they are."""
    by_request: dict[str, dict[str, Any]] = {}
    for event in events:
        by_request.setdefault(event["request_id"], event)  # a batch may repeat an id after a replay
    connection = connections[router.db_for_write(AuditRevision)]
    if connection.vendor == "postgresql":
        _insert_postgresql(connection, by_request)
    else:
        _insert_orm(connection, by_request)


def _attempt_rows(by_request: Mapping[str, Mapping[str, Any]], ids: Mapping[str, int]) -> list[dict[str, Any]]:
    return [
        attempt_values(ids[request_id], attempt)
        for request_id, event in by_request.items()
        for attempt in event.get("attempts") or []
    ]


def _insert_orm(connection: BaseDatabaseWrapper, by_request: Mapping[str, Mapping[str, Any]]) -> None:
    """Django's bulk_create, then the ids of every request id in the batch read back (the SQLite demo)."""
    alias = connection.alias
    stored_before = set(
        AuditRevision.objects.using(alias).filter(request_id__in=list(by_request)).values_list("request_id", flat=True)
    )
    values = [revision_values(event) for event in by_request.values()]
    revisions = [AuditRevision(**row) for row in values]
    AuditRevision.objects.using(alias).bulk_create(revisions, ignore_conflicts=True, batch_size=500)
    rollup_revisions([row for row in values if row["request_id"] not in stored_before], using=alias)
    ids = dict(
        AuditRevision.objects.using(alias).filter(request_id__in=list(by_request)).values_list("request_id", "id")
    )
    attempts = [AttemptRecord(**values) for values in _attempt_rows(by_request, ids)]
    AttemptRecord.objects.using(alias).bulk_create(attempts, ignore_conflicts=True, batch_size=500)


def _insert_postgresql(connection: BaseDatabaseWrapper, by_request: Mapping[str, Mapping[str, Any]]) -> None:
    """Revisions and then attempts, each one ``INSERT ... ON CONFLICT DO NOTHING`` statement.

    The insert returns the ids of the revisions it stored; only the ids of request ids stored before (a
    redelivery) are read back, so the attempts of a revision stored earlier without them still get linked.
    """
    revisions = [revision_values(event) for event in by_request.values()]
    ids = dict(_insert_records(connection, AuditRevision, revisions, returning=("request_id", "id")))
    rollup_revisions([row for row in revisions if row["request_id"] in ids], using=connection.alias)
    stored_before = [request_id for request_id in by_request if request_id not in ids]
    if stored_before:
        ids.update(
            AuditRevision.objects.using(connection.alias)
            .filter(request_id__in=stored_before)
            .values_list("request_id", "id")
        )
    _insert_records(connection, AttemptRecord, _attempt_rows(by_request, ids))


@dataclasses.dataclass(frozen=True)
class _InsertPlan:
    """What inserting rows of one model needs, worked out once per model, database and RETURNING list."""

    sql: str  # INSERT ... SELECT ... FROM jsonb_populate_recordset(...) ON CONFLICT DO NOTHING [RETURNING ...]
    defaults: dict[str, Any]  # every column's default, for values a row leaves out (as Model(**values) does)
    auto_now_add: tuple[str, ...]  # columns set to the time of the insert


@functools.cache
def _insert_plan(alias: str, model: type[Model], returning: tuple[str, ...]) -> _InsertPlan:
    quote = connections[alias].ops.quote_name
    fields = [f for f in model._meta.concrete_fields if not f.primary_key]
    table = quote(model._meta.db_table)
    columns = ", ".join(quote(f.column) for f in fields)
    sql = (
        f"INSERT INTO {table} ({columns}) SELECT {columns} "  # noqa: S608 - names come from the model
        f"FROM jsonb_populate_recordset(NULL::{table}, %s::jsonb) ON CONFLICT DO NOTHING"
    )
    if returning:
        sql += " RETURNING " + ", ".join(quote(column) for column in returning)
    return _InsertPlan(
        sql=sql,
        defaults={f.column: f.get_default() for f in fields},
        auto_now_add=tuple(f.column for f in fields if getattr(f, "auto_now_add", False)),
    )


def _json_value(value: Any) -> Any:
    return value.isoformat() if isinstance(value, dt.datetime) else str(value)


def _insert_records(
    connection: BaseDatabaseWrapper,
    model: type[Model],
    rows: list[dict[str, Any]],
    returning: tuple[str, ...] = (),
) -> list[tuple[Any, ...]]:
    """INSERT ... ON CONFLICT DO NOTHING of ``rows`` (values by column); the ``returning`` columns of the
    rows actually inserted.

    The rows travel as one JSON parameter expanded by ``jsonb_populate_recordset``: one short statement
    instead of one placeholder per column and row, several times faster for a batch of hundreds. The rows
    are plain dicts: building a model instance per row cost more CPU than the insert itself.
    """
    if not rows:
        return []
    plan = _insert_plan(connection.alias, model, returning)
    stamps = dict.fromkeys(plan.auto_now_add, timezone.now())
    records = [{**plan.defaults, **row, **stamps} for row in rows]
    # orjson: a batch's JSON in a fifth of the json module's CPU. What it would refuse or write differently
    # cannot reach it: prepare_event replaces lone surrogates, keeps integers within 63 bits and floats finite.
    payload = orjson.dumps(records, default=_json_value).decode()
    with _server_bound_cursor(connection) as cursor:
        cursor.execute(plan.sql, [payload])
        return cursor.fetchall() if returning else []


def _server_bound_cursor(connection: BaseDatabaseWrapper) -> CursorWrapper:
    """A cursor that sends its parameters apart from the statement.

    Django's cursors bind parameters on the client, quoting them into the SQL text: for a batch's JSON
    (hundreds of kB) that cost about eight times the CPU of sending it as it is. Django's wrapper still
    translates the database's errors (IntegrityError, DataError, ...).
    """
    connection.ensure_connection()
    return connection.make_cursor(psycopg.Cursor(connection.connection))


def revisions_ingest(*, events: Iterable[Any], prepared: bool = False, keep_refused: bool = True) -> int:
    """Store a batch of events exactly once each; the number of events in the batch.

    Events are validated and redacted first (``prepare_event``), unless ``prepared`` says this process has
    just done that itself (the publisher thread writing its own batches): whatever crossed a process
    boundary, such as a Celery task's argument, must be prepared here.

    Connection-level errors (``OperationalError``, ``InterfaceError``) propagate: the caller retries the
    whole batch later. Any other database error means the database refuses some event. With
    ``keep_refused=False`` that raises ``BatchRefused`` (the caller retries first); otherwise the batch is
    stored event by event and an event that still fails is kept in UndeliverableEvent (an auditor sees it in
    the admin), so one bad event never blocks or loses the others. If the database refuses even that, the
    error propagates: the batch was not stored and must not be acknowledged.
    """
    if prepared:
        batch = list(events)
    else:
        store_bodies = settings.AUDIT_STORE_BODIES
        max_bytes = settings.AUDIT_BODY_MAX_BYTES
        batch = [prepare_event(e, store_bodies=store_bodies, max_bytes=max_bytes) for e in events]
    if not batch:
        return 0
    try:
        with transaction.atomic():
            _insert(batch)
        return len(batch)
    except DatabaseError as exc:
        if not _is_refusal(exc):
            raise
        if not keep_refused:
            raise BatchRefused(f"{type(exc).__name__}: {exc}") from exc
        log.error("audit batch refused by the database (%s); storing its %d events one by one", exc, len(batch))
    for event in batch:
        try:
            with transaction.atomic():
                _insert([event])
        except DatabaseError as exc:
            if not _is_refusal(exc):
                raise
            log.error("audit event %s refused by the database, kept as an undeliverable event: %s",
                      event["request_id"], exc)
            with transaction.atomic():
                UndeliverableEvent.objects.create(
                    request_id=event["request_id"][:64],
                    error=str(exc)[:2000],
                    payload=json.dumps(event, ensure_ascii=True, default=str),
                )
    return len(batch)


def config_revision_record(*, version: int, author: str, source: str, snapshot: dict[str, Any]) -> ConfigRevision:
    """Record the routing configuration after a change, with its diff against the previous revision.

    Called inside the transaction that makes the change, so both commit together. Recording a version that
    exists already returns the existing revision unchanged. Anything in the snapshot that looks like a secret
    is replaced before it is stored.
    """
    existing = ConfigRevision.objects.filter(version=version).first()
    if existing is not None:
        return existing
    clean = scrub_snapshot(snapshot)
    previous = ConfigRevision.objects.filter(version__lt=version).order_by("-version").first()
    diff, summary = diff_snapshots(previous.snapshot if previous else None, clean)
    return ConfigRevision.objects.create(
        version=version,
        author=(author or "")[:150],
        source=(source or "")[:32],
        created_at=timezone.now(),
        snapshot=clean,
        diff=diff,
        summary=summary[:500],
    )


def revisions_purge(*, older_than: dt.datetime, batch_size: int = 5000, max_batches: int | None = None) -> int:
    """Delete audit revisions (and their attempts) created before ``older_than``; the number deleted.

    Works in batches of ``batch_size`` rows, each its own short transaction, so a large backlog never holds
    long locks. ``max_batches`` bounds one call (None: until nothing is left).
    """
    deleted = 0
    batches = 0
    while max_batches is None or batches < max_batches:
        ids = list(
            AuditRevision.objects.filter(created_at__lt=older_than)
            .order_by("created_at")
            .values_list("id", flat=True)[:batch_size]
        )
        if not ids:
            break
        with transaction.atomic():
            AttemptRecord.objects.filter(revision_id__in=ids).delete()
            count, _ = AuditRevision.objects.filter(id__in=ids).delete()
        deleted += count
        batches += 1
    UndeliverableEvent.objects.filter(created_at__lt=older_than).delete()
    rollup_purge(older_than=older_than)
    return deleted


def retention_cutoff(now: dt.datetime | None = None) -> dt.datetime:
    """The instant before which revisions are deleted (now minus AUDIT_RETENTION_DAYS)."""
    return (now or timezone.now()) - dt.timedelta(days=settings.AUDIT_RETENTION_DAYS)

"""Celery tasks of the audit: ingesting event batches and retention.

``ingest_events`` is idempotent (``request_id`` unique), acknowledged late and requeued when its worker is
lost (settings: ``CELERY_TASK_ACKS_LATE``, ``CELERY_TASK_REJECT_ON_WORKER_LOST``). When the database is
unreachable it retries inside the same delivery, holding the message unacknowledged, with capped
exponential backoff and jitter for up to ``AUDIT_INGEST_RETRY_SECONDS`` (default 300 s); past that it
rejects the message with requeue, so the broker hands it out again. The message is never acknowledged
before its events are committed, and no retry path needs the broker to accept a new message, so an outage
of the database and the broker together loses nothing either.
"""

from __future__ import annotations

import logging
import random
import time
from typing import Any

from celery import shared_task
from celery.exceptions import Reject
from django.conf import settings
from django.db import InterfaceError, OperationalError, connections

from audit.services import retention_cutoff, revisions_ingest, revisions_purge

log = logging.getLogger("gomodel.audit")

BACKOFF_BASE_SECONDS = 0.5
BACKOFF_CAP_SECONDS = 5.0


def _reset_connections() -> None:
    for connection in connections.all(initialized_only=True):
        try:
            connection.close()
        except Exception:  # noqa: BLE001 - the connection is dead; Django opens a new one next time
            log.debug("closing a dead database connection failed", exc_info=True)


def ingest_with_retries(
    events: list[Any],
    *,
    give_up_after: float,
    sleep: Any = time.sleep,
    clock: Any = time.monotonic,
    rng: random.Random | None = None,
) -> int:
    """Store ``events``, retrying while the database is unreachable; raise Reject(requeue) past the bound.

    Returns the number of events in the batch. Backoff is full jitter over ``min(cap, base * 2**n)``.
    """
    rng = rng or random.Random()
    started = clock()
    attempt = 0
    while True:
        try:
            return revisions_ingest(events=events)
        except (OperationalError, InterfaceError) as exc:
            _reset_connections()
            waited = clock() - started
            if waited >= give_up_after:
                log.error("audit: database unreachable for %.0fs; requeueing the batch (%s)", waited, exc)
                raise Reject(exc, requeue=True) from exc
            delay = rng.uniform(0, min(BACKOFF_CAP_SECONDS, BACKOFF_BASE_SECONDS * 2**attempt))
            attempt += 1
            log.warning("audit: database unreachable (%s); retry %d in %.1fs", exc, attempt, delay)
            sleep(max(0.05, min(delay, give_up_after - waited)))


@shared_task(name="audit.tasks.ingest_events", ignore_result=True, acks_late=True, reject_on_worker_lost=True)
def ingest_events(events: list[dict[str, Any]]) -> int:
    """Store one batch of audit events (idempotent); the number of events in it."""
    give_up_after = float(getattr(settings, "AUDIT_INGEST_RETRY_SECONDS", 300))
    return ingest_with_retries(events, give_up_after=give_up_after)


@shared_task(name="audit.tasks.purge_old_revisions", ignore_result=True)
def purge_old_revisions() -> int:
    """Delete audit revisions older than AUDIT_RETENTION_DAYS, in bounded batches; the number deleted."""
    deleted = revisions_purge(older_than=retention_cutoff(), max_batches=200)
    if deleted:
        log.info("audit retention: deleted %d revisions", deleted)
    return deleted

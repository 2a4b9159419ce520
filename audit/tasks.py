"""Celery tasks of the audit: ingesting event batches and retention.

``ingest_events`` is idempotent (``request_id`` unique), acknowledged late and requeued when its worker is
lost (settings: ``CELERY_TASK_ACKS_LATE``, ``CELERY_TASK_REJECT_ON_WORKER_LOST``). It acknowledges its
message only once every event of the batch is stored, as a revision or, if the database refuses it, as an
``UndeliverableEvent``:

- database unreachable: retried inside the same delivery, holding the message unacknowledged, with capped
  exponential backoff and jitter for up to ``AUDIT_INGEST_RETRY_SECONDS`` (default 300 s); past that the
  message is rejected with requeue, so the broker hands it out again. No retry path needs the broker to
  accept a new message, so an outage of the database and the broker together loses nothing either;
- batch refused (a constraint, a trigger, a missing privilege): retried ``REFUSED_ATTEMPTS`` times in all,
  with the same backoff, then stored event by event, each refused event kept verbatim in
  ``UndeliverableEvent``, where auditors see it in the admin;
- even that refused, or anything unexpected: the message is rejected with requeue after a pause, never
  acknowledged (``CELERY_TASK_ACKS_ON_FAILURE`` is off as well, for any path this module does not foresee).
"""

from __future__ import annotations

import logging
import random
import time
from typing import Any

from celery import shared_task
from celery.exceptions import Reject
from django.conf import settings
from django.db import connections

from audit.services import UNREACHABLE, BatchRefused, retention_cutoff, revisions_ingest, revisions_purge

log = logging.getLogger("gomodel.audit")

BACKOFF_BASE_SECONDS = 0.5
BACKOFF_CAP_SECONDS = 5.0
REFUSED_ATTEMPTS = 3  # tries of a refused batch as a whole before its events are stored one by one


def _reset_connections() -> None:
    for connection in connections.all(initialized_only=True):
        try:
            connection.close()
        except Exception:
            log.debug("closing a dead database connection failed", exc_info=True)


def ingest_with_retries(
    events: list[Any],
    *,
    give_up_after: float,
    refused_attempts: int = REFUSED_ATTEMPTS,
    sleep: Any = time.sleep,
    clock: Any = time.monotonic,
    rng: random.Random | None = None,
) -> int:
    """Store ``events`` as the module docstring says; the number of events in the batch.

    Raises ``Reject(requeue=True)`` when the batch was not stored. Backoff is full jitter over
    ``min(cap, base * 2**n)``.
    """
    rng = rng or random.Random()  # noqa: S311 - backoff jitter, not cryptography
    started = clock()
    attempt = 0
    refusals = 0

    def backoff() -> float:
        nonlocal attempt
        delay = rng.uniform(0, min(BACKOFF_CAP_SECONDS, BACKOFF_BASE_SECONDS * 2**attempt))
        attempt += 1
        return delay

    while True:
        try:
            return revisions_ingest(events=events, keep_refused=refusals + 1 >= refused_attempts)
        except UNREACHABLE as exc:
            _reset_connections()
            waited = clock() - started
            if waited >= give_up_after:
                log.error("audit: database unreachable for %.0fs; requeueing the batch (%s)", waited, exc)
                raise Reject(exc, requeue=True) from exc
            delay = backoff()
            log.warning("audit: database unreachable (%s); retry %d in %.1fs", exc, attempt, delay)
            sleep(max(0.05, min(delay, give_up_after - waited)))
        except BatchRefused as exc:
            refusals += 1
            delay = backoff()
            log.warning("audit: the database refused a batch of %d events (%s); try %d of %d in %.1fs",
                        len(events), exc, refusals + 1, refused_attempts, delay)
            sleep(max(0.05, delay))
        except Exception as exc:
            # The refused events could not even be kept aside (or something unforeseen broke): the batch is
            # not stored. Pause so that a message the database will never take does not spin the worker.
            log.error("audit: a batch of %d events was not stored (%s: %s); requeueing it",
                      len(events), type(exc).__name__, exc)
            _reset_connections()
            sleep(BACKOFF_CAP_SECONDS)
            raise Reject(exc, requeue=True) from exc


@shared_task(name="audit.tasks.ingest_events", ignore_result=True, acks_late=True, reject_on_worker_lost=True,
             acks_on_failure=False, acks_on_timeout=False)
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

"""Celery tasks of the routing app: retention of stored Responses API answers, Idempotency-Key operations and
tool-execution ledger entries (each scheduled hourly in CELERY_BEAT_SCHEDULE), and budget alert delivery."""

from __future__ import annotations

import logging
from typing import Any

from celery import Task, shared_task

from routing.clients.responses_store import purge_expired
from routing.clients.retention import purge_expired_executions as purge_executions
from routing.clients.retention import purge_expired_operations as purge_operations
from routing.ops.budget_alert_delivery import deliver_step

log = logging.getLogger("gomodel.responses")
retention_log = logging.getLogger("gomodel.retention")

# Rows deleted per run at most (200 batches of 1,000): a backlog is worked off over a few runs, not in one long task.
MAX_BATCHES = 200


@shared_task(name="routing.tasks.purge_expired_responses", ignore_result=True)
def purge_expired_responses() -> int:
    """Delete stored responses past GOMODEL_RESPONSES_RETENTION; the number deleted."""
    deleted = purge_expired()
    if deleted:
        log.info("responses retention: deleted %d stored responses", deleted)
    return deleted


@shared_task(name="routing.tasks.purge_expired_operations", ignore_result=True)
def purge_expired_operations() -> int:
    """Delete Idempotency-Key operations past GOMODEL_IDEMPOTENCY_RETENTION (and their lease); the number deleted."""
    deleted = purge_operations(max_batches=MAX_BATCHES)
    if deleted:
        retention_log.info("idempotency retention: deleted %d idempotency records", deleted)
    return deleted


@shared_task(name="routing.tasks.purge_expired_executions", ignore_result=True)
def purge_expired_executions() -> int:
    """Delete tool-execution ledger entries past GOMODEL_LEDGER_RETENTION (and their lease); the number deleted."""
    deleted = purge_executions(max_batches=MAX_BATCHES)
    if deleted:
        retention_log.info("ledger retention: deleted %d ledger entries", deleted)
    return deleted


@shared_task(bind=True, name="routing.tasks.deliver_budget_alert", ignore_result=True)
def deliver_budget_alert(self: Task, job: dict[str, Any]) -> None:
    """Record one budget alert and post it to its webhook (``routing.ops.budget_alert_delivery.deliver_step``); a failed
    post is tried again after the backoff, up to GOMODEL_BUDGET_ALERT_RETRIES times. A redelivered message is
    harmless: the alert's audit row says whether it was delivered already."""
    delay = deliver_step(job, self.request.retries)
    if delay is not None:
        raise self.retry(countdown=delay, max_retries=None)

"""Celery tasks of the routing app: retention of stored Responses API answers."""

from __future__ import annotations

import logging

from celery import shared_task

from routing.clients.responses_store import purge_expired

log = logging.getLogger("gomodel.responses")


@shared_task(name="routing.tasks.purge_expired_responses", ignore_result=True)
def purge_expired_responses() -> int:
    """Delete stored responses past GOMODEL_RESPONSES_RETENTION; the number deleted."""
    deleted = purge_expired()
    if deleted:
        log.info("responses retention: deleted %d stored responses", deleted)
    return deleted

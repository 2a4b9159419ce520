"""One attempt at delivering a budget alert, the same in the Celery worker (``routing.tasks``) and in the
gateway's own delivery thread (``routing.ops.budget_alerts``).

``deliver_step`` records the alert in the audit trail first (``audit.alerts``: one row per scope, period and
threshold, so a threshold claimed twice, by a restarted process or one that counted alone, is posted once), finds
the webhook (the team's ``alert_webhook_url``, else ``GOMODEL_BUDGET_ALERT_WEBHOOK_URL``), posts it signed, and
says when to try again.
"""

from __future__ import annotations

import logging
import time
from typing import Any

from django.conf import settings
from django.db import DatabaseError

from audit.alerts import budget_alert_attempted, budget_alert_record, budget_alert_refused
from audit.models import BudgetAlert
from routing import models as m
from routing.clients.alert_webhook import post_alert
from routing.config.webhook_url import webhook_origin
from routing.core.budget_alerts import encode_body, retry_delay, retryable

logger = logging.getLogger("gomodel.alerts")

Job = dict[str, Any]  # {"alert": the document, "scope_ident": "key:<id>" | "team:<name>"}


def webhook_url_for(team: str) -> str:
    """The team's own webhook, else the global one; empty when neither is set."""
    if team:
        own = m.Team.objects.filter(name=team).values_list("alert_webhook_url", flat=True).first()
        if own:
            return str(own)
    return str(settings.GOMODEL_BUDGET_ALERT_WEBHOOK_URL)


def deliver_step(job: Job, attempt: int) -> float | None:
    """Attempt ``attempt`` (0 first) at delivering one alert; the seconds to wait before the next, or None when
    it is done (delivered, refused for good, out of attempts, or not this alert's to post)."""
    alert = job["alert"]
    final = attempt >= settings.GOMODEL_BUDGET_ALERT_RETRIES
    try:
        url = webhook_url_for(alert["scope"].get("team") or "")
        row, owner = budget_alert_record(document=alert, scope_ident=job["scope_ident"],
                                         webhook=webhook_origin(url) if url else "")
    except DatabaseError as exc:
        # Recorded before it is posted, or a second claim could post it twice: the database is waited for.
        if final:
            logger.error("budget alert %s dropped: the audit database did not take it (%s)", alert["id"], exc)
            return None
        return retry_delay(attempt + 1, settings.GOMODEL_BUDGET_ALERT_RETRY_BASE)
    if not owner or row.delivery in (BudgetAlert.DELIVERED, BudgetAlert.FAILED, BudgetAlert.NO_WEBHOOK):
        if not owner:
            logger.info("budget alert: %s %r's %s%% of its %s budget was already alerted", alert["scope"]["kind"],
                        alert["scope"]["name"], alert["threshold_percent"], alert["period"])
        return None
    secret = settings.GOMODEL_BUDGET_ALERT_SECRET
    if not secret:
        reason = "GOMODEL_BUDGET_ALERT_SECRET is not set: alerts are never posted unsigned"
        logger.warning("budget alert %s not posted to %s: %s", alert["id"], row.webhook, reason)
        budget_alert_refused(alert_id=alert["id"], error=reason)
        return None
    result = post_alert(url, encode_body(alert), secret=secret, alert_id=alert["id"], now=time.time(),
                        timeout_s=settings.GOMODEL_BUDGET_ALERT_TIMEOUT)
    again = not result.delivered and retryable(result.status) and not final
    budget_alert_attempted(alert_id=alert["id"], status=result.status, error=result.error, final=not again)
    if result.delivered:
        logger.info("budget alert %s delivered to %s", alert["id"], row.webhook)
        return None
    if not again:
        logger.warning("budget alert %s not delivered to %s after %d attempts: %s", alert["id"], row.webhook,
                       attempt + 1, result.error)
        return None
    return retry_delay(attempt + 1, settings.GOMODEL_BUDGET_ALERT_RETRY_BASE)

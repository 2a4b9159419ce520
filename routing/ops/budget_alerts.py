"""Budget alerts from a crossed threshold to the operator's webhook, off the request path.

The limit store hands each threshold it claimed (``routing.core.budget_alerts``) to ``BudgetAlerts.crossed`` on the
event loop, which counts it in ``gomodel_budget_alerts_total``, logs one line and puts it on a bounded queue:
nothing there waits. A daemon thread takes it from there:

- with ``CELERY_BROKER_URL`` set, it publishes ``routing.tasks.deliver_budget_alert`` (plain JSON), bounded by
  the broker timeouts; a broker that does not take it leaves the alert to this thread, as without one;
- without a broker it delivers itself, one ``deliver_step`` per attempt, and schedules the next attempt after the
  backoff without sleeping past another alert that is due.

``deliver_step`` is one attempt, the same in the worker and in the thread: it records the alert in the audit
trail first (``audit.alerts``: one row per scope, period and threshold, so a threshold claimed twice, by a
restarted process or one that counted alone, is posted once), finds the webhook (the team's ``alert_webhook_url``,
else ``GOMODEL_BUDGET_ALERT_WEBHOOK_URL``), posts it signed, and says when to try again.
"""

from __future__ import annotations

import concurrent.futures
import heapq
import itertools
import logging
import queue
import threading
import time
import uuid
from typing import Any

from django.conf import settings
from django.db import DatabaseError, connections

from audit.alerts import budget_alert_attempted, budget_alert_record, budget_alert_refused
from audit.models import BudgetAlert
from audit.publisher import publish_timeout_seconds
from routing import models as m
from routing.clients.alert_webhook import post_alert
from routing.config.webhook_url import webhook_origin
from routing.core.budget_alerts import BudgetCrossing, alert_document, encode_body, retry_delay, retryable
from routing.ops import metrics

logger = logging.getLogger("gomodel.alerts")

MAX_QUEUED = 10_000  # alerts waiting for the thread at most (3 thresholds per key and team per period)
Job = dict[str, Any]  # {"alert": the document, "scope_ident": "key:<id>" | "team:<name>"}


def job_of(crossing: BudgetCrossing) -> Job:
    return {"alert": alert_document(crossing, str(uuid.uuid4())), "scope_ident": crossing.scope.ident}


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


class BudgetAlerts:
    """The hand-over point between the limit store and the delivery thread (one per process)."""

    def __init__(self, *, use_broker: bool | None = None) -> None:
        self._queue: queue.Queue[Job] = queue.Queue(MAX_QUEUED)
        self._use_broker = bool(settings.CELERY_BROKER_URL) if use_broker is None else use_broker
        self._thread: threading.Thread | None = None
        self._lock = threading.Lock()
        self._busy = 0  # jobs taken from the queue and not yet done or waiting for a retry

    def crossed(self, crossing: BudgetCrossing) -> None:
        """Count, log and queue one claimed threshold; never blocks (the event loop calls it)."""
        scope = crossing.scope
        metrics.BUDGET_ALERTS.labels(scope.kind, scope.name, str(crossing.threshold)).inc()
        logger.warning("BUDGET ALERT: %s %r reached %d%% of its %g USD %s budget (%s)", scope.kind, scope.name,
                       crossing.threshold, crossing.budget_usd, scope.limits.budget_period, crossing.period)
        try:
            self._queue.put_nowait(job_of(crossing))
        except queue.Full:
            logger.error("budget alert dropped: %d alerts are already waiting for delivery", MAX_QUEUED)
            return
        self._start()

    def idle(self, timeout: float) -> bool:
        """Wait until every alert queued so far was published or had its first attempt; False on timeout."""
        deadline = time.monotonic() + timeout
        while self._queue.unfinished_tasks:
            if time.monotonic() >= deadline:
                return False
            time.sleep(0.01)
        return True

    def _start(self) -> None:
        with self._lock:
            if self._thread is None or not self._thread.is_alive():
                self._thread = threading.Thread(target=self._run, name="budget-alerts", daemon=True)
                self._thread.start()

    def _run(self) -> None:
        due: list[tuple[float, int, Job, int]] = []  # (when, order, job, attempt): retries waiting
        order = itertools.count()
        while True:
            wait = None if not due else max(due[0][0] - time.monotonic(), 0.0)
            try:
                job = self._queue.get(timeout=wait)
            except queue.Empty:
                _, _, job, attempt = heapq.heappop(due)
                self._attempt(job, attempt, due, order)
                continue
            try:
                if not (self._use_broker and self._publish(job)):
                    self._attempt(job, 0, due, order)
            finally:
                self._queue.task_done()

    def _attempt(self, job: Job, attempt: int, due: list[tuple[float, int, Job, int]], order: itertools.count) -> None:
        try:
            delay = deliver_step(job, attempt)
        except Exception:  # one alert's failure must not stop the thread that delivers the others
            logger.exception("budget alert %s: delivery failed", job["alert"]["id"])
            delay = None
        finally:
            connections.close_all()  # this thread's connection back to the pool between alerts
        if delay is not None:
            heapq.heappush(due, (time.monotonic() + delay, next(order), job, attempt + 1))

    def _publish(self, job: Job) -> bool:
        """Hand the alert to the Celery worker; False when the broker did not take it in time."""
        from routing.tasks import deliver_budget_alert  # the tasks module imports this one

        executor = concurrent.futures.ThreadPoolExecutor(1, thread_name_prefix="budget-alerts-broker")
        future = executor.submit(deliver_budget_alert.apply_async, args=[job], retry=False)
        try:
            future.result(timeout=publish_timeout_seconds())
        except Exception as exc:  # noqa: BLE001 - a timeout or any broker error: delivered from here instead
            logger.warning("budget alert %s: the broker did not take it (%s: %s); delivering from this process",
                           job["alert"]["id"], type(exc).__name__, exc)
            return False
        finally:
            executor.shutdown(wait=False)
        return True

"""Budget alerts from a crossed threshold to the operator's webhook, off the request path.

The limit store hands each threshold it claimed (``routing.core.budget_alerts``) to ``BudgetAlerts.crossed`` on the
event loop, which counts it in ``gomodel_budget_alerts_total``, logs one line and puts it on a bounded queue:
nothing there waits. A daemon thread takes it from there:

- with ``CELERY_BROKER_URL`` set, it publishes ``routing.tasks.deliver_budget_alert`` (plain JSON), bounded by
  the broker timeouts; a broker that does not take it leaves the alert to this thread, as without one;
- without a broker it delivers itself, one ``deliver_step`` per attempt, and schedules the next attempt after the
  backoff without sleeping past another alert that is due.

One attempt is ``routing.ops.budget_alert_delivery.deliver_step``, the same in the worker and in the thread.
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

from django.conf import settings
from django.db import connections

from audit.delivery.publisher import publish_timeout_seconds
from routing.core.budget_alerts import BudgetCrossing, alert_document
from routing.ops import metrics
from routing.ops.budget_alert_delivery import Job, deliver_step
from routing.tasks import deliver_budget_alert

logger = logging.getLogger("gomodel.alerts")

MAX_QUEUED = 10_000  # alerts waiting for the thread at most (3 thresholds per key and team per period)


def job_of(crossing: BudgetCrossing) -> Job:
    return {"alert": alert_document(crossing, str(uuid.uuid4())), "scope_ident": crossing.scope.ident}


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

"""Where the publisher thread delivers a batch: a Celery task through the broker, or the database directly.

Both raise ``DeliveryError`` when a batch was not delivered; the publisher then spools it. A sink is used
by the publisher thread only, and is handed events the publisher has just prepared (``prepare_event``).

- ``CelerySink`` publishes ``audit.tasks.ingest_events`` with ``retry=False`` and the broker timeouts from
  settings, on a helper thread the publisher waits for at most ``timeout`` seconds: a broker that accepts
  the connection and then never answers costs one bounded wait, not the publisher. An abandoned publish
  that completes late only delivers a batch twice, which the worker ignores.
- ``DatabaseSink`` (no ``CELERY_BROKER_URL``: the demo) inserts on the publisher thread, without preparing
  the events a second time. On PostgreSQL each statement may take at most ``statement_timeout`` seconds, so a
  database that hangs (a lock held, a stuck disk) costs the publisher one bounded wait too, and the batch is
  spooled instead of the buffer filling up behind it.
"""

from __future__ import annotations

import concurrent.futures
import logging
from typing import Any

from celery import Celery

log = logging.getLogger("gomodel.audit")

INGEST_TASK = "audit.tasks.ingest_events"


class DeliveryError(Exception):
    """A batch was not delivered (broker or database unreachable, refused, or too slow)."""


class CelerySink:
    """Publishes each batch as one ``ingest_events`` task message."""

    def __init__(self, app: Celery, *, timeout: float) -> None:
        self._app = app
        self._timeout = timeout
        self._executor: concurrent.futures.ThreadPoolExecutor | None = None
        self._connection: Any = None
        self._producer: Any = None

    def send(self, batch: list[dict[str, Any]]) -> None:
        self._bounded(self._publish, batch)

    def probe(self) -> None:
        """Raise DeliveryError unless the broker accepts a connection now."""
        self._bounded(self._connect)

    def close(self) -> None:
        self._drop_connection()
        if self._executor is not None:
            self._executor.shutdown(wait=False)
            self._executor = None

    def _bounded(self, fn: Any, *args: Any) -> None:
        if self._executor is None:
            self._executor = concurrent.futures.ThreadPoolExecutor(1, thread_name_prefix="audit-broker")
        future = self._executor.submit(fn, *args)
        try:
            future.result(timeout=self._timeout)
        except concurrent.futures.TimeoutError:
            # The helper thread is stuck in a socket call; leave it behind with its connection.
            self._executor.shutdown(wait=False)
            self._executor = None
            self._connection = self._producer = None
            raise DeliveryError(f"the broker did not answer within {self._timeout:g}s") from None
        except Exception as exc:
            self._drop_connection()
            raise DeliveryError(f"{type(exc).__name__}: {exc}") from exc

    def _connect(self) -> Any:
        if self._producer is None:
            connection = self._app.connection_for_write()
            try:
                connection.ensure_connection(max_retries=1, interval_start=0.1, interval_step=0.1, interval_max=0.5)
            except BaseException:
                connection.release()
                raise
            self._connection = connection
            self._producer = connection.Producer()
        return self._producer

    def _publish(self, batch: list[dict[str, Any]]) -> None:
        producer = self._connect()
        self._app.send_task(
            INGEST_TASK,
            args=[batch],
            producer=producer,
            retry=False,
            timeout=self._timeout,
            confirm_timeout=self._timeout,
        )

    def _drop_connection(self) -> None:
        connection, self._connection, self._producer = self._connection, None, None
        if connection is not None:
            try:
                connection.release()
            except Exception:
                log.debug("closing a broken broker connection failed", exc_info=True)


class DatabaseSink:
    """Inserts each batch directly (the publisher thread's own database connection)."""

    def __init__(self, *, statement_timeout: float | None = None) -> None:
        self._statement_timeout_ms = None if statement_timeout is None else max(1, round(statement_timeout * 1000))

    def send(self, batch: list[dict[str, Any]]) -> None:
        from django.db import connection, transaction

        from audit.services import revisions_ingest

        try:
            with transaction.atomic():
                if self._statement_timeout_ms is not None and connection.vendor == "postgresql":
                    with connection.cursor() as cursor:
                        cursor.execute(f"SET LOCAL statement_timeout = {self._statement_timeout_ms:d}")
                revisions_ingest(events=batch, prepared=True)
        except Exception as exc:
            self._reset()
            raise DeliveryError(f"{type(exc).__name__}: {exc}") from exc

    def probe(self) -> None:
        from django.db import connection

        try:
            with connection.cursor() as cursor:
                cursor.execute("SELECT 1")
        except Exception as exc:
            self._reset()
            raise DeliveryError(f"{type(exc).__name__}: {exc}") from exc

    def close(self) -> None:
        self._reset()

    @staticmethod
    def _reset() -> None:
        from django.db import connection

        try:
            connection.close()
        except Exception:
            log.debug("closing the audit database connection failed", exc_info=True)

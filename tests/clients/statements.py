"""Count the SQL statements every thread runs against one table, for tests of how many reads a path costs.

The stores run each database call in a worker thread with a connection of its own, which Django's
``CaptureQueriesContext`` (one connection, the test's) never sees. This helper watches every connection opened
while it is active (Django's ``connection_created`` signal and ``execute_wrapper`` hook), so the statements of
those threads are seen too; nothing is changed about what they run.
"""

from __future__ import annotations

import threading
from collections.abc import Callable, Iterator
from contextlib import contextmanager
from typing import Any

from django.db.backends.base.base import BaseDatabaseWrapper
from django.db.backends.signals import connection_created


class Statements:
    """The statements seen so far, in order (upper-case SQL as run)."""

    def __init__(self, table: str) -> None:
        self.table = table
        self.seen: list[str] = []
        self.active = True
        self._lock = threading.Lock()

    def __call__(self, execute: Callable[..., Any], sql: str, params: Any, many: bool, context: Any) -> Any:
        if self.active and self.table in sql:
            with self._lock:
                self.seen.append(sql)
        return execute(sql, params, many, context)

    @property
    def reads(self) -> list[str]:
        return [sql for sql in self.seen if sql.lstrip().upper().startswith(("SELECT", "WITH"))]


@contextmanager
def statements_on(table: str) -> Iterator[Statements]:
    """The statements naming ``table`` that connections opened inside the block run while it lasts."""
    watcher = Statements(table)

    def attach(sender: Any, connection: BaseDatabaseWrapper, **kwargs: Any) -> None:
        if watcher not in connection.execute_wrappers:
            connection.execute_wrappers.append(watcher)

    connection_created.connect(attach, weak=False)
    try:
        yield watcher
    finally:
        connection_created.disconnect(attach)
        watcher.active = False  # a worker thread's connection keeps the hook; it then only passes statements on

"""Liveness and readiness probes."""

from __future__ import annotations

from django.db import connection
from django.http import HttpRequest, JsonResponse

from routing.clients.db_thread import in_db_thread
from routing.config.runtime import runtime


async def health(request: HttpRequest) -> JsonResponse:
    """The process is up and serving (no dependency is checked)."""
    return JsonResponse({"status": "ok"})


def _database_ok() -> str | None:
    try:
        with connection.cursor() as cursor:
            cursor.execute("SELECT 1")
        return None
    except Exception as exc:  # any failure means "not ready"; the message says which
        return f"{type(exc).__name__}: {exc}".splitlines()[0][:200]


async def ready(request: HttpRequest) -> JsonResponse:
    """Ready to route: the database answers and a routing table is loaded."""
    db_error = await in_db_thread(_database_ok)()
    table = runtime.table()
    checks = {
        "database": "ok" if db_error is None else db_error,
        "config": f"version {table.version}" if runtime.loaded else "not loaded",
    }
    if runtime.last_error:
        checks["config_reload"] = runtime.last_error
    ok = db_error is None and runtime.loaded
    return JsonResponse({"status": "ready" if ok else "not ready", "checks": checks}, status=200 if ok else 503)

"""Liveness and readiness probes.

``/health/ready`` answers anyone who can reach it, so it says *what* is wrong in a few fixed words and the
exception's class (``database: unreachable (OperationalError)``), never the error's text: a database error
names the server's host, port, database and user. The text goes to the gateway's log, once per change.
"""

from __future__ import annotations

import logging

from django.db import InterfaceError, OperationalError, connection
from django.http import HttpRequest, JsonResponse

from routing.clients.db_thread import in_db_thread
from routing.config.runtime import runtime
from routing.ops.shutdown import drain

log = logging.getLogger("gomodel.probes")
_logged_problem: str | None = None  # the database problem last logged, so a probe every second logs it once


async def health(request: HttpRequest) -> JsonResponse:
    """The process is up and serving (no dependency is checked)."""
    return JsonResponse({"status": "ok"})


def database_problem() -> str | None:
    """None when the database answers ``SELECT 1``; otherwise what is wrong, without the error's text."""
    global _logged_problem
    try:
        with connection.cursor() as cursor:
            cursor.execute("SELECT 1")
    except Exception as exc:  # noqa: BLE001 - any failure means "not ready"
        kind = "unreachable" if isinstance(exc, OperationalError | InterfaceError) else "failing"
        problem = f"{kind} ({type(exc).__name__})"
        if problem != _logged_problem:
            _logged_problem = problem
            detail = " ".join(str(exc).split())[:500]
            log.warning("readiness: the database is %s: %s", problem, detail)
        return problem
    if _logged_problem is not None:
        _logged_problem = None
        log.info("readiness: the database answers again")
    return None


def reload_problem(last_error: str) -> str:
    """The routing table's last reload failure as the probe shows it: its class only (the text is logged)."""
    kind = last_error.split(":", 1)[0].strip()  # runtime keeps "ExceptionClass: message"
    if not kind.isidentifier():
        kind = "error"
    return f"failing ({kind}); the detail is in the gateway's log"


async def ready(request: HttpRequest) -> JsonResponse:
    """Ready to route: not stopping, the database answers and a routing table is loaded."""
    if drain.draining:  # SIGTERM: the requests in flight finish, new work goes elsewhere
        return JsonResponse({"status": "draining", "checks": {"shutdown": "draining"}}, status=503)
    db_problem = await in_db_thread(database_problem)()
    table = runtime.table()
    checks = {
        "database": "ok" if db_problem is None else db_problem,
        "config": f"version {table.version}" if runtime.loaded else "not loaded",
    }
    if runtime.last_error:
        checks["config_reload"] = reload_problem(runtime.last_error)
    ok = db_problem is None and runtime.loaded
    return JsonResponse({"status": "ready" if ok else "not ready", "checks": checks}, status=200 if ok else 503)

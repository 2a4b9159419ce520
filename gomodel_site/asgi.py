"""ASGI entry point: ``gomodel_site.asgi:application`` under granian or uvicorn.

Four handlers share one process. The relay endpoints (``POST /v1/chat/completions``, ``/v1/messages``,
``/v1/responses`` and ``/v1/embeddings``) go to ``RelayHandler``, which does only what they need around their
views. The rest of the API (``/v1/``), the probes and ``/metrics`` go to a Django handler without middleware: every sync
middleware would cost a thread hop per request. ``/static/`` goes to ServeStatic (gomodel_site/static_files.py),
checked only after the API prefixes so it adds nothing to an API request. Everything else (the admin, the
auditor pages) goes to the standard handler with sessions, CSRF and authentication. Every handler reads a
body in memory and refuses it while it arrives when too large or too slow (routing/api/body_read.py).

The server must speak the ASGI lifespan protocol (``granian --interface asgi``, uvicorn's default): its startup
makes SIGTERM drain the worker and its shutdown flushes the audit (routing/ops/shutdown.py).
"""

from __future__ import annotations

import asyncio
import os

from routing.ops import early_stop

early_stop.catch()  # before Django: a stop signal forwarded while the worker is still importing is kept

import django  # noqa: E402

os.environ.setdefault("DJANGO_SETTINGS_MODULE", "gomodel_site.settings")
django.setup(set_prefix=False)

from gomodel_site.static_files import static_files_app, static_prefix  # noqa: E402
from routing.api.django_handler import BoundedASGIHandler, ProxyASGIHandler  # noqa: E402
from routing.api.relay_handler import RelayHandler  # noqa: E402
from routing.config.runtime import current_table  # noqa: E402
from routing.gateway import tracing  # noqa: E402
from routing.gateway.background import prober  # noqa: E402
from routing.gateway.state import state as gateway_state  # noqa: E402
from routing.ops.shutdown import drain, start_serving, stop_gateway  # noqa: E402
from routing.ops.startup import start_gateway  # noqa: E402

LEAN_PREFIXES = ("/v1/", "/health", "/metrics")

# Tracked: their requests are in flight for the drain at a stop (GOMODEL_SHUTDOWN_GRACE).
_lean = drain.track(RelayHandler(fallback=ProxyASGIHandler()))
_full = drain.track(BoundedASGIHandler())  # bodies in memory, bounded in size and time
STATIC_PREFIX = static_prefix()
_static = static_files_app(fallback=_full)  # a missing file gets Django's 404 page


async def application(scope, receive, send):  # type: ignore[no-untyped-def]
    if scope["type"] == "lifespan":
        await _lifespan(receive, send)
        return
    path: str = scope.get("path", "")
    if path.startswith(LEAN_PREFIXES):
        await _lean(scope, receive, send)
    elif path.startswith(STATIC_PREFIX):
        await _static(scope, receive, send)
    else:
        await _full(scope, receive, send)


async def _lifespan(receive, send):  # type: ignore[no-untyped-def]
    while True:
        message = await receive()
        if message["type"] == "lifespan.startup":
            await start_serving()
            # Follow the routing table now rather than at the first request: with REDIS_URL this starts the
            # task that shares cooldowns, lockouts and provider-limit counts
            # (routing/gateway/background/shared_sync.py), and reads the verdicts still in force (its first poll)
            # while the server starts accepting.
            gateway_state.follow(current_table())
            # The background prober of cooling and locked-out targets (with REDIS_URL, one process of the
            # cluster probes: the holder of a lease; routing/gateway/background/prober.py).
            prober.start(gateway_state)
            tracing.start()  # with OTEL_EXPORTER_OTLP_ENDPOINT set: this worker's exporter thread
            await send({"type": "lifespan.startup.complete"})
        elif message["type"] == "lifespan.shutdown":
            await stop_gateway()
            await prober.stop()  # before the shared health stops: its last reports still go out
            await gateway_state.stop_sharing()
            await gateway_state.close_limits()  # the settlements of the last requests reach Redis
            # Budget alerts those settlements claimed get their first post (or reach the broker) before the exit.
            await asyncio.to_thread(gateway_state.budget_alerts.idle, 5.0)
            await asyncio.to_thread(tracing.shutdown, 5.0)  # the last requests' spans, within 5 s
            await send({"type": "lifespan.shutdown.complete"})
            return


start_gateway()

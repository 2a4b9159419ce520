"""ASGI entry point: ``gomodel_site.asgi:application`` under granian or uvicorn.

Three handlers share one process. The two relay endpoints (``POST /v1/chat/completions`` and
``POST /v1/messages``) go to ``RelayHandler``, which does only what they need around their views. The rest
of the API (``/v1/``), the probes and ``/metrics`` go to a Django handler without middleware: every sync
middleware would cost a thread hop per request. Everything else (the admin, the auditor pages) goes to the
standard handler with sessions, CSRF and authentication.
"""

from __future__ import annotations

import os

import django

os.environ.setdefault("DJANGO_SETTINGS_MODULE", "gomodel_site.settings")
django.setup(set_prefix=False)

from django.core.handlers.asgi import ASGIHandler  # noqa: E402

from routing.api.django_handler import ProxyASGIHandler  # noqa: E402
from routing.api.relay_handler import RelayHandler  # noqa: E402
from routing.ops.startup import start_gateway  # noqa: E402

LEAN_PREFIXES = ("/v1/", "/health", "/metrics")

_lean = RelayHandler(fallback=ProxyASGIHandler())
_full = ASGIHandler()


async def application(scope, receive, send):  # type: ignore[no-untyped-def]
    if scope["type"] == "lifespan":
        await _lifespan(receive, send)
        return
    path: str = scope.get("path", "")
    if path.startswith(LEAN_PREFIXES):
        await _lean(scope, receive, send)
    else:
        await _full(scope, receive, send)


async def _lifespan(receive, send):  # type: ignore[no-untyped-def]
    from routing.ops.startup import stop_gateway

    while True:
        message = await receive()
        if message["type"] == "lifespan.startup":
            await send({"type": "lifespan.startup.complete"})
        elif message["type"] == "lifespan.shutdown":
            await stop_gateway()
            await send({"type": "lifespan.shutdown.complete"})
            return


start_gateway()

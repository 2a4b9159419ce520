"""A bare ASGI relay, the floor the gateway is compared with: ``granian ... harness.relay_app:app``.

It does what any proxy must and nothing more: read the body, POST it to the upstream named by
``BENCH_RELAY_UPSTREAM`` with httpx2 (the gateway's HTTP client), and pass the answer back, chunk by chunk
for a stream. No Django, no routing, no audit, no metrics. Measured under the same load as the gateway, it
tells how much of the gateway's CPU per request any Python relay on this machine would spend anyway (the
server, the client library, the event loop), and how noisy the machine is at the time of the run.
"""

from __future__ import annotations

import os
from typing import Any

import httpx2

UPSTREAM = os.environ.get("BENCH_RELAY_UPSTREAM", "http://127.0.0.1:18001") + "/v1/chat/completions"
_client: httpx2.AsyncClient | None = None


def client() -> httpx2.AsyncClient:
    global _client
    if _client is None:
        _client = httpx2.AsyncClient(limits=httpx2.Limits(max_connections=1000, max_keepalive_connections=1000),
                                     timeout=httpx2.Timeout(60.0, connect=5.0))
    return _client


async def app(scope: dict[str, Any], receive: Any, send: Any) -> None:
    if scope["type"] != "http":
        return
    if scope["method"] == "GET":  # readiness, as the harness polls /health/ready
        await send({"type": "http.response.start", "status": 200, "headers": [(b"content-type", b"text/plain")]})
        await send({"type": "http.response.body", "body": b"ok"})
        return
    body = b""
    while True:
        message = await receive()
        body += message.get("body", b"")
        if not message.get("more_body"):
            break
    request = client().build_request("POST", UPSTREAM, content=body,
                                     headers={"content-type": "application/json", "authorization": "Bearer sk"})
    response = await client().send(request, stream=True)
    try:
        headers = [(b"content-type", response.headers.get("content-type", "application/json").encode())]
        await send({"type": "http.response.start", "status": response.status_code, "headers": headers})
        async for chunk in response.aiter_raw():
            await send({"type": "http.response.body", "body": chunk, "more_body": True})
        await send({"type": "http.response.body", "body": b""})
    finally:
        await response.aclose()

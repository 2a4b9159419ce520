"""A bare ASGI relay, the floor the gateway is compared with: ``granian ... harness.relay_app:app``.

It does what any proxy must and nothing more: read the body, POST it to the upstream named by
``BENCH_RELAY_UPSTREAM``, and pass the answer back, chunk by chunk for a stream. No Django, no routing, no
audit, no metrics. ``BENCH_RELAY_CLIENT`` picks the HTTP client: ``http1`` (the gateway's own,
``routing.clients.http1``), ``aiohttp`` (the kept library it would move to if it were as cheap) or ``httpx2`` (the
general-purpose client it replaced on the hot path). Measured under
the same load as the gateway, it tells how much of the gateway's CPU per request any Python relay with that
client on this machine would spend anyway (the server, the client, the event loop), and how noisy the
machine is at the time of the run.
"""

from __future__ import annotations

import os
from collections.abc import AsyncIterator
from typing import Any

import aiohttp
import httpx2
import yarl

UPSTREAM = os.environ.get("BENCH_RELAY_UPSTREAM", "http://127.0.0.1:18001") + "/v1/chat/completions"
CLIENT = os.environ.get("BENCH_RELAY_CLIENT", "http1")
HEADERS = {"content-type": "application/json", "authorization": "Bearer sk"}
_client: Any = None


async def _post_http1(body: bytes) -> tuple[int, str, AsyncIterator[bytes], Any]:
    global _client
    if _client is None:
        from routing.clients.http1 import Pool

        _client = Pool(max_connections=1000, max_idle_per_origin=1000, keepalive_expiry=30.0)
    response = await _client.request("POST", UPSTREAM, HEADERS, body, timeout=60.0, connect_timeout=5.0)
    content_type = response.header_dict().get("content-type", "application/json")
    return response.status_code, content_type, response, response.aclose


async def _post_httpx2(body: bytes) -> tuple[int, str, AsyncIterator[bytes], Any]:
    global _client
    if _client is None:
        _client = httpx2.AsyncClient(limits=httpx2.Limits(max_connections=1000, max_keepalive_connections=1000),
                                     timeout=httpx2.Timeout(60.0, connect=5.0))
    request = _client.build_request("POST", UPSTREAM, content=body, headers=HEADERS)
    response = await _client.send(request, stream=True)
    content_type = response.headers.get("content-type", "application/json")
    return response.status_code, content_type, response.aiter_raw(), response.aclose


async def _post_aiohttp(body: bytes) -> tuple[int, str, AsyncIterator[bytes], Any]:
    # Set up as a gateway would: one session per event loop, a bounded keep-alive pool with a DNS cache, no
    # cookies, no redirects, the URL parsed once, and the body passed on as it arrives (iter_any).
    global _client
    if _client is None:
        connector = aiohttp.TCPConnector(limit=1000, limit_per_host=1000, keepalive_timeout=30.0,
                                         use_dns_cache=True, ttl_dns_cache=300)
        session = aiohttp.ClientSession(connector=connector, cookie_jar=aiohttp.DummyCookieJar(),
                                        timeout=aiohttp.ClientTimeout(total=60.0, connect=5.0), auto_decompress=False)
        _client = (session, yarl.URL(UPSTREAM))
    session, url = _client
    response = await session.post(url, data=body, headers=HEADERS, allow_redirects=False)
    content_type = response.headers.get("content-type", "application/json")

    async def close() -> None:
        response.release()

    return response.status, content_type, response.content.iter_any(), close


_post = {"http1": _post_http1, "aiohttp": _post_aiohttp, "httpx2": _post_httpx2}[CLIENT]


async def app(scope: dict[str, Any], receive: Any, send: Any) -> None:
    if scope["type"] == "lifespan":  # the production command speaks the lifespan protocol: nothing to set up
        while True:
            message = await receive()
            kind = message["type"].rsplit(".", 1)[-1]
            await send({"type": f"lifespan.{kind}.complete"})
            if kind == "shutdown":
                return
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
    status, content_type, chunks, close = await _post(body)
    try:
        await send({"type": "http.response.start", "status": status,
                    "headers": [(b"content-type", content_type.encode())]})
        async for chunk in chunks:
            await send({"type": "http.response.body", "body": chunk, "more_body": True})
        await send({"type": "http.response.body", "body": b""})
    finally:
        await close()

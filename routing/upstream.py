"""The one place the gateway talks HTTP to providers: a pooled httpx2 client per worker process.

Transport failures are reported as the ``ExceptionKind`` words of ``routing.core.policy`` so the policy,
not this module, decides what they mean::

    httpx2.TransportError
    ├── ConnectError, ConnectTimeout    -> "connect", "connect_timeout"   nothing reached the provider
    ├── WriteTimeout, WriteError        -> "write_timeout"                the body never arrived whole
    ├── ReadTimeout                     -> before the first byte: "read_timeout_before_first_byte"
    │                                      after it: "read_timeout_mid_stream"
    ├── RemoteProtocolError, ReadError  -> "connection_lost_after_send"   the provider may have acted
    └── other ProtocolError             -> "protocol"
"""

from __future__ import annotations

import asyncio
from collections.abc import Mapping
from typing import Any

import httpx2
from django.conf import settings

from routing.core.policy import ExceptionKind


class UpstreamPool:
    """Lazily creates the client inside the running event loop and closes it on shutdown."""

    def __init__(self) -> None:
        self._client: httpx2.AsyncClient | None = None
        self._loop: asyncio.AbstractEventLoop | None = None

    def client(self) -> httpx2.AsyncClient:
        loop = asyncio.get_running_loop()
        if self._client is None or self._loop is not loop:
            # A client belongs to one event loop (tests run several loops in one process).
            self._client = httpx2.AsyncClient(
                limits=httpx2.Limits(
                    max_connections=settings.GOMODEL_UPSTREAM_MAX_CONNECTIONS,
                    max_keepalive_connections=min(200, settings.GOMODEL_UPSTREAM_MAX_CONNECTIONS),
                    keepalive_expiry=30.0,
                ),
                timeout=httpx2.Timeout(600.0, connect=settings.GOMODEL_UPSTREAM_CONNECT_TIMEOUT),
                follow_redirects=False,
                trust_env=False,  # provider traffic never goes through a proxy picked up from the environment
            )
            self._loop = loop
        return self._client

    async def aclose(self) -> None:
        if self._client is not None:
            await self._client.aclose()
            self._client = None


pool = UpstreamPool()


def build(method: str, url: str, headers: Mapping[str, str], body: bytes, timeout_s: float) -> httpx2.Request:
    """An upstream request whose every phase ends by ``timeout_s`` (the attempt's share of the deadline)."""
    connect = min(settings.GOMODEL_UPSTREAM_CONNECT_TIMEOUT, timeout_s)
    timeout = httpx2.Timeout(timeout_s, connect=connect)
    return pool.client().build_request(
        method, url, headers=dict(headers), content=body, extensions={"timeout": timeout.as_dict()}
    )


async def send(request: httpx2.Request) -> httpx2.Response:
    """Send and return as soon as the status line and headers are in; the body is read by the caller."""
    return await pool.client().send(request, stream=True)


def exception_kind(exc: BaseException, *, first_byte_seen: bool) -> ExceptionKind:
    if isinstance(exc, httpx2.ConnectTimeout | httpx2.PoolTimeout):  # nothing was sent either way
        return "connect_timeout"
    if isinstance(exc, httpx2.ConnectError):
        return "connect"
    if isinstance(exc, httpx2.WriteTimeout | httpx2.WriteError):
        return "write_timeout"
    if isinstance(exc, httpx2.ReadTimeout | asyncio.TimeoutError):
        return "read_timeout_mid_stream" if first_byte_seen else "read_timeout_before_first_byte"
    if isinstance(exc, httpx2.RemoteProtocolError | httpx2.ReadError):
        return "connection_lost_after_send"
    return "protocol"


def is_transport_error(exc: BaseException) -> bool:
    return isinstance(exc, httpx2.TransportError | asyncio.TimeoutError)


def header_dict(response: httpx2.Response) -> dict[str, Any]:
    return {k.lower(): v for k, v in response.headers.items()}

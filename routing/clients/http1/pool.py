"""The per-process pool of keep-alive connections to providers, and the one request call the gateway makes.

Idle connections are kept per origin, newest first (a warm connection is reused before a cold one, and the
oldest age out). A connection a server closes leaves the pool the moment the event loop sees it close,
so taking one costs a list pop, not a liveness check of every pooled socket. When all connection slots are
busy a request waits for one, for at most its connect timeout.
"""

from __future__ import annotations

import asyncio
import ssl
from collections import deque
from collections.abc import Mapping
from typing import NamedTuple
from urllib.parse import urlsplit

from routing.clients.http1.connection import Connection, TransportFailure, UpstreamResponse

USER_AGENT = "gomodel-gateway"
# Written by the pool itself; a caller's copy would contradict it.
_RESERVED_HEADERS = frozenset({"host", "content-length", "transfer-encoding", "connection"})
_INLINE_BODY_MAX = 64 * 1024  # smaller bodies go out in the same write as the head
_MAX_CACHED_TARGETS = 1024


class Target(NamedTuple):
    origin: tuple[str, str, int]  # scheme, host, port
    host_header: str
    path: str  # path and query, as sent in the request line


_targets: dict[str, Target] = {}


def parse_target(url: str) -> Target:
    """A provider URL split once and remembered: a process talks to a handful of endpoints."""
    target = _targets.get(url)
    if target is not None:
        return target
    parts = urlsplit(url)
    scheme = parts.scheme.lower()
    if scheme not in ("http", "https") or not parts.hostname:
        raise TransportFailure("connect", f"the provider URL must be http(s)://host[:port]/..., not {scheme}://")
    default_port = 443 if scheme == "https" else 80
    try:
        port = parts.port or default_port
    except ValueError:
        raise TransportFailure("connect", "the provider URL has an invalid port") from None
    host = parts.hostname
    shown_host = f"[{host}]" if ":" in host else host
    host_header = shown_host if port == default_port else f"{shown_host}:{port}"
    path = (parts.path or "/") + (f"?{parts.query}" if parts.query else "")
    target = Target((scheme, host, port), host_header, path)
    if len(_targets) >= _MAX_CACHED_TARGETS:
        _targets.clear()
    _targets[url] = target
    return target


def request_head(method: str, target: Target, headers: Mapping[str, str], body_length: int) -> bytes:
    lines = [f"{method} {target.path} HTTP/1.1\r\nhost: {target.host_header}\r\nuser-agent: {USER_AGENT}\r\n"]
    for name, value in headers.items():
        if name.lower() in _RESERVED_HEADERS:
            continue
        if "\r" in value or "\n" in value or "\r" in name or "\n" in name or ":" in name:
            # Only the name: a value may be a credential.
            raise TransportFailure("protocol", f"the upstream request header {name!r} is malformed")
        lines.append(f"{name}: {value}\r\n")
    lines.append(f"content-length: {body_length}\r\n\r\n")
    try:
        return "".join(lines).encode("latin-1")
    except UnicodeEncodeError:
        raise TransportFailure("protocol", "an upstream request header holds a character outside Latin-1") from None


class Pool:
    def __init__(
        self, *, max_connections: int, max_idle_per_origin: int, keepalive_expiry: float,
        ssl_context: ssl.SSLContext | None = None,
    ) -> None:
        """``ssl_context`` replaces the default (the system trust store, host names checked) for https origins."""
        self.max_connections = max_connections
        self.max_idle_per_origin = max_idle_per_origin
        self.keepalive_expiry = keepalive_expiry
        self.open_connections = 0
        self._idle: dict[tuple[str, str, int], list[Connection]] = {}
        self._waiters: deque[asyncio.Future[None]] = deque()
        self._ssl = ssl_context

    async def request(
        self, method: str, url: str, headers: Mapping[str, str], body: bytes, *, timeout: float, connect_timeout: float,
    ) -> UpstreamResponse:
        """Send a request; return once the status line and headers are in (the body is read from the response).

        ``timeout`` bounds each wait for the provider (to take the body, to start answering, for each later
        piece of the body); ``connect_timeout`` bounds waiting for a free slot and opening a connection.
        """
        target = parse_target(url)
        head = request_head(method, target, headers, len(body))
        loop = asyncio.get_running_loop()
        connection = self._take_idle(target.origin, loop.time())
        if connection is None:
            connection = await self._open(target, connect_timeout, loop)
        try:
            if len(body) <= _INLINE_BODY_MAX:
                connection.start(head + body)
            else:
                connection.start(head)
                assert connection.transport is not None
                connection.transport.write(body)
            await connection.drained(timeout)
            while connection.response is None:
                await connection.wait(timeout)
        except BaseException:
            connection.close()
            raise
        response = connection.response
        response.timeout = timeout
        return response

    # -- connections --------------------------------------------------------------------------------

    def _take_idle(self, origin: tuple[str, str, int], now: float) -> Connection | None:
        idle = self._idle.get(origin)
        while idle:
            connection = idle.pop()
            if connection.closed:
                continue
            if now - connection.idle_since > self.keepalive_expiry:
                connection.close()
                continue
            return connection
        return None

    async def _open(self, target: Target, connect_timeout: float, loop: asyncio.AbstractEventLoop) -> Connection:
        deadline = loop.time() + connect_timeout
        while self.open_connections >= self.max_connections:
            await self._wait_for_slot(deadline, loop)
            idle = self._take_idle(target.origin, loop.time())
            if idle is not None:
                return idle
        scheme, host, port = target.origin
        connection = Connection(self, target.origin)
        self.open_connections += 1
        try:
            async with asyncio.timeout_at(deadline):
                await loop.create_connection(
                    lambda: connection, host, port,
                    ssl=self._ssl_context() if scheme == "https" else None,
                    server_hostname=host if scheme == "https" else None,
                )
        except TimeoutError:
            connection.close()
            raise TransportFailure("connect_timeout", f"no connection to {host}:{port} within {connect_timeout:g}s") \
                from None
        except OSError as exc:  # ssl.SSLError included
            connection.close()
            if isinstance(exc, ssl.SSLCertVerificationError):
                reason = f"TLS certificate not trusted: {exc.verify_message}"
            elif isinstance(exc, ssl.SSLError):
                reason = f"TLS failed: {exc.reason or exc.__class__.__name__}"
            else:
                reason = exc.strerror or exc.__class__.__name__
            raise TransportFailure("connect", f"could not connect to {host}:{port} ({reason})") from None
        except BaseException:
            connection.close()
            raise
        return connection

    async def _wait_for_slot(self, deadline: float, loop: asyncio.AbstractEventLoop) -> None:
        waiter = loop.create_future()
        self._waiters.append(waiter)
        try:
            async with asyncio.timeout_at(deadline):
                await waiter
        except TimeoutError:
            raise TransportFailure(
                "connect_timeout", f"all {self.max_connections} upstream connections stayed busy") from None
        finally:
            if not waiter.done():
                waiter.cancel()

    def _wake_one(self) -> None:
        waiters = self._waiters
        while waiters:
            waiter = waiters.popleft()
            if not waiter.done():
                waiter.set_result(None)
                return

    def release(self, connection: Connection) -> None:
        """A connection whose exchange ended cleanly waits for the next request to its origin."""
        connection.idle_since = asyncio.get_running_loop().time()
        idle = self._idle.setdefault(connection.origin, [])
        idle.append(connection)
        if len(idle) > self.max_idle_per_origin:
            idle[0].close()  # the oldest: it is the likeliest to be closed by the server anyway
        if self._waiters:
            self._wake_one()

    def discard(self, connection: Connection) -> None:
        """Called once a connection is closed, whoever closed it: it gives back its slot."""
        if not connection.counted:
            return
        connection.counted = False
        self.open_connections -= 1
        idle = self._idle.get(connection.origin)
        if idle and connection in idle:
            idle.remove(connection)
        if self._waiters:
            self._wake_one()

    def _ssl_context(self) -> ssl.SSLContext:
        # The system trust store, which OpenSSL also reads from SSL_CERT_FILE / SSL_CERT_DIR when they are set.
        if self._ssl is None:
            self._ssl = ssl.create_default_context()
        return self._ssl

    def close(self) -> None:
        for idle in list(self._idle.values()):
            for connection in list(idle):
                connection.close()
        self._idle.clear()

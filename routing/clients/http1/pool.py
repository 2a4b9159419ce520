"""The per-process pool of keep-alive connections to providers, and the one request call the gateway makes.

Idle connections are kept per origin, newest first (a warm connection is reused before a cold one, and the
oldest age out). A connection a server closes leaves the pool the moment the event loop sees it close,
so taking one costs a list pop, not a liveness check of every pooled socket.

Connection slots are limited twice: ``max_connections`` over all origins and ``max_connections_per_origin``
for each, so a few busy providers cannot hold every slot while another provider's requests wait. When the
pool is full, an idle connection of another origin is closed to make room; when nothing can be freed, a
request waits for a slot for at most its connect timeout and then fails with ``PoolExhausted`` (the
gateway's own overload, not the provider's).

Each request names its ``Route`` (``dial.py``): directly or through a proxy, and the TLS context for an https
origin. Connections are pooled per origin and route, so providers with different proxies or trust never
share one.

A kept-alive connection can be closed by the server just as a request goes out on it. When that request got
no byte of an answer, it is sent once more on a new connection: the server closed the connection instead of
reading the request, so nothing was processed. Once any byte came back, the outcome is the caller's to judge.
"""

from __future__ import annotations

import asyncio
import ssl
from collections import deque
from collections.abc import Mapping
from typing import NamedTuple
from urllib.parse import urlsplit

from routing.clients.http1.connection import Connection
from routing.clients.http1.dial import DIRECT, Resolver, Route, connect_socket, open_tunnel, system_resolver
from routing.clients.http1.failures import PoolExhausted, TransportFailure
from routing.clients.http1.response import UpstreamResponse
from routing.clients.http1.tls import client_context, handshake_refusal

USER_AGENT = "gomodel-gateway"
# Written by the pool itself; a caller's copy would contradict it.
_RESERVED_HEADERS = frozenset({"host", "content-length", "transfer-encoding", "connection"})
_INLINE_BODY_MAX = 64 * 1024  # smaller bodies go out in the same write as the head
_MAX_CACHED_TARGETS = 1024

Origin = tuple[str, str, int]  # scheme, host, port
Key = tuple[Origin, Route]  # what connections are pooled by


class Target(NamedTuple):
    origin: Origin
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


def request_head(method: str, target: Target, headers: Mapping[str, str], body_length: int,
                 route: Route = DIRECT) -> bytes:
    proxy = route.proxy
    if proxy is not None and target.origin[0] == "http":
        # Through a proxy an http request names its whole URL (absolute form), and authenticates to the proxy.
        request_target = f"http://{target.host_header}{target.path}"
        auth = f"proxy-authorization: {proxy.authorization}\r\n" if proxy.authorization else ""
    else:
        request_target, auth = target.path, ""
    lines = [f"{method} {request_target} HTTP/1.1\r\nhost: {target.host_header}\r\nuser-agent: {USER_AGENT}\r\n"
             f"{auth}"]
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
        ssl_context: ssl.SSLContext | None = None, max_connections_per_origin: int | None = None,
        max_response_bytes: int = 64 * 1024 * 1024, max_decoded_bytes: int = 128 * 1024 * 1024,
        resolver: Resolver = system_resolver,
    ) -> None:
        """``ssl_context`` replaces the default (the system trust store, host names checked) for https origins
        whose route names none; ``max_connections_per_origin`` defaults to ``max_connections``."""
        self.max_connections = max_connections
        self.max_connections_per_origin = max_connections_per_origin or max_connections
        self.max_idle_per_origin = max_idle_per_origin
        self.keepalive_expiry = keepalive_expiry
        self.max_response_bytes = max_response_bytes
        self.max_decoded_bytes = max_decoded_bytes
        self.open_connections = 0
        self._open_per_origin: dict[Key, int] = {}
        self._idle: dict[Key, list[Connection]] = {}
        self._waiters: deque[tuple[Key, asyncio.Future[None]]] = deque()
        self._ssl = ssl_context
        self._resolver = resolver

    async def request(
        self, method: str, url: str, headers: Mapping[str, str], body: bytes, *, timeout: float,
        connect_timeout: float, idle_timeout: float | None = None, route: Route = DIRECT,
    ) -> UpstreamResponse:
        """Send a request; return once the status line and headers are in (the body is read from the response).

        ``timeout`` is the whole exchange's: connecting, sending, and reading the answer to its last byte
        must end within it. ``connect_timeout`` bounds waiting for a free slot and opening a connection;
        ``idle_timeout``, when given, bounds each silence between two pieces of the body (a stream).
        """
        target = parse_target(url)
        head = request_head(method, target, headers, len(body), route)
        loop = asyncio.get_running_loop()
        deadline = loop.time() + timeout
        connect_by = min(deadline, loop.time() + connect_timeout)
        key = (target.origin, route)
        connection = self._take_idle(key, loop.time())
        if connection is None:
            connection = await self._open(target, key, connect_by, loop, fresh=False)
        try:
            response = await self._exchange(connection, head, body, deadline)
        except TransportFailure as failure:
            if not (connection.reused and failure.kind == "connection_lost" and not connection.answered):
                raise
            # The server closed a kept-alive connection as the request went out, and not a byte came back.
            connection = await self._open(target, key, min(deadline, loop.time() + connect_timeout), loop, fresh=True)
            response = await self._exchange(connection, head, body, deadline)
        response.deadline = deadline
        response.idle_timeout = idle_timeout
        return response

    async def _exchange(self, connection: Connection, head: bytes, body: bytes, deadline: float) -> UpstreamResponse:
        """Write the request and wait for the response head; any failure (or cancellation) closes the connection."""
        loop = connection.loop
        try:
            if len(body) <= _INLINE_BODY_MAX:
                connection.start(head + body)
            else:
                connection.start(head)
                if connection.transport is None:
                    raise RuntimeError("a started connection has a transport")
                connection.transport.write(body)
            await connection.drained(deadline - loop.time())
            while connection.response is None:
                await connection.wait(deadline - loop.time(), "the provider did not answer in time")
        except BaseException:
            connection.close()
            raise
        return connection.response

    # -- connections --------------------------------------------------------------------------------

    def _take_idle(self, key: Key, now: float) -> Connection | None:
        idle = self._idle.get(key)
        while idle:
            connection = idle.pop()
            if connection.closed:
                continue
            if now - connection.idle_since > self.keepalive_expiry:
                connection.close()
                continue
            return connection
        return None

    async def _open(self, target: Target, key: Key, connect_by: float, loop: asyncio.AbstractEventLoop, *,
                    fresh: bool) -> Connection:
        """A new connection (or, unless ``fresh``, an idle one that came back while waiting for a slot)."""
        while not self._slot_free(key):
            await self._wait_for_slot(key, connect_by, loop)
            if not fresh:
                idle = self._take_idle(key, loop.time())
                if idle is not None:
                    return idle
        _, host, port = target.origin
        route = key[1]
        where = f"{host}:{port}" + (f" through the proxy {route.proxy.address}" if route.proxy else "")
        connection = Connection(self, key, loop)
        self.open_connections += 1
        self._open_per_origin[key] = self._open_per_origin.get(key, 0) + 1
        try:
            async with asyncio.timeout_at(connect_by):
                await self._dial(connection, target, route, loop)
        except TimeoutError:
            connection.close()
            raise TransportFailure("connect_timeout", f"no connection to {where} in time") from None
        except TransportFailure:
            connection.close()
            raise
        except OSError as exc:  # ssl.SSLError included
            connection.close()
            refusal = handshake_refusal(exc)
            if refusal is not None:
                # Nothing was sent, and the same handshake would fail again: a configuration to fix, not a retry.
                raise TransportFailure("tls", f"TLS with {where} failed: {refusal}", detail=refusal) from None
            if isinstance(exc, ssl.SSLError):
                reason = f"TLS failed: {exc.reason or exc.__class__.__name__}"
            else:
                reason = exc.strerror or str(exc) or exc.__class__.__name__
            raise TransportFailure("connect", f"could not connect to {where} ({reason})") from None
        except BaseException:
            connection.close()
            raise
        return connection

    async def _dial(self, connection: Connection, target: Target, route: Route,
                    loop: asyncio.AbstractEventLoop) -> None:
        """Connect ``connection`` to the origin: TCP (to the proxy, if any), the tunnel, then TLS."""
        scheme, host, port = target.origin
        proxy = route.proxy
        sock = await connect_socket(proxy.host if proxy else host, proxy.port if proxy else port, self._resolver)
        try:
            tls: ssl.SSLContext | None = None
            if scheme == "https":
                if proxy is not None:
                    await open_tunnel(sock, proxy, f"[{host}]:{port}" if ":" in host else f"{host}:{port}")
                tls = route.tls or self._ssl_context()
            await loop.create_connection(lambda: connection, sock=sock, ssl=tls,
                                         server_hostname=host if tls is not None else None)
        except BaseException:
            sock.close()
            raise

    def _slot_free(self, key: Key) -> bool:
        """Whether a new connection to ``key`` may open now (closing another origin's idle one if need be)."""
        if self._open_per_origin.get(key, 0) >= self.max_connections_per_origin:
            return False
        if self.open_connections < self.max_connections:
            return True
        oldest = self._oldest_idle_elsewhere(key)
        if oldest is None:
            return False
        oldest.close()  # gives its slot back at once (discard)
        return True

    def _oldest_idle_elsewhere(self, key: Key) -> Connection | None:
        oldest: Connection | None = None
        for other, idle in self._idle.items():
            if other != key and idle and (oldest is None or idle[0].idle_since < oldest.idle_since):
                oldest = idle[0]
        return oldest

    def _could_proceed(self, key: Key) -> bool:
        if self._idle.get(key):
            return True
        if self._open_per_origin.get(key, 0) >= self.max_connections_per_origin:
            return False
        return self.open_connections < self.max_connections or self._oldest_idle_elsewhere(key) is not None

    async def _wait_for_slot(self, key: Key, connect_by: float, loop: asyncio.AbstractEventLoop) -> None:
        waiter: asyncio.Future[None] = loop.create_future()
        entry = (key, waiter)
        self._waiters.append(entry)
        woken = False
        try:
            async with asyncio.timeout_at(connect_by):
                await waiter
            woken = True
        except TimeoutError:
            raise PoolExhausted(self._exhausted_message(key)) from None
        finally:
            if not waiter.done():
                waiter.cancel()
            if entry in self._waiters:
                self._waiters.remove(entry)
            if not woken and waiter.done() and not waiter.cancelled():
                self._wake()  # woken, but cancelled or timed out before taking the slot: the next waiter's

    def _exhausted_message(self, key: Key) -> str:
        _, host, port = key[0]
        if self._open_per_origin.get(key, 0) >= self.max_connections_per_origin:
            return f"all {self.max_connections_per_origin} connections to {host}:{port} stayed busy"
        return f"all {self.max_connections} upstream connections stayed busy"

    def _wake(self) -> None:
        """Wake the first waiter that can proceed now (a slot or an idle connection of its origin is free)."""
        for entry in self._waiters:
            key, waiter = entry
            if not waiter.done() and self._could_proceed(key):
                waiter.set_result(None)
                return

    def release(self, connection: Connection) -> None:
        """A connection whose exchange ended cleanly waits for the next request to its origin."""
        connection.idle_since = connection.loop.time()
        idle = self._idle.setdefault(connection.key, [])
        idle.append(connection)
        if len(idle) > self.max_idle_per_origin:
            idle[0].close()  # the oldest: it is the likeliest to be closed by the server anyway
        if self._waiters:
            self._wake()

    def discard(self, connection: Connection) -> None:
        """Called once a connection is closed, whoever closed it: it gives back its slot."""
        if not connection.counted:
            return
        connection.counted = False
        self.open_connections -= 1
        key = connection.key
        remaining = self._open_per_origin.get(key, 0) - 1
        if remaining > 0:
            self._open_per_origin[key] = remaining
        else:
            self._open_per_origin.pop(key, None)
        idle = self._idle.get(key)
        if idle is not None:
            if connection in idle:
                idle.remove(connection)
            if not idle:
                del self._idle[key]
        if self._waiters:
            self._wake()

    def _ssl_context(self) -> ssl.SSLContext:
        # The system trust store, which OpenSSL also reads from SSL_CERT_FILE / SSL_CERT_DIR when they are set.
        if self._ssl is None:
            self._ssl = client_context()
        return self._ssl

    def close(self) -> None:
        for idle in list(self._idle.values()):
            for connection in list(idle):
                connection.close()
        self._idle.clear()

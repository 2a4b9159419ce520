"""The per-process client for provider traffic: one aiohttp session and connector per event loop, and the one
request call the gateway makes.

aiohttp keeps the keep-alive connections per origin and route (proxy, TLS context), so providers with different
proxies or trust never share one; idle connections expire after ``keepalive_expiry``. A host with several
addresses (IPv6 and IPv4) is connected the happy-eyeballs way (RFC 8305, aiohttp's ``happy_eyeballs_delay``): an
address that drops packets costs a quarter of a second, not the connect timeout. Slots for exchanges are this
package's own (``slots.py``); aiohttp's connector limits are off.

Timeouts: ``timeout`` is the whole exchange's (connecting, sending, and reading the answer to its last byte);
``connect_timeout`` bounds waiting for a slot and then opening a connection (TCP, a proxy's tunnel, TLS);
``idle_timeout``, when given, bounds each silence between two pieces of the body (a stream). A cancelled
request (the client hung up) closes its connection at once, wherever it is.

A kept-alive connection can be closed by the server just as a request goes out on it. When that request got
no byte of an answer, it is sent once more: the server closed the connection instead of reading the request,
so nothing was processed. Once any byte came back, the outcome is the caller's to judge.
"""

from __future__ import annotations

import asyncio
import io
import ssl
from collections.abc import Mapping

import aiohttp
from aiohttp.abc import AbstractResolver

from routing.clients.http.connection import Exchange, ProviderConnector, current_exchange
from routing.clients.http.failure_mapping import (
    MAX_FIELD_BYTES,
    MAX_HEADER_LINES,
    MAX_LINE_BYTES,
    exchange_failure,
)
from routing.clients.http.failures import TransportFailure
from routing.clients.http.response import BUFFER_BYTES, UpstreamResponse
from routing.clients.http.route import DIRECT, Route, Target, parse_target
from routing.clients.http.slots import Slots
from routing.clients.http.tls import client_context

USER_AGENT = "gomodel-gateway"
HAPPY_EYEBALLS_DELAY = 0.25  # RFC 8305's recommended connection attempt delay
# Written by aiohttp itself; a caller's copy would contradict it.
_RESERVED_HEADERS = frozenset({"host", "content-length", "transfer-encoding", "connection", "user-agent"})
# Sent unless the caller gives its own: no compression is asked for (gzip and deflate are still decoded).
_DEFAULT_HEADERS = (("Accept", "*/*"), ("Accept-Encoding", "identity"), ("Content-Type", "application/json"))
# No timeout ever rounds up to a whole second (aiohttp's default does above 5 s).
_NO_CEILING = 1e9
_MAX_CACHED_TIMEOUTS = 256
# Bodies above this go out in 64 KiB pieces, each waiting for the socket (aiohttp warns about larger raw bytes).
_PIECEWISE_BODY = 1024 * 1024


class Client:
    def __init__(
        self, *, max_connections: int, keepalive_expiry: float, max_connections_per_origin: int | None = None,
        max_response_bytes: int = 64 * 1024 * 1024, max_decoded_bytes: int = 128 * 1024 * 1024,
        ssl_context: ssl.SSLContext | None = None, resolver: AbstractResolver | None = None,
    ) -> None:
        """Call inside the event loop the client is for. ``ssl_context`` replaces the default (the system trust
        store, which OpenSSL reads from ``SSL_CERT_FILE`` / ``SSL_CERT_DIR``; host names checked) for https
        origins whose route names none; ``max_connections_per_origin`` defaults to ``max_connections``."""
        self.slots = Slots(max_total=max_connections, max_per_origin=max_connections_per_origin or max_connections)
        self.max_response_bytes = max_response_bytes
        self.max_decoded_bytes = max_decoded_bytes
        connector = ProviderConnector(
            limit=0, limit_per_host=0, keepalive_timeout=keepalive_expiry, ssl=ssl_context or client_context(),
            happy_eyeballs_delay=HAPPY_EYEBALLS_DELAY, interleave=1, timeout_ceil_threshold=_NO_CEILING,
            use_dns_cache=True, ttl_dns_cache=10, resolver=resolver,
        )
        self._session = aiohttp.ClientSession(
            connector=connector, cookie_jar=aiohttp.DummyCookieJar(), auto_decompress=False, trust_env=False,
            read_bufsize=BUFFER_BYTES, max_line_size=MAX_LINE_BYTES, max_field_size=MAX_FIELD_BYTES,
            max_headers=MAX_HEADER_LINES, timeout=aiohttp.ClientTimeout(total=None, ceil_threshold=_NO_CEILING),
        )
        self._timeouts: dict[float, aiohttp.ClientTimeout] = {}

    async def request(
        self, method: str, url: str, headers: Mapping[str, str], body: bytes, *, timeout: float,
        connect_timeout: float, idle_timeout: float | None = None, route: Route = DIRECT,
    ) -> UpstreamResponse:
        """Send a request; return once the status line and headers are in (the body is read from the response)."""
        target = parse_target(url)
        outgoing = _checked_headers(headers)
        if route.proxy_headers is not None and target.origin[0] == "http":
            # Through a proxy an http request goes in absolute form and authenticates to the proxy itself
            # (aiohttp adds a route's proxy headers only to the CONNECT of an https origin).
            outgoing.update(route.proxy_headers)
        loop = asyncio.get_running_loop()
        now = loop.time()
        deadline = now + timeout
        connect_by = min(deadline, now + connect_timeout)
        key = (target.origin, route)
        slots = self.slots
        if not slots.try_take(key):
            await slots.take(key, connect_by)
        try:
            try:
                raw = await self._exchange(method, target, outgoing, body, route, deadline, connect_by, loop)
            except _Resend:
                # The server closed a kept-alive connection as the request went out, and not a byte came back.
                connect_by = min(deadline, loop.time() + connect_timeout)
                raw = await self._exchange(method, target, outgoing, body, route, deadline, connect_by, loop,
                                           resend=False)
        except BaseException:
            slots.give_back(key)
            raise
        return UpstreamResponse(raw, deadline=deadline, idle_timeout=idle_timeout,
                                max_response_bytes=self.max_response_bytes, max_decoded_bytes=self.max_decoded_bytes,
                                release_slot=lambda: slots.give_back(key))

    async def _exchange(
        self, method: str, target: Target, headers: dict[str, str], body: bytes, route: Route, deadline: float,
        connect_by: float, loop: asyncio.AbstractEventLoop, *, resend: bool = True,
    ) -> aiohttp.ClientResponse:
        data = body if len(body) <= _PIECEWISE_BODY else io.BytesIO(body)
        exchange = Exchange()
        token = current_exchange.set(exchange)
        try:
            async with asyncio.timeout_at(deadline):
                return await self._session.request(
                    method, target.url, data=data, headers=headers, allow_redirects=False,
                    proxy=route.proxy_url, proxy_headers=route.proxy_headers, ssl=route.tls or True,
                    timeout=self._timeout(connect_by - loop.time()),
                )
        except aiohttp.ClientError as exc:
            if resend and isinstance(exc, aiohttp.ServerDisconnectedError | aiohttp.ClientOSError) and \
                    not isinstance(exc, aiohttp.ClientConnectorError) and exchange.unanswered_on_reused():
                raise _Resend from None
            proxy = route.proxy.address if route.proxy else None
            raise exchange_failure(exc, route.where(target.origin), proxy) from None
        except TimeoutError:  # the deadline, not aiohttp's connect timeout (a ClientError, above)
            if exchange.unsent():
                raise TransportFailure("write_timeout", "the provider did not read the request in time") from None
            raise TransportFailure("read_timeout", "the provider did not answer in time") from None
        finally:
            current_exchange.reset(token)

    def _timeout(self, connect_s: float) -> aiohttp.ClientTimeout:
        """aiohttp's timeouts for one request: only connecting is left to it (the rest is ``request``'s)."""
        connect_s = max(connect_s, 0.001)
        timeout = self._timeouts.get(connect_s)
        if timeout is None:
            if len(self._timeouts) >= _MAX_CACHED_TIMEOUTS:
                self._timeouts.clear()
            timeout = self._timeouts[connect_s] = aiohttp.ClientTimeout(
                total=None, connect=connect_s, ceil_threshold=_NO_CEILING)
        return timeout

    @property
    def closed(self) -> bool:
        return self._session.closed

    async def aclose(self) -> None:
        await self._session.close()

    def forget(self) -> None:
        """Let go of a client whose event loop is gone (tests run several loops in one process): its sockets
        went with the loop, and neither session nor connector may later warn that it was left open."""
        connector = self._session.connector
        self._session.detach()
        if connector is not None:
            connector._close()  # synchronous; with the loop closed it only marks the connector closed


class _Resend(Exception):
    """The request went out on a kept-alive connection that closed without a byte of an answer."""


def _checked_headers(headers: Mapping[str, str]) -> dict[str, str]:
    """The caller's headers less those aiohttp writes, and the ones it would add otherwise; ``TransportFailure``
    (``protocol``) naming (only) a header that would break the request's framing or is not Latin-1.

    aiohttp adds ``Accept``, ``Accept-Encoding`` (with ``br`` when brotli is installed, which this client does
    not decode), a ``Content-Type`` and its own ``User-Agent`` to a request that lacks them; giving them here
    costs less than its per-request ``skip_auto_headers`` handling."""
    checked: dict[str, str] = {"User-Agent": USER_AGENT}
    given: set[str] = set()
    for name, value in headers.items():
        lowered = name.lower()
        if lowered in _RESERVED_HEADERS:
            continue
        if "\r" in value or "\n" in value or "\r" in name or "\n" in name or ":" in name:
            # Only the name: a value may be a credential.
            raise TransportFailure("protocol", f"the upstream request header {name!r} is malformed")
        if not (value.isascii() and name.isascii()):
            try:
                name.encode("latin-1")
                value.encode("latin-1")
            except UnicodeEncodeError:
                raise TransportFailure(
                    "protocol", f"the upstream request header {name!r} holds a character outside Latin-1") from None
        given.add(lowered)
        checked[name] = value
    for name, value in _DEFAULT_HEADERS:
        if name.lower() not in given:
            checked[name] = value
    return checked

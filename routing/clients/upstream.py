"""The one place the gateway talks HTTP to providers: a keep-alive pool per worker process.

The client is ``routing.clients.http1`` (an asyncio protocol per connection with httptools' parser), chosen for
the hot path: measured as a bare relay under granian it costs a fraction of a general-purpose client's
CPU per request (``bench/README.md``). Transport failures are reported as the ``ExceptionKind`` words of
``routing.core.error_classifier`` so the policy, not this module, decides what they mean::

    TransportFailure.kind
    ├── connect, connect_timeout   -> "connect", "connect_timeout"   nothing reached the provider
    ├── tls                        -> "tls"                          nothing was sent; a retry fails alike
    ├── write_timeout              -> "write_timeout"                the body never arrived whole
    ├── read_timeout               -> before the first byte: "read_timeout_before_first_byte"
    │                                 after it: "read_timeout_mid_stream"
    ├── connection_lost            -> "connection_lost_after_send"   the provider may have acted
    └── protocol                   -> "protocol"

``PoolExhausted`` (every connection slot stayed busy) is not a transport failure: nothing was sent, so no
provider is blamed; the attempt loop answers it as the gateway's own overload (503).

A ``tls`` failure (a certificate that fails verification, a port that does not speak TLS, TLS files that do
not load) is the gateway's configuration for that provider, which only an operator can fix: ``send`` logs it
as one WARNING naming the provider, its address and the verification message (never a header), and
``failure_detail`` gives the part a client may read.
"""

from __future__ import annotations

import asyncio
import logging
import re
from collections.abc import Mapping
from dataclasses import dataclass

from django.conf import settings

from routing.clients.egress import egress
from routing.clients.http1 import Pool, TransportFailure, UpstreamResponse
from routing.core.error_classifier import ExceptionKind
from routing.core.table import ProviderSpec

log = logging.getLogger("gomodel.upstream")

KEEPALIVE_EXPIRY_S = 30.0
MAX_IDLE_PER_PROVIDER = 200
# The headers a provider key travels in (OpenAI's bearer token, Azure, Anthropic, Gemini, Azure API Management,
# an AWS session token beside a SigV4 signature).
KEY_HEADERS = frozenset({"authorization", "proxy-authorization", "api-key", "x-api-key", "x-goog-api-key",
                         "ocp-apim-subscription-key", "x-amz-security-token"})
_KEY_IN_QUERY = re.compile(r"(?i)([?&](?:key|api[-_]?key|subscription-key)=)[^&#]*")


@dataclass(frozen=True, slots=True)
class UpstreamRequest:
    """One request to a provider. Its repr masks the key (headers, a ``key=`` query) and leaves out the body."""

    method: str
    url: str
    headers: Mapping[str, str]
    body: bytes
    timeout_s: float
    connect_timeout_s: float
    idle_timeout_s: float | None = None  # streams: the longest silence between two pieces
    provider: ProviderSpec | None = None  # its proxy and TLS settings (None: the environment's, the system's)

    def __repr__(self) -> str:
        headers = {k: ("********" if k.lower() in KEY_HEADERS else v) for k, v in self.headers.items()}
        url = _KEY_IN_QUERY.sub(r"\1********", self.url)
        return (f"UpstreamRequest(method={self.method!r}, url={url!r}, headers={headers!r}, "
                f"body=<{len(self.body)} bytes>, timeout_s={self.timeout_s!r}, "
                f"connect_timeout_s={self.connect_timeout_s!r})")


class UpstreamPool:
    """Lazily creates the pool inside the running event loop (tests run several loops in one process)."""

    def __init__(self) -> None:
        self._pool: Pool | None = None
        self._loop: asyncio.AbstractEventLoop | None = None

    def get(self) -> Pool:
        loop = asyncio.get_running_loop()
        if self._pool is None or self._loop is not loop:
            self._pool = Pool(
                max_connections=settings.GOMODEL_UPSTREAM_MAX_CONNECTIONS,
                max_idle_per_origin=min(MAX_IDLE_PER_PROVIDER, settings.GOMODEL_UPSTREAM_MAX_CONNECTIONS),
                keepalive_expiry=KEEPALIVE_EXPIRY_S,
                max_connections_per_origin=settings.GOMODEL_UPSTREAM_MAX_CONNECTIONS_PER_ORIGIN,
                max_response_bytes=settings.GOMODEL_UPSTREAM_MAX_RESPONSE_BYTES,
                max_decoded_bytes=settings.GOMODEL_UPSTREAM_MAX_DECOMPRESSED_BYTES,
            )
            self._loop = loop
        return self._pool

    async def aclose(self) -> None:
        if self._pool is not None:
            self._pool.close()
            self._pool = None


pool = UpstreamPool()


def build(method: str, url: str, headers: Mapping[str, str], body: bytes, timeout_s: float, *,
          stream: bool = False, provider: ProviderSpec | None = None) -> UpstreamRequest:
    """An upstream request whose whole exchange ends by ``timeout_s`` (the attempt's share of the deadline);
    a stream also fails after ``GOMODEL_STREAM_IDLE_TIMEOUT`` without a byte."""
    connect = min(settings.GOMODEL_UPSTREAM_CONNECT_TIMEOUT, timeout_s)
    idle = settings.GOMODEL_STREAM_IDLE_TIMEOUT if stream else None
    return UpstreamRequest(method, url, headers, body, timeout_s, connect, idle, provider)


async def send(request: UpstreamRequest) -> UpstreamResponse:
    """Send and return as soon as the status line and headers are in; the body is read by the caller."""
    try:
        route = egress.route(request.provider, request.url)
        return await pool.get().request(
            request.method, request.url, request.headers, request.body,
            timeout=request.timeout_s, connect_timeout=request.connect_timeout_s, idle_timeout=request.idle_timeout_s,
            route=route,
        )
    except TransportFailure as failure:
        if failure.kind == "tls":
            # The message names the address and the verification error, never a header (where keys travel).
            name = request.provider.name if request.provider is not None else "(none)"
            log.warning("provider %s: %s", name, failure)
        raise


_KINDS: dict[str, ExceptionKind] = {
    "connect": "connect",
    "connect_timeout": "connect_timeout",
    "tls": "tls",
    "write_timeout": "write_timeout",
    "connection_lost": "connection_lost_after_send",
    "protocol": "protocol",
}


def exception_kind(exc: BaseException, *, first_byte_seen: bool) -> ExceptionKind:
    if isinstance(exc, TransportFailure) and exc.kind != "read_timeout":
        return _KINDS.get(exc.kind, "protocol")
    # A read timeout, or the deadline's own timeout around the attempt.
    return "read_timeout_mid_stream" if first_byte_seen else "read_timeout_before_first_byte"


def failure_detail(exc: BaseException) -> str | None:
    """What a client's error may say about a TLS failure beyond its reason word (the verification message,
    without the address); None for every other failure, whose reason word says enough."""
    if isinstance(exc, TransportFailure) and exc.kind == "tls":
        return exc.detail
    return None


def is_transport_error(exc: BaseException) -> bool:
    return isinstance(exc, TransportFailure | asyncio.TimeoutError)

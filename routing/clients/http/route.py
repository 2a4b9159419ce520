"""Where a request goes: its origin, its URL as aiohttp takes it, and the route there (a proxy, a TLS context).

A process talks to a handful of provider endpoints, so a URL is parsed once and remembered; a route's proxy
URL and ``Proxy-Authorization`` header are built once, when the route is.
"""

from __future__ import annotations

import ssl
from dataclasses import dataclass, field
from typing import NamedTuple
from urllib.parse import urlsplit

from yarl import URL

from routing.clients.http.failures import TransportFailure
from routing.clients.http.proxy import Proxy

_MAX_CACHED_TARGETS = 1024

Origin = tuple[str, str, int]  # scheme, host, port


class Target(NamedTuple):
    origin: Origin
    url: URL


_targets: dict[str, Target] = {}


def parse_target(url: str) -> Target:
    """The origin and parsed URL of a provider URL; ``TransportFailure`` (``connect``) unless it is http(s)."""
    target = _targets.get(url)
    if target is not None:
        return target
    parts = urlsplit(url)
    scheme = parts.scheme.lower()
    if scheme not in ("http", "https") or not parts.hostname:
        raise TransportFailure("connect", f"the provider URL must be http(s)://host[:port]/..., not {scheme}://")
    try:
        port = parts.port or (443 if scheme == "https" else 80)
        parsed = URL(url)
    except ValueError:
        raise TransportFailure("connect", "the provider URL has an invalid port or host") from None
    target = Target((scheme, parts.hostname, port), parsed)
    if len(_targets) >= _MAX_CACHED_TARGETS:
        _targets.clear()
    _targets[url] = target
    return target


@dataclass(frozen=True)
class Route:
    """How a request reaches its origin: directly or through a proxy, and with which TLS context."""

    proxy: Proxy | None = None
    tls: ssl.SSLContext | None = None  # https origins; None: the client's default context
    # What aiohttp is handed, built once per route.
    proxy_url: URL | None = field(default=None, init=False, compare=False, repr=False)
    proxy_headers: dict[str, str] | None = field(default=None, init=False, compare=False, repr=False)

    def __post_init__(self) -> None:
        if self.proxy is not None:
            object.__setattr__(self, "proxy_url", URL.build(scheme="http", host=self.proxy.host, port=self.proxy.port))
            if self.proxy.authorization:
                object.__setattr__(self, "proxy_headers", {"Proxy-Authorization": self.proxy.authorization})

    def where(self, origin: Origin) -> str:
        """``host:port`` of the origin, and the proxy it goes through: for failure messages (no credentials)."""
        _, host, port = origin
        shown = f"[{host}]:{port}" if ":" in host else f"{host}:{port}"
        return shown + (f" through the proxy {self.proxy.address}" if self.proxy else "")


DIRECT = Route()

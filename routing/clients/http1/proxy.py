"""Proxies for provider traffic: a proxy URL, the environment's ``HTTPS_PROXY`` / ``HTTP_PROXY`` / ``NO_PROXY``,
and which proxy (if any) a request to an origin takes.

An https origin is reached through an HTTP proxy by a ``CONNECT`` tunnel (TLS runs end to end, the proxy
sees only the host name); an http origin by sending the request to the proxy in absolute form. Only
``http://`` proxies are spoken (as by curl and Go for the common corporate egress); credentials in the URL
become a ``Proxy-Authorization: Basic`` header and never appear in a message or a repr.

``NO_PROXY`` is a comma-separated list of host names (a name also covers its subdomains; a leading ``.`` or
``*.`` is the same), IP addresses, CIDR ranges, each optionally with ``:port``, or ``*`` for everything.
Loopback origins (``localhost``, 127.0.0.0/8, ::1) never go through an environment proxy, as in Go.
"""

from __future__ import annotations

import base64
import ipaddress
from dataclasses import dataclass, field
from urllib.parse import unquote, urlsplit

DIRECT_SETTING = "direct"  # a provider's ``proxy`` setting that bypasses any environment proxy


@dataclass(frozen=True, slots=True)
class Proxy:
    host: str
    port: int
    authorization: str | None = field(default=None, repr=False)  # the Proxy-Authorization header's value

    @property
    def address(self) -> str:
        return f"[{self.host}]:{self.port}" if ":" in self.host else f"{self.host}:{self.port}"


def parse_proxy_url(url: str) -> Proxy:
    """An ``http://[user:password@]host[:port]`` proxy (scheme optional); ``ValueError`` saying what is wrong."""
    text = url.strip()
    if "://" not in text:
        text = f"http://{text}"
    parts = urlsplit(text)
    if parts.scheme.lower() != "http":
        raise ValueError(f"a proxy is an http://host:port URL; {parts.scheme}:// proxies are not supported "
                         "(https origins still get TLS end to end through an http:// proxy)")
    if not parts.hostname:
        raise ValueError("the proxy URL names no host")
    try:
        port = parts.port or 80
    except ValueError:
        raise ValueError("the proxy URL has an invalid port") from None
    if parts.path not in ("", "/") or parts.query or parts.fragment:
        raise ValueError("a proxy URL is http://host:port, without a path or query")
    authorization = None
    if parts.username is not None:
        credentials = f"{unquote(parts.username)}:{unquote(parts.password or '')}"
        authorization = "Basic " + base64.b64encode(credentials.encode()).decode("ascii")
    return Proxy(parts.hostname, port, authorization)


@dataclass(frozen=True, slots=True)
class ProxyEnvironment:
    """The environment's proxy settings, as read once at start-up."""

    https: Proxy | None = None
    http: Proxy | None = None
    no_proxy: tuple[str, ...] = ()

    def proxy_for(self, scheme: str, host: str, port: int) -> Proxy | None:
        proxy = self.https if scheme == "https" else self.http
        if proxy is None or is_loopback(host) or bypasses_proxy(host, port, self.no_proxy):
            return None
        return proxy


def split_no_proxy(value: str) -> tuple[str, ...]:
    return tuple(entry.strip().lower() for entry in value.split(",") if entry.strip())


def is_loopback(host: str) -> bool:
    host = host.lower().rstrip(".")
    if host == "localhost" or host.endswith(".localhost"):
        return True
    try:
        return ipaddress.ip_address(host).is_loopback
    except ValueError:
        return False


def bypasses_proxy(host: str, port: int, no_proxy: tuple[str, ...]) -> bool:
    """Whether ``NO_PROXY`` (split into entries) names ``host:port``."""
    host = host.lower().rstrip(".")
    try:
        address: ipaddress.IPv4Address | ipaddress.IPv6Address | None = ipaddress.ip_address(host)
    except ValueError:
        address = None
    for entry in no_proxy:
        if entry == "*":
            return True
        name, entry_port = _split_port(entry)
        if entry_port is not None and entry_port != port:
            continue
        if address is not None:
            try:
                if address in ipaddress.ip_network(name, strict=False):
                    return True
            except ValueError:
                pass
            continue
        name = name.removeprefix("*").lstrip(".").rstrip(".")
        if name and (host == name or host.endswith("." + name)):
            return True
    return False


def _split_port(entry: str) -> tuple[str, int | None]:
    """``host:port``, ``[v6]:port``, a bare IPv6 address or CIDR, or a name: (name, port or None)."""
    if entry.startswith("["):
        name, _, rest = entry[1:].partition("]")
        return name, int(rest[1:]) if rest.startswith(":") and rest[1:].isdigit() else None
    if entry.count(":") == 1:
        name, _, port = entry.partition(":")
        return name, int(port) if port.isdigit() else None
    return entry, None

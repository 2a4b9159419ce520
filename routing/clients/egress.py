"""How each provider is reached: the route (proxy, TLS context) for a provider's settings and an origin.

A provider's ``proxy`` is empty (the environment's ``HTTPS_PROXY`` / ``HTTP_PROXY`` / ``NO_PROXY`` decide),
``direct`` (never a proxy), or an ``http://host:port`` proxy of its own (``NO_PROXY`` does not apply to it).
Its TLS files (a CA bundle, a client certificate and key) make a TLS context of its own; without them the
pool's default context is used (the system trust store, which honours ``SSL_CERT_FILE`` / ``SSL_CERT_DIR``).

TLS files are read by ``prepare``, which the configuration runtime calls in its own thread whenever it
compiles a new routing table, so the request path never reads a file and a rotated certificate is picked
up at the next configuration change (or restart). Routes are computed once per provider setting and origin.
"""

from __future__ import annotations

import ssl
from collections.abc import Iterable

from django.conf import settings

from routing.clients.http1 import TransportFailure
from routing.clients.http1.dial import DIRECT, Route
from routing.clients.http1.pool import Origin, parse_target
from routing.clients.http1.proxy import DIRECT_SETTING, Proxy, ProxyEnvironment, parse_proxy_url, split_no_proxy
from routing.clients.http1.tls import TLSFiles, client_context
from routing.core.table import ProviderSpec

_MAX_ROUTES = 4096
RouteKey = tuple[str, str, str, str, str]  # a provider's proxy and TLS settings, and the request's URL


def tls_files(provider: ProviderSpec) -> TLSFiles:
    return TLSFiles(provider.ca_bundle, provider.client_cert, provider.client_key)


def check_proxy_setting(value: str) -> None:
    """``ValueError`` unless ``value`` is a provider ``proxy`` setting the client can use."""
    if value and value != DIRECT_SETTING:
        parse_proxy_url(value)


class Egress:
    def __init__(self) -> None:
        self._environment: ProxyEnvironment | None = None
        self._contexts: dict[TLSFiles, ssl.SSLContext | ValueError] = {}
        self._routes: dict[RouteKey, Route] = {}

    def environment(self) -> ProxyEnvironment:
        if self._environment is None:
            self._environment = ProxyEnvironment(
                https=parse_proxy_url(settings.HTTPS_PROXY) if settings.HTTPS_PROXY else None,
                http=parse_proxy_url(settings.HTTP_PROXY) if settings.HTTP_PROXY else None,
                no_proxy=split_no_proxy(settings.NO_PROXY),
            )
        return self._environment

    def route(self, provider: ProviderSpec | None, url: str) -> Route:
        """The route to ``url``'s origin for ``provider``'s settings; ``TransportFailure`` when they cannot be
        used (``tls``: a TLS file that does not load; ``connect``: an unusable proxy or URL): nothing is sent."""
        if provider is None:
            key: RouteKey = ("", "", "", "", url)
        else:
            key = (provider.proxy, provider.ca_bundle, provider.client_cert, provider.client_key, url)
        route = self._routes.get(key)  # a dict lookup per request: the key's strings hash once each
        if route is None:
            proxy_setting, ca_bundle, client_cert, client_key, _ = key
            route = self._route(proxy_setting, TLSFiles(ca_bundle, client_cert, client_key), parse_target(url).origin)
            if len(self._routes) >= _MAX_ROUTES:
                self._routes = {}
            self._routes[key] = route
        return route

    def _route(self, proxy_setting: str, files: TLSFiles, origin: Origin) -> Route:
        scheme, host, port = origin
        proxy: Proxy | None
        if proxy_setting == DIRECT_SETTING:
            proxy = None
        elif proxy_setting:
            try:
                proxy = parse_proxy_url(proxy_setting)
            except ValueError as exc:
                raise TransportFailure("connect", f"the provider's proxy cannot be used: {exc}") from None
        else:
            proxy = self.environment().proxy_for(scheme, host, port)
        tls = self._context(files) if scheme == "https" and files != TLSFiles() else None
        if proxy is None and tls is None:
            return DIRECT
        return Route(proxy=proxy, tls=tls)

    def _context(self, files: TLSFiles) -> ssl.SSLContext:
        context = self._contexts.get(files)
        if context is None:  # a table ``prepare`` has not seen (tests build tables directly)
            context = self._contexts[files] = _load(files)
        if isinstance(context, ValueError):
            # The file's name and problem go to the log; a client hears only that the gateway's files are at fault.
            raise TransportFailure("tls", f"the provider's TLS files cannot be used: {context}",
                                   detail="the gateway's TLS files for this provider cannot be used")
        return context

    def prepare(self, providers: Iterable[ProviderSpec]) -> list[str]:
        """Load every provider's TLS files afresh (off the request path); the problems, one per provider."""
        contexts: dict[TLSFiles, ssl.SSLContext | ValueError] = {}
        problems: list[str] = []
        for provider in providers:
            files = tls_files(provider)
            if files == TLSFiles():
                continue
            context = contexts.get(files)
            if context is None:
                context = contexts[files] = _load(files)
            if isinstance(context, ValueError):
                problems.append(f"provider {provider.name}: {context}")
        self._contexts = contexts
        self._routes = {}  # new contexts: routes (and so pooled connections) use them from now on
        return problems


def _load(files: TLSFiles) -> ssl.SSLContext | ValueError:
    try:
        return client_context(files)
    except ValueError as exc:
        return exc


egress = Egress()

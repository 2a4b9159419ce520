"""Google Cloud access tokens for Vertex AI providers, fetched and refreshed off the event loop.

A Vertex AI provider has no API key: each request carries ``Authorization: Bearer <access token>``, an OAuth
token minted from the provider's credentials (``credentials_file``: a service-account JSON key; empty:
Application Default Credentials, i.e. ``GOOGLE_APPLICATION_CREDENTIALS``, gcloud's user credentials or the
metadata server) with the ``cloud-platform`` scope. Minting one is blocking HTTP (google-auth), so each provider
has a ``TokenSource`` whose own thread fetches the first token, then sleeps until shortly before it expires and
fetches the next; the request path only reads the cached token (``TokenSource.current``), never waits on Google
(apart from the very first token of a provider, awaited without blocking the loop for at most
``FIRST_TOKEN_WAIT_S``).

While a source has no valid token (the first fetch failed, or refreshing failed until the last token expired),
``access_keys`` names the problem instead, and the attempt fails as a provider without a usable key does: a
configuration error, never sent. The change into and out of that state is logged once, by provider name and
the exception's type and message; a token never appears in a log line, a repr or a message.

The token endpoint is reached with ``requests``: a provider's ``proxy`` setting applies (``direct``: none;
``http://host:port``: that proxy), otherwise requests' own environment handling (``HTTPS_PROXY``, ``NO_PROXY``,
``REQUESTS_CA_BUNDLE``).
"""

from __future__ import annotations

import asyncio
import datetime
import logging
import threading
import time
from collections.abc import Callable, Iterable
from typing import Any, Protocol

from routing.core.table import ProviderSpec, Secret

log = logging.getLogger(__name__)

SCOPES = ("https://www.googleapis.com/auth/cloud-platform",)
GOOGLE_TOKEN_KINDS = frozenset({"vertex", "vertex_anthropic"})  # the provider kinds that authenticate this way
REFRESH_AHEAD_S = 300.0  # fetch the next token this long before the current one expires (Google's last an hour)
EXPIRY_SAFETY_S = 10.0  # a token this close to its expiry is not handed out: it could expire on the way
RETRY_FIRST_S = 1.0  # after a failed fetch: wait, doubling up to RETRY_MAX_S
RETRY_MAX_S = 60.0
FIRST_TOKEN_WAIT_S = 10.0  # how long the first request of a provider waits for its first token
TOKEN_HTTP_TIMEOUT_S = 10.0
DEFAULT_LIFETIME_S = 3600.0  # for credentials that mint a token without saying when it expires


class Credentials(Protocol):
    """What google-auth's credentials offer that this module uses."""

    token: str | None
    expiry: datetime.datetime | None

    def refresh(self, request: Any) -> None: ...


def load_credentials(credentials_file: str) -> Credentials:
    """The provider's google-auth credentials, scoped for Vertex AI (reads files, may probe the metadata server)."""
    import google.auth
    from google.oauth2 import service_account

    if credentials_file:
        return service_account.Credentials.from_service_account_file(  # type: ignore[no-untyped-call,no-any-return]
            credentials_file, scopes=list(SCOPES))
    credentials, _project = google.auth.default(scopes=list(SCOPES))
    return credentials


def token_request(proxy: str) -> Any:
    """google-auth's requests transport with a timeout on every call and the provider's proxy setting."""
    import requests
    from google.auth.transport.requests import Request

    session = requests.Session()
    if proxy == "direct":
        session.trust_env = False
    elif proxy:
        session.proxies = {"http": proxy, "https": proxy}

    class TimedRequest(Request):
        def __call__(self, url: str, method: str = "GET", body: Any = None, headers: Any = None,
                     timeout: float | None = None, **kwargs: Any) -> Any:
            return super().__call__(url, method, body, headers,  # type: ignore[no-untyped-call]
                                    timeout=timeout or TOKEN_HTTP_TIMEOUT_S, **kwargs)

    return TimedRequest(session)


def _problem_text(exc: BaseException) -> str:
    """An exception as a short line: its type and first argument (google-auth puts the token endpoint's error
    there, never a token or a key)."""
    first = exc.args[0] if exc.args else ""
    return f"{type(exc).__name__}: {str(first)[:200]}" if first else type(exc).__name__


class TokenSource:
    """One provider's access token: fetched by its own thread, read by the request path without waiting."""

    def __init__(self, provider: str, credentials_file: str, proxy: str = "", *,
                 loader: Callable[[str], Credentials] = load_credentials,
                 transport: Callable[[str], Any] = token_request,
                 clock: Callable[[], float] = time.time) -> None:
        self.provider = provider
        self.credentials_file = credentials_file
        self.proxy = proxy
        self._loader, self._transport, self._clock = loader, transport, clock
        self._key: Secret | None = None
        self._expires_at = 0.0
        self._usable_until = 0.0
        self._problem = "no access token fetched yet"
        self._failing = False
        self._attempted = threading.Event()  # set once the first fetch ended, well or not
        self._stop = threading.Event()
        self._waiters: list[tuple[asyncio.AbstractEventLoop, asyncio.Future[None]]] = []
        self._lock = threading.Lock()
        self._thread: threading.Thread | None = None
        self.fetches = 0  # tokens minted so far (tests read it)

    def __repr__(self) -> str:
        return f"TokenSource(provider={self.provider!r}, credentials_file={self.credentials_file!r})"

    # -- the request path ----------------------------------------------------------------------------------

    def current(self) -> Secret | None:
        """The cached token while it is valid for a while yet, else None. Never blocks."""
        key = self._key
        if key is None or self._clock() >= self._usable_until:
            return None
        return key

    @property
    def problem(self) -> str:
        """Why there is no token (when ``current`` is None): never a secret."""
        if self._key is not None and not self._failing:
            return "the access token expired and no new one was fetched yet"
        return self._problem

    @property
    def attempted(self) -> bool:
        return self._attempted.is_set()

    async def first_attempt(self, timeout_s: float) -> None:
        """Wait (without blocking the loop) until the first fetch ended or ``timeout_s`` passed."""
        if self._attempted.is_set():
            return
        loop = asyncio.get_running_loop()
        future: asyncio.Future[None] = loop.create_future()
        with self._lock:
            if self._attempted.is_set():
                return
            self._waiters.append((loop, future))
        await asyncio.wait({future}, timeout=timeout_s)  # the future is left to the thread when time runs out

    # -- the thread ----------------------------------------------------------------------------------------

    def start(self) -> None:
        if self._thread is None:
            self._thread = threading.Thread(target=self._run, name=f"gomodel-gcp-token-{self.provider}", daemon=True)
            self._thread.start()

    def stop(self) -> None:
        self._stop.set()

    def _run(self) -> None:
        credentials: Credentials | None = None
        request: Any = None
        retry_s = RETRY_FIRST_S
        while not self._stop.is_set():
            try:
                if credentials is None:
                    credentials = self._loader(self.credentials_file)
                    request = self._transport(self.proxy)
                credentials.refresh(request)
                self._store(credentials)
            except Exception as exc:  # noqa: BLE001 - whatever google-auth raises, the source keeps trying
                self._failed(exc)
                credentials = None  # read again at the next try: the file may have been fixed or rotated
                wait_s, retry_s = retry_s, min(RETRY_MAX_S, retry_s * 2)
            else:
                retry_s = RETRY_FIRST_S
                wait_s = self._next_refresh_in()
            finally:
                self._end_first_attempt()
            self._stop.wait(wait_s)

    def _store(self, credentials: Credentials) -> None:
        token = credentials.token
        if not token:
            raise ValueError("the credentials gave no access token")
        now = self._clock()
        expiry = credentials.expiry
        # google-auth keeps expiry as a naive UTC datetime.
        expires_at = (expiry.replace(tzinfo=datetime.UTC).timestamp() if expiry is not None
                      else now + DEFAULT_LIFETIME_S)
        # Handed out until shortly before it expires (a quarter of its life for a short-lived token).
        usable_until = expires_at - min(EXPIRY_SAFETY_S, max(0.0, expires_at - now) / 4)
        self._key, self._expires_at, self._usable_until = Secret(token), expires_at, usable_until
        self.fetches += 1
        if self._failing:
            log.info("provider %s: Google access token fetched again; its requests go out", self.provider)
        self._failing = False

    def _failed(self, exc: Exception) -> None:
        self._problem = f"no Google access token ({_problem_text(exc)})"
        if not self._failing:
            log.warning("provider %s: cannot fetch a Google access token (%s); retrying in the background%s",
                        self.provider, _problem_text(exc),
                        "" if self.current() is not None else "; its attempts fail without being sent")
        self._failing = True

    def _next_refresh_in(self) -> float:
        """Seconds until the next fetch: ahead of expiry by REFRESH_AHEAD_S, or by half the token's life when
        that is shorter (a short-lived token is renewed at mid-life)."""
        remaining = self._expires_at - self._clock()
        return max(1.0, remaining - min(REFRESH_AHEAD_S, remaining / 2))

    def _end_first_attempt(self) -> None:
        if self._attempted.is_set():
            return
        with self._lock:
            self._attempted.set()
            waiters, self._waiters = self._waiters, []
        for loop, future in waiters:
            if not loop.is_closed():
                loop.call_soon_threadsafe(_resolve, future)


def _resolve(future: asyncio.Future[None]) -> None:
    if not future.done():
        future.set_result(None)


class TokenSources:
    """Every Vertex AI provider's TokenSource, by provider name (bounded by the routing table's providers)."""

    def __init__(self) -> None:
        self._sources: dict[str, TokenSource] = {}
        self._lock = threading.Lock()

    def prepare(self, providers: Iterable[ProviderSpec]) -> None:
        """Start a source for every Google-token provider (so its token is ready before its first request) and
        stop those of providers gone or changed; called by the configuration runtime at each new table."""
        wanted = {p.name: p for p in providers if p.kind in GOOGLE_TOKEN_KINDS}
        with self._lock:
            for name in list(self._sources):
                provider = wanted.get(name)
                if provider is None or not _same(self._sources[name], provider):
                    self._sources.pop(name).stop()
        for provider in wanted.values():
            self.source_for(provider)

    def source_for(self, provider: ProviderSpec) -> TokenSource:
        """The provider's source, started now if it has none yet (or its credentials setting changed)."""
        source = self._sources.get(provider.name)
        if source is not None and _same(source, provider):
            return source
        with self._lock:
            source = self._sources.get(provider.name)
            if source is None or not _same(source, provider):
                if source is not None:
                    source.stop()
                source = TokenSource(provider.name, provider.credentials_file, provider.proxy)
                self._sources[provider.name] = source
                source.start()
        return source

    def stop_all(self) -> None:
        with self._lock:
            for source in self._sources.values():
                source.stop()
            self._sources.clear()


def _same(source: TokenSource, provider: ProviderSpec) -> bool:
    return source.credentials_file == provider.credentials_file and source.proxy == provider.proxy


sources = TokenSources()


async def access_keys(provider: ProviderSpec, *, wait_s: float = FIRST_TOKEN_WAIT_S,
                      registry: TokenSources | None = None) -> tuple[tuple[Secret, ...], tuple[str, ...]]:
    """A Google-token provider's (keys, key problems), shaped like ``ProviderSpec.api_keys`` and ``.key_problems``:
    the current access token, or no key and the reason. Waits only for a provider's very first token."""
    source = (registry or sources).source_for(provider)
    key = source.current()
    if key is None and not source.attempted:
        await source.first_attempt(wait_s)
        key = source.current()
    if key is None:
        return (), (source.problem,)
    return (key,), ()

"""AWS credentials for Bedrock providers that sign with SigV4, resolved off the event loop and cached per provider.

Where they come from, in order (docs/providers.md):

1. the provider's ``aws_access_key_id`` / ``aws_secret_access_key`` (/ ``aws_session_token``) references,
   resolved with the routing table into ``ProviderSpec.aws_keys``: used as they are, no I/O;
2. else the AWS default credential chain (``botocore.session.get_session().get_credentials()``): environment
   variables, ``AWS_PROFILE`` and the shared files, SSO, web identity, container and instance roles.

The chain reads files and may call the network (the instance metadata service, STS), so it never runs on the
event loop: the first request of a provider awaits one lookup in a worker thread (concurrent requests share
it), and the result is cached. Credentials that expire (roles, SSO, web identity) are refreshed in the
background, in a thread, ``REFRESH_MARGIN_S`` before they expire; the request path only reads the cache, and
awaits a lookup itself only if the cache is empty or about to expire (``MIN_VALIDITY_S``). A chain that finds
nothing is remembered for ``RETRY_AFTER_S`` so a misconfigured provider does not cost a thread per request.

No credential value is ever put in a message, a log line or a repr (``AwsCredentials`` masks its fields).
"""

from __future__ import annotations

import asyncio
import logging
import time
from collections.abc import Callable
from dataclasses import dataclass, field
from datetime import datetime
from typing import Any

import botocore.session
from botocore.exceptions import BotoCoreError

from routing.core.table import ProviderSpec

log = logging.getLogger("gomodel.aws")

REFRESH_MARGIN_S = 300.0  # refresh this long before expiry (botocore itself refreshes within 15 minutes of it)
MIN_VALIDITY_S = 60.0  # credentials closer to expiry than this are not used for a new request
RETRY_AFTER_S = 30.0  # how long "no credentials" is remembered before the chain is asked again
REFRESH_RETRY_S = 30.0  # a background refresh that failed is retried this soon


class CredentialsUnavailable(Exception):
    """No AWS credentials for a provider: a configuration error, reported like a provider without a usable key."""


@dataclass(frozen=True, slots=True)
class AwsCredentials:
    """One set of AWS credentials; ``expires_at`` is unix seconds (None: they do not expire)."""

    access_key: str = field(repr=False)
    secret_key: str = field(repr=False)
    token: str = field(repr=False, default="")
    expires_at: float | None = None

    def __repr__(self) -> str:
        return f"AwsCredentials(access_key='********', secret_key='********', expires_at={self.expires_at!r})"

    __str__ = __repr__


def resolve_default_chain() -> Any:
    """The AWS default credential chain's credentials object, or None (blocking: call it in a thread)."""
    return botocore.session.get_session().get_credentials()


def _expiry_of(source: Any) -> float | None:
    # botocore keeps the expiry of refreshable credentials in a private attribute; without it the credentials
    # are treated as long-lived and refreshed on the fixed schedule below.
    expiry = getattr(source, "_expiry_time", None)
    return expiry.timestamp() if isinstance(expiry, datetime) else None


def _frozen(source: Any) -> AwsCredentials:
    """A snapshot of a botocore credentials object (blocking: a refreshable one may refresh here)."""
    frozen = source.get_frozen_credentials()
    if not frozen.access_key or not frozen.secret_key:
        raise CredentialsUnavailable("the AWS credential chain returned incomplete credentials")
    return AwsCredentials(frozen.access_key, frozen.secret_key, frozen.token or "", _expiry_of(source))


@dataclass(slots=True)
class _Entry:
    source: Any  # the botocore credentials object the snapshot came from (refreshable or not)
    credentials: AwsCredentials
    refresher: asyncio.Task[None] | None = None


class AwsCredentialCache:
    """Credentials per provider name. ``resolve`` (blocking, run in a thread) and ``clock`` are injectable."""

    def __init__(self, *, resolve: Callable[[], Any] = resolve_default_chain,
                 clock: Callable[[], float] = time.time) -> None:
        self._resolve = resolve
        self._clock = clock
        self._entries: dict[str, _Entry] = {}
        self._pending: dict[str, asyncio.Future[_Entry]] = {}
        self._failed: dict[str, tuple[float, str]] = {}  # provider -> (when, why) the chain last found nothing

    async def get(self, provider: ProviderSpec) -> AwsCredentials:
        """The provider's credentials; CredentialsUnavailable when it has none. Only reads the cache when warm."""
        keys = provider.aws_keys
        if keys:
            return AwsCredentials(keys[0].reveal(), keys[1].reveal(), keys[2].reveal() if len(keys) > 2 else "")
        now = self._clock()
        entry = self._entries.get(provider.name)
        if entry is not None and self._usable(entry.credentials, now):
            self._keep_fresh(provider.name, entry)
            return entry.credentials
        failed = self._failed.get(provider.name)
        if failed is not None and now - failed[0] < RETRY_AFTER_S:
            raise CredentialsUnavailable(failed[1])
        return (await self._lookup(provider.name)).credentials

    def forget(self, name: str | None = None) -> None:
        """Drop what is cached for a provider (or all): the next request looks the chain up again."""
        names = list(self._entries) if name is None else [name]
        for key in names:
            entry = self._entries.pop(key, None)
            if entry is not None and entry.refresher is not None:
                entry.refresher.cancel()
        if name is None:
            self._failed.clear()
        else:
            self._failed.pop(name, None)

    def _usable(self, credentials: AwsCredentials, now: float) -> bool:
        return credentials.expires_at is None or credentials.expires_at - now > MIN_VALIDITY_S

    async def _lookup(self, name: str) -> _Entry:
        """One chain lookup in a thread, shared by every request of the provider that waits for it."""
        loop = asyncio.get_running_loop()
        pending = self._pending.get(name)
        if pending is None or pending.get_loop() is not loop:
            pending = loop.create_task(self._load(name))
            self._pending[name] = pending
        try:
            return await asyncio.shield(pending)
        finally:
            if pending.done() and self._pending.get(name) is pending:
                del self._pending[name]

    async def _load(self, name: str) -> _Entry:
        try:
            source, credentials = await asyncio.to_thread(self._read_chain)
        except CredentialsUnavailable as exc:
            self._failed[name] = (self._clock(), str(exc))
            log.warning("provider %s: %s", name, exc)
            raise
        self._failed.pop(name, None)
        old = self._entries.get(name)
        entry = _Entry(source, credentials, old.refresher if old is not None else None)
        self._entries[name] = entry
        self._keep_fresh(name, entry)
        return entry

    def _read_chain(self) -> tuple[Any, AwsCredentials]:
        """Blocking: the chain's credentials and their snapshot."""
        try:
            source = self._resolve()
            if source is None:
                raise CredentialsUnavailable(
                    "no AWS credentials: the AWS credential chain found none (set aws_access_key_id and "
                    "aws_secret_access_key references or an API key on the provider, or AWS_PROFILE, the AWS_* "
                    "environment variables or a role for the gateway)")
            return source, _frozen(source)
        except BotoCoreError as exc:  # a broken profile, an unreachable STS or SSO: the words name no secret
            raise CredentialsUnavailable(f"the AWS credential chain failed: {type(exc).__name__}") from None

    def _keep_fresh(self, name: str, entry: _Entry) -> None:
        """Run the entry's background refresher on this loop when its credentials expire."""
        if entry.credentials.expires_at is None:
            return
        task = entry.refresher
        loop = asyncio.get_running_loop()
        if task is not None and not task.done() and task.get_loop() is loop:
            return
        entry.refresher = loop.create_task(self._refresh_loop(name, entry), name=f"aws-credentials-{name}")

    async def _refresh_loop(self, name: str, entry: _Entry) -> None:
        while self._entries.get(name) is entry:
            expires_at = entry.credentials.expires_at
            if expires_at is None:
                return
            await asyncio.sleep(max(1.0, expires_at - REFRESH_MARGIN_S - self._clock()))
            if self._entries.get(name) is not entry:
                return
            try:
                fresh = await asyncio.to_thread(_frozen, entry.source)
            except Exception as exc:  # noqa: BLE001 - any failure: keep the old credentials while they last
                log.warning("provider %s: refreshing AWS credentials failed (%s); retrying in %.0f s", name,
                            type(exc).__name__, REFRESH_RETRY_S)
                await asyncio.sleep(REFRESH_RETRY_S)
                continue
            if fresh.expires_at is not None and expires_at is not None and fresh.expires_at <= expires_at:
                await asyncio.sleep(REFRESH_RETRY_S)  # not renewed yet (botocore waits for its own window)
            entry.credentials = fresh


credential_cache = AwsCredentialCache()

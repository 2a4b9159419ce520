"""Where a model's provider rpm/tpm is decided for each attempt: Redis when ``REDIS_URL`` is set, else this process.

``admit`` is called at the moment an attempt is about to be sent to a target whose model carries a provider
limit (a model without one never reaches the store). With Redis it costs one round trip: one Lua script
(``routing.clients.provider_quota_scripts``) checks the target's request log and token buckets on Redis's clock
and counts the attempt in both or neither, so every process and host shares one exact minute. ``settle`` and
``release`` are not waited for: written with this turn of the event loop's commands, on the same connection as
the admissions after them, so Redis applies a settlement before this process's next admission.

This process's ``QuotaRegistry`` counts every attempt too: it decides alone without Redis (the embedded default:
each process counts on its own, with the same reservations), and while Redis is away. An outage never fails a
request: the attempt is admitted or refused by this process's window, a warning is logged once when Redis goes
and once when it answers again (``gomodel_shared_state_outages_total`` counts outages, as for shared health), and
Redis is asked again at most every ``retry_after_s``. A ticket remembers where it was counted and is settled there.

Keys (``prefix`` defaults to ``gomodel:provider-quota:``): ``<prefix><model>:req`` and ``<prefix><model>:tok``.
"""

from __future__ import annotations

import asyncio
import itertools
import logging
import secrets
import time
from collections.abc import Callable, Coroutine
from dataclasses import dataclass
from typing import Any

from routing.clients.provider_quota_scripts import ADMITTED, AT_RPM, PROVIDER_QUOTA, admit_reply
from routing.clients.redis_client import RedisReplyError, RedisUnavailable, RespClient, ScriptCall, Sent
from routing.core.provider_limits import AT_RPM as REASON_RPM
from routing.core.provider_limits import AT_TPM as REASON_TPM
from routing.core.provider_limits import ProviderLimits, QuotaRefusal, QuotaRegistry, QuotaTicket, TargetQuota

logger = logging.getLogger("gomodel.provider_limits")

DEFAULT_PREFIX = "gomodel:provider-quota:"
_UNAVAILABLE = (RedisUnavailable, RedisReplyError, OSError)


@dataclass(frozen=True, slots=True)
class _Calls:
    """One target's script calls, encoded once for its keys and limits."""

    limits: ProviderLimits
    admit: ScriptCall
    settle: ScriptCall


class ProviderQuotaStore:
    """Admits attempts against their target's provider rpm/tpm; exact across processes with Redis."""

    def __init__(
        self,
        registry: QuotaRegistry,
        redis_url: str | None,
        *,
        prefix: str = DEFAULT_PREFIX,
        socket_timeout: float = 0.5,
        retry_after_s: float = 1.0,
        clock: Callable[[], float] = time.monotonic,
        on_outage: Callable[[], None] | None = None,
    ) -> None:
        self.registry = registry
        self.prefix = prefix
        self._client = RespClient(redis_url, timeout=socket_timeout) if redis_url else None
        self._retry_after_s = retry_after_s
        self._clock = clock
        self._on_outage = on_outage
        self._down_until: float | None = None  # None: Redis is believed reachable
        self._calls: dict[str, _Calls] = {}
        self._origin = secrets.token_hex(6)  # members of the request log are unique across processes
        self._serial = itertools.count()
        self._background: set[asyncio.Task[None]] = set()

    @property
    def in_redis(self) -> bool:
        """Whether admissions are decided in Redis now (configured and believed reachable)."""
        return self._client is not None and self._down_until is None

    async def admit(self, quota: TargetQuota, reserve: int, now: float) -> QuotaTicket | QuotaRefusal:
        """Admit an attempt to ``quota``'s target (counted, ``reserve`` tokens reserved), or why not."""
        client = self._client
        if client is None or self._skip_redis():
            return quota.dispatch(now, reserve)
        reserved = quota.limits.reserved(reserve)
        member = f"{self._origin}:{next(self._serial)}"
        try:
            reply = await client.run_call(self._calls_for(quota).admit, member, reserved)
        except _UNAVAILABLE as exc:
            # Whether the script ran before the failure is unknown: at worst the attempt is counted in Redis too,
            # which errs towards the provider's own counter.
            self._mark_down(exc)
            return quota.dispatch(self._clock(), reserve)
        self._mark_up()
        now = self._clock()
        now_ms, verdict, retry_ms, _requests, _tokens = admit_reply(reply)
        if verdict != ADMITTED:
            refusal = QuotaRefusal(REASON_RPM if verdict == AT_RPM else REASON_TPM, max(1.0, retry_ms / 1000))
            quota.mark_full(refusal, now)
            return refusal
        ticket = quota.count(now, reserved)
        ticket.shared_second, ticket.member = now_ms // 1000, member
        return ticket

    def settle(self, ticket: QuotaTicket, tokens: int) -> None:
        """Replace the ticket's reservation with the tokens the attempt really used; never waits, runs once."""
        self._finish(ticket, tokens, release=False)

    def release(self, ticket: QuotaTicket) -> None:
        """Take back an attempt that was never sent (its request and its reservation); never waits, runs once."""
        self._finish(ticket, 0, release=True)

    def _finish(self, ticket: QuotaTicket, tokens: int, *, release: bool) -> None:
        if ticket.settled:
            return
        ticket.settled = True
        now = self._clock()
        if release:
            self.registry.release(ticket, now)
        else:
            self.registry.settle(ticket, tokens, now)
        if ticket.shared_second is None or self._client is None:
            return
        if not release and tokens == ticket.reserved:
            return  # nothing changes in Redis (a model with only an rpm, or a reservation that was exact)
        calls = self._calls.get(ticket.target)
        if calls is None:  # the target left the routing table meanwhile
            return
        args = (ticket.member, ticket.shared_second, ticket.reserved, max(0, tokens), 1 if release else 0)
        sent = self._client.send_call(calls.settle, args, self._settled)
        if sent is Sent.NOT_SENT:
            self._in_background(self._settle_when_connected(calls.settle, args))

    def _settled(self, reply: object) -> None:
        if isinstance(reply, _UNAVAILABLE):
            # Not applied in Redis: the reservation stays there until its second leaves the window, which errs
            # towards the provider's own counter; this process's window has the settlement already.
            self._mark_down(reply)
        else:
            self._mark_up()

    async def _settle_when_connected(self, call: ScriptCall, args: tuple[str | int, ...]) -> None:
        if self._client is None:
            return
        try:
            await self._client.run_call(call, *args)
        except _UNAVAILABLE as exc:
            self._mark_down(exc)
            return
        self._mark_up()

    def _in_background(self, work: Coroutine[Any, Any, None]) -> None:
        task = asyncio.get_running_loop().create_task(work)
        self._background.add(task)  # the loop keeps only weak references to tasks
        task.add_done_callback(self._background.discard)

    def _calls_for(self, quota: TargetQuota) -> _Calls:
        calls = self._calls.get(quota.name)
        if calls is None or calls.limits != quota.limits:
            keys = [f"{self.prefix}{quota.name}:req", f"{self.prefix}{quota.name}:tok"]
            limits = quota.limits
            admit = ScriptCall(PROVIDER_QUOTA, keys, ["admit", _limit_arg(limits.rpm), _limit_arg(limits.tpm)],
                               per_call=2)
            calls = _Calls(limits, admit, ScriptCall(PROVIDER_QUOTA, keys, ["settle"], per_call=5))
            self._calls[quota.name] = calls
        return calls

    def forget(self, known: Callable[[str], bool]) -> None:
        """Drop the encoded calls of targets that ``known`` no longer names (a routing table change)."""
        for name in [name for name in self._calls if not known(name)]:
            del self._calls[name]

    async def aclose(self) -> None:
        """Close the connection once the settlements already sent have their answers."""
        if self._client is None:
            return
        await self._client.drain()
        if self._background:
            await asyncio.gather(*self._background, return_exceptions=True)
        await self._client.aclose()

    def _skip_redis(self) -> bool:
        return self._down_until is not None and self._clock() < self._down_until

    def _mark_down(self, exc: BaseException) -> None:
        if self._down_until is None:
            logger.warning(
                "PROVIDER LIMITS DEGRADED: Redis is unreachable (%s: %s); provider rpm/tpm are counted per process "
                "until it answers again (asked again every %gs)", type(exc).__name__, exc, self._retry_after_s,
            )
            if self._on_outage is not None:
                self._on_outage()
        self._down_until = self._clock() + self._retry_after_s
        self.registry.shared = False

    def _mark_up(self) -> None:
        if self._down_until is not None:
            self._down_until = None
            logger.warning("provider limits: Redis answers again; provider rpm/tpm are exact across processes again")
        self.registry.shared = True


def _limit_arg(value: int | None) -> int:
    return -1 if value is None else value

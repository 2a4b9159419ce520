"""Pin stores: where session pins live (tier pins, target pins, warm-cache memory).

A pin is a short string under ``(namespace, key)`` with a sliding TTL: reading it restarts its TTL. Two
implementations share one protocol:

* ``MemoryPinStore`` keeps pins in a bounded TTL+LRU map of this process (the demo, a single worker).
* ``RedisPinStore`` keeps them in Redis so every worker process and replica sees the same pins. Each
  operation is one round trip (a Lua script, atomic in Redis, sent by the pipelined client of
  ``routing.clients.redis_client``),
  keys are ``gomodel:pin:<namespace>:<key>``,
  and ``escalate`` is decided inside Redis, so a concurrent "easy" write from another worker can never
  overwrite "hard".

When Redis cannot be reached (connection refused, a socket timeout after ``socket_timeout`` seconds, any
Redis error), the operation is served by an in-process ``MemoryPinStore`` instead, one warning is logged
for the outage, and Redis is not tried again for ``retry_after_s`` seconds, so an outage costs at most one
timeout every few seconds instead of one per request. Pins written during the outage stay in that process;
when Redis answers again, its pins are used and an info line says so.
"""

from __future__ import annotations

import logging
import time
from collections.abc import Callable, Sequence
from typing import Protocol

from routing.clients.redis_client import RedisReplyError, RedisUnavailable, RespClient, Script
from routing.core.sessions import TIERS, TtlLruStore

logger = logging.getLogger("gomodel.pinstore")

KEY_PREFIX = "gomodel:pin:"
DEFAULT_MAX_ENTRIES = 100_000
_UNAVAILABLE = (RedisUnavailable, RedisReplyError, OSError)


class PinStore(Protocol):
    """Session pins shared by whoever serves the session's requests."""

    async def get(self, namespace: str, key: str) -> str | None:
        """The live pin, or None; reading it restarts its TTL."""
        ...

    async def put(self, namespace: str, key: str, value: str, ttl_s: float) -> None:
        """Set the pin (whatever it was) for ``ttl_s`` seconds of inactivity; ``ttl_s`` <= 0 deletes it."""
        ...

    async def escalate(
        self, namespace: str, key: str, value: str, ttl_s: float, *, order: Sequence[str] = TIERS
    ) -> str | None:
        """Store the higher of the live pin and ``value`` in ``order``, restart the TTL, and return the
        pin as it was before (None if there was none). Atomic: concurrent writers cannot lower a pin."""
        ...

    async def delete(self, namespace: str, key: str) -> None: ...

    async def aclose(self) -> None:
        """Release connections; the store must not be used afterwards."""
        ...


def higher(previous: str | None, value: str, order: Sequence[str]) -> str:
    """``value`` unless ``previous`` ranks above it in ``order`` (unknown values rank lowest)."""
    if previous is None or previous not in order:
        return value
    if value not in order:
        return previous
    return previous if order.index(previous) > order.index(value) else value


class MemoryPinStore:
    """Pins in this process only: a bounded TTL+LRU map on the monotonic clock."""

    def __init__(self, max_entries: int = DEFAULT_MAX_ENTRIES, clock: Callable[[], float] = time.monotonic) -> None:
        self._store: TtlLruStore[tuple[str, str], str] = TtlLruStore(max_entries)
        self._clock = clock

    async def get(self, namespace: str, key: str) -> str | None:
        return self._store.get((namespace, key), self._clock())

    async def put(self, namespace: str, key: str, value: str, ttl_s: float) -> None:
        self._store.put((namespace, key), value, self._clock(), ttl_s)

    async def escalate(
        self, namespace: str, key: str, value: str, ttl_s: float, *, order: Sequence[str] = TIERS
    ) -> str | None:
        return self._store.upsert(
            (namespace, key), lambda previous: higher(previous, value, order), self._clock(), ttl_s
        )

    async def delete(self, namespace: str, key: str) -> None:
        self._store.delete((namespace, key))

    async def aclose(self) -> None:
        return None

    def __len__(self) -> int:
        return len(self._store)


# A pin is a hash {v: value, ttl: milliseconds} so that a read can restart the TTL it was stored with.
_GET = """
local pin = redis.call('HMGET', KEYS[1], 'v', 'ttl')
if not pin[1] then return false end
local ttl = tonumber(pin[2])
if ttl and ttl > 0 then redis.call('PEXPIRE', KEYS[1], ttl) end
return pin[1]
"""
_PUT = """
redis.call('HSET', KEYS[1], 'v', ARGV[1], 'ttl', ARGV[2])
redis.call('PEXPIRE', KEYS[1], ARGV[2])
return 1
"""
# ARGV: value, ttl ms, then the order from lowest to highest.
_ESCALATE = """
local previous = redis.call('HGET', KEYS[1], 'v')
local function rank(value)
  if not value then return 0 end
  for i = 3, #ARGV do
    if ARGV[i] == value then return i end
  end
  return 0
end
local keep = ARGV[1]
if rank(previous) > rank(ARGV[1]) then keep = previous end
redis.call('HSET', KEYS[1], 'v', keep, 'ttl', ARGV[2])
redis.call('PEXPIRE', KEYS[1], ARGV[2])
return previous
"""
_GET_SCRIPT, _PUT_SCRIPT, _ESCALATE_SCRIPT = Script(_GET), Script(_PUT), Script(_ESCALATE)


class RedisPinStore:
    """Pins in Redis, shared by every worker; falls back to an in-process store while Redis is down."""

    def __init__(
        self,
        url: str,
        *,
        socket_timeout: float = 0.25,
        retry_after_s: float = 5.0,
        fallback: MemoryPinStore | None = None,
        clock: Callable[[], float] = time.monotonic,
    ) -> None:
        self._client = RespClient(url, timeout=socket_timeout)
        self.fallback = fallback or MemoryPinStore(clock=clock)
        self._retry_after_s = retry_after_s
        self._clock = clock
        self._down_until: float | None = None  # None: Redis is believed reachable

    @property
    def redis_available(self) -> bool:
        """False during an outage (between a failure and the next successful call)."""
        return self._down_until is None

    async def get(self, namespace: str, key: str) -> str | None:
        if self._skip_redis():
            return await self.fallback.get(namespace, key)
        try:
            value = await self._client.run_script(_GET_SCRIPT, [_key(namespace, key)], [])
        except _UNAVAILABLE as exc:
            self._mark_down(exc)
            return await self.fallback.get(namespace, key)
        self._mark_up()
        return value if isinstance(value, str) else None

    async def put(self, namespace: str, key: str, value: str, ttl_s: float) -> None:
        if ttl_s <= 0:
            await self.delete(namespace, key)
            return
        if self._skip_redis():
            await self.fallback.put(namespace, key, value, ttl_s)
            return
        try:
            await self._client.run_script(_PUT_SCRIPT, [_key(namespace, key)], [value, _millis(ttl_s)])
        except _UNAVAILABLE as exc:
            self._mark_down(exc)
            await self.fallback.put(namespace, key, value, ttl_s)
            return
        self._mark_up()

    async def escalate(
        self, namespace: str, key: str, value: str, ttl_s: float, *, order: Sequence[str] = TIERS
    ) -> str | None:
        if ttl_s <= 0 or self._skip_redis():
            return await self.fallback.escalate(namespace, key, value, ttl_s, order=order)
        try:
            previous = await self._client.run_script(
                _ESCALATE_SCRIPT, [_key(namespace, key)], [value, _millis(ttl_s), *order])
        except _UNAVAILABLE as exc:
            self._mark_down(exc)
            return await self.fallback.escalate(namespace, key, value, ttl_s, order=order)
        self._mark_up()
        return previous if isinstance(previous, str) else None

    async def delete(self, namespace: str, key: str) -> None:
        await self.fallback.delete(namespace, key)
        if self._skip_redis():
            return
        try:
            await self._client.execute("DEL", _key(namespace, key))
        except _UNAVAILABLE as exc:
            self._mark_down(exc)
            return
        self._mark_up()

    async def aclose(self) -> None:
        await self._client.aclose()

    def _skip_redis(self) -> bool:
        return self._down_until is not None and self._clock() < self._down_until

    def _mark_down(self, exc: BaseException) -> None:
        if self._down_until is None:
            logger.warning(
                "Redis pin store unreachable (%s: %s); keeping pins in this process until it answers again",
                type(exc).__name__,
                exc,
            )
        self._down_until = self._clock() + self._retry_after_s

    def _mark_up(self) -> None:
        if self._down_until is not None:
            self._down_until = None
            logger.info("Redis pin store reachable again; pins are shared by all workers")


def make_pin_store(redis_url: str | None, *, max_entries: int = DEFAULT_MAX_ENTRIES) -> PinStore:
    """A Redis-backed store when ``redis_url`` is set (pins shared by all workers), else an in-process one."""
    fallback = MemoryPinStore(max_entries=max_entries)
    if redis_url:
        return RedisPinStore(redis_url, fallback=fallback)
    return fallback


def _key(namespace: str, key: str) -> str:
    return f"{KEY_PREFIX}{namespace}:{key}"


def _millis(ttl_s: float) -> int:
    return max(1, int(ttl_s * 1000))

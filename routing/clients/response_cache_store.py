"""Where the response cache keeps its entries: this process (bounded by bytes, LRU + TTL) or Redis (shared).

``MemoryCacheStore`` is the embedded default. ``RedisCacheStore`` keeps entries in Redis under
``<prefix><sha256 key>`` with the entry's TTL (``SET ... PX``), each sealed (routing/clients/cache_sealing.py)
so that an answer leaves the process only encrypted, and bound to its key. Entries larger than the store's
``max_entry_bytes`` are never written, so Redis holds at most its entries' count times that bound; the Redis
server's own ``maxmemory`` policy bounds the count (docs/cache.md).

Redis may never make a request slower or fail it: a read waits at most ``timeout`` seconds (then it is a miss),
a write is sent without being waited for, and after a failure Redis is not asked again for ``retry_after_s``
seconds, every lookup meanwhile a miss at no cost. One warning is logged per outage, one line when Redis is
back.
"""

from __future__ import annotations

import asyncio
import logging
import threading
import time
from collections import OrderedDict
from collections.abc import Callable
from typing import Protocol

from routing.clients.cache_sealing import Sealer
from routing.clients.redis_client import RedisReplyError, RedisUnavailable, RespClient, encode_command

logger = logging.getLogger("gomodel.cache")

_UNAVAILABLE = (RedisUnavailable, RedisReplyError, OSError, TimeoutError)


class CacheStore(Protocol):
    async def get(self, key: str) -> bytes | None:
        """The live entry under ``key``, or None (also when the store cannot answer)."""
        ...

    def put(self, key: str, value: bytes, ttl_s: float) -> None:
        """Keep ``value`` for ``ttl_s`` seconds; never waits and never raises."""
        ...

    async def aclose(self) -> None: ...


class MemoryCacheStore:
    """Entries in this process: at most ``max_bytes`` of values, the least recently used evicted first, each one
    dropped when its TTL (fixed when written) has passed."""

    def __init__(self, *, max_bytes: int, max_entry_bytes: int, clock: Callable[[], float] = time.monotonic) -> None:
        if max_bytes < 1 or max_entry_bytes < 1:
            raise ValueError("the cache's byte bounds must be positive")
        self.max_bytes = max_bytes
        self.max_entry_bytes = min(max_entry_bytes, max_bytes)
        self._clock = clock
        self._entries: OrderedDict[str, tuple[bytes, float]] = OrderedDict()  # value, expires_at
        self._bytes = 0
        self._lock = threading.Lock()  # the admin's purge may run in another thread

    @property
    def size_bytes(self) -> int:
        return self._bytes

    def __len__(self) -> int:
        return len(self._entries)

    async def get(self, key: str) -> bytes | None:
        return self.get_now(key)

    def get_now(self, key: str) -> bytes | None:
        with self._lock:
            entry = self._entries.get(key)
            if entry is None:
                return None
            value, expires_at = entry
            if self._clock() >= expires_at:
                self._drop(key)
                return None
            self._entries.move_to_end(key)
            return value

    def put(self, key: str, value: bytes, ttl_s: float) -> None:
        size = _weight(key, value)
        if ttl_s <= 0 or size > self.max_entry_bytes:
            return
        with self._lock:
            if key in self._entries:
                self._drop(key)
            self._entries[key] = (value, self._clock() + ttl_s)
            self._bytes += size
            while self._bytes > self.max_bytes:
                oldest = next(iter(self._entries))
                self._drop(oldest)

    def clear(self) -> None:
        with self._lock:
            self._entries.clear()
            self._bytes = 0

    async def aclose(self) -> None:
        return None

    def _drop(self, key: str) -> None:
        value, _ = self._entries.pop(key)
        self._bytes -= _weight(key, value)


def _weight(key: str, value: bytes) -> int:
    return len(key) + len(value)


class RedisCacheStore:
    """Entries in Redis, sealed; reads bounded by ``timeout``, writes unawaited (see the module docstring)."""

    def __init__(self, url: str, *, prefix: str, sealer: Sealer, max_entry_bytes: int, timeout: float,
                 retry_after_s: float = 5.0, clock: Callable[[], float] = time.monotonic) -> None:
        self._client = RespClient(url, timeout=timeout)
        self._prefix = prefix
        self._sealer = sealer
        self.max_entry_bytes = max_entry_bytes
        self._timeout = timeout
        self._retry_after_s = retry_after_s
        self._clock = clock
        self._down_until: float | None = None
        self._writes: set[asyncio.Task[None]] = set()

    @property
    def available(self) -> bool:
        return not self._down()

    async def get(self, key: str) -> bytes | None:
        if self._down():
            return None
        try:
            # The client's own timeout bounds an answer; wait_for also bounds connecting to a Redis that is away.
            reply = await asyncio.wait_for(self._client.execute("GET", self._prefix + key), self._timeout)
        except _UNAVAILABLE as exc:
            self._mark_down(exc)
            return None
        self._mark_up()
        if not isinstance(reply, str):
            return None
        return self._sealer.open(reply, key=key)  # None for an entry sealed with another secret, or altered

    def put(self, key: str, value: bytes, ttl_s: float) -> None:
        if self._down() or ttl_s <= 0 or len(value) > self.max_entry_bytes:
            return
        sealed = self._sealer.seal(value, key=key)
        command = encode_command(("SET", self._prefix + key, sealed, "PX", max(1, int(ttl_s * 1000))))
        task = asyncio.get_running_loop().create_task(self._write(command))
        self._writes.add(task)  # the loop keeps only weak references to tasks
        task.add_done_callback(self._writes.discard)

    async def aclose(self) -> None:
        for task in list(self._writes):
            task.cancel()
        await self._client.aclose()

    async def _write(self, command: bytes) -> None:
        try:
            await asyncio.wait_for(self._client.call(command), max(self._timeout, 1.0))
        except _UNAVAILABLE as exc:
            self._mark_down(exc)

    def _down(self) -> bool:
        return self._down_until is not None and self._clock() < self._down_until

    def _mark_down(self, exc: BaseException) -> None:
        if self._down_until is None:
            logger.warning("Redis response cache unreachable (%s): every lookup is a miss, retried in %.0fs",
                           type(exc).__name__, self._retry_after_s)
        self._down_until = self._clock() + self._retry_after_s

    def _mark_up(self) -> None:
        if self._down_until is not None:
            self._down_until = None
            logger.info("Redis response cache reachable again")

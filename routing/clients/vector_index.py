"""Where the response cache's semantic vectors live and are searched: this process, or Redis (shared).

Vectors are partitioned (routing.core.cache.semantic_partition: scope, protocol, name, system, tools, parameters and
the conversation before the latest user turn), and a partition holds at most ``max_per_partition`` vectors, so a
search compares one request with a bounded set of the same context only. The search is FAISS's exact
inner-product index (``IndexFlatIP``) over unit vectors: cosine similarity, no approximation, built per search for
a Redis partition and kept per partition in memory.

``MemoryVectorIndex`` keeps at most ``max_partitions`` partitions (least recently used evicted), each vector until its
entry's TTL. ``RedisVectorIndex`` keeps a partition as a Redis hash (``<prefix>v:<partition>``: field the entry's
key, value the vector and its expiry, sealed as the entries are), its TTL the longest of its vectors', bounded by a
script that drops a field when the hash is full. Like the entry store it never fails or slows a request: a search
waits at most ``timeout``, a write is not waited for, and an unreachable Redis is a miss.
"""

from __future__ import annotations

import asyncio
import logging
import struct
import threading
import time
from collections import OrderedDict
from collections.abc import Callable, Sequence
from typing import Protocol

import faiss
import numpy as np

from routing.clients.cache_sealing import Sealer
from routing.clients.redis_client import RedisReplyError, RedisUnavailable, RespClient, Script

logger = logging.getLogger("gomodel.cache")

_UNAVAILABLE = (RedisUnavailable, RedisReplyError, OSError, TimeoutError)
_EXPIRY = struct.Struct("<d")


class VectorIndex(Protocol):
    async def nearest(self, partition: str, vector: Sequence[float]) -> tuple[str, float] | None:
        """The entry key nearest to ``vector`` in ``partition`` and its cosine similarity; None for none."""
        ...

    def add(self, partition: str, key: str, vector: Sequence[float], ttl_s: float) -> None:
        """Index ``key`` under ``vector`` for ``ttl_s`` seconds; never waits and never raises."""
        ...

    async def aclose(self) -> None: ...


def unit(vector: Sequence[float]) -> np.ndarray | None:
    """``vector`` as a float32 unit row; None for an empty, zero or non-finite one."""
    row = np.asarray(vector, dtype=np.float32).reshape(1, -1)
    if row.size == 0 or not np.all(np.isfinite(row)):
        return None
    norm = float(np.linalg.norm(row))
    if norm == 0.0:
        return None
    return row / norm


def _search(rows: np.ndarray, keys: list[str], query: np.ndarray) -> tuple[str, float] | None:
    """The nearest of ``rows`` (unit vectors of ``query``'s size) by inner product, with FAISS's exact index."""
    if not keys or rows.shape[1] != query.shape[1]:
        return None
    index = faiss.IndexFlatIP(rows.shape[1])
    index.add(rows)
    scores, positions = index.search(query, 1)
    position = int(positions[0][0])
    if position < 0:
        return None
    return keys[position], float(min(1.0, scores[0][0]))


class _Partition:
    __slots__ = ("keys", "rows", "expires")

    def __init__(self, dimensions: int) -> None:
        self.keys: list[str] = []
        self.rows = np.zeros((0, dimensions), dtype=np.float32)
        self.expires: list[float] = []


class MemoryVectorIndex:
    """Vectors in this process (see the module docstring)."""

    def __init__(self, *, max_partitions: int, max_per_partition: int,
                 clock: Callable[[], float] = time.monotonic) -> None:
        self.max_partitions = max_partitions
        self.max_per_partition = max_per_partition
        self._clock = clock
        self._partitions: OrderedDict[str, _Partition] = OrderedDict()
        self._lock = threading.Lock()

    def __len__(self) -> int:
        return sum(len(p.keys) for p in self._partitions.values())

    async def nearest(self, partition: str, vector: Sequence[float]) -> tuple[str, float] | None:
        query = unit(vector)
        if query is None:
            return None
        with self._lock:
            found = self._partitions.get(partition)
            if found is None:
                return None
            self._partitions.move_to_end(partition)
            self._expire(found)
            return _search(found.rows, found.keys, query)

    def add(self, partition: str, key: str, vector: Sequence[float], ttl_s: float) -> None:
        row = unit(vector)
        if row is None or ttl_s <= 0:
            return
        with self._lock:
            found = self._partitions.get(partition)
            if found is None or found.rows.shape[1] != row.shape[1]:
                found = self._partitions[partition] = _Partition(row.shape[1])
            self._partitions.move_to_end(partition)
            self._expire(found)
            keep = [i for i, known in enumerate(found.keys) if known != key]
            keep = keep[-(self.max_per_partition - 1):] if self.max_per_partition > 1 else []  # oldest go first
            found.keys = [found.keys[i] for i in keep] + [key]
            found.expires = [found.expires[i] for i in keep] + [self._clock() + ttl_s]
            found.rows = np.vstack([found.rows[keep], row])
            while len(self._partitions) > self.max_partitions:
                self._partitions.popitem(last=False)

    async def aclose(self) -> None:
        return None

    def _expire(self, partition: _Partition) -> None:
        now = self._clock()
        if all(at > now for at in partition.expires):
            return
        keep = [i for i, at in enumerate(partition.expires) if at > now]
        partition.keys = [partition.keys[i] for i in keep]
        partition.expires = [partition.expires[i] for i in keep]
        partition.rows = partition.rows[keep]


# KEYS[1] the partition hash; ARGV: field, sealed value, ttl ms, the most fields. A full hash drops a field other
# than the new one before it grows; the hash lives as long as its longest-lived vector.
_ADD = """
if redis.call('HEXISTS', KEYS[1], ARGV[1]) == 0 and redis.call('HLEN', KEYS[1]) >= tonumber(ARGV[4]) then
  local victim = redis.call('HRANDFIELD', KEYS[1])
  if victim then redis.call('HDEL', KEYS[1], victim) end
end
redis.call('HSET', KEYS[1], ARGV[1], ARGV[2])
if redis.call('PTTL', KEYS[1]) < tonumber(ARGV[3]) then redis.call('PEXPIRE', KEYS[1], ARGV[3]) end
return 1
"""


class RedisVectorIndex:
    """Vectors in Redis, sealed (see the module docstring)."""

    def __init__(self, url: str, *, prefix: str, sealer: Sealer, max_per_partition: int, timeout: float,
                 retry_after_s: float = 5.0, clock: Callable[[], float] = time.time) -> None:
        self._client = RespClient(url, timeout=timeout)
        self._prefix = prefix
        self._sealer = sealer
        self.max_per_partition = max_per_partition
        self._timeout = timeout
        self._retry_after_s = retry_after_s
        self._clock = clock  # wall clock: expiries are compared across processes and hosts
        self._down_until: float | None = None
        self._script = Script(_ADD)
        self._writes: set[asyncio.Task[None]] = set()

    @property
    def available(self) -> bool:
        return not self._down()

    async def nearest(self, partition: str, vector: Sequence[float]) -> tuple[str, float] | None:
        query = unit(vector)
        if query is None or self._down():
            return None
        name = self._prefix + partition
        try:
            reply = await asyncio.wait_for(self._client.execute("HGETALL", name), self._timeout)
        except _UNAVAILABLE as exc:
            self._mark_down(exc)
            return None
        self._mark_up()
        if not isinstance(reply, list):
            return None
        keys: list[str] = []
        rows: list[np.ndarray] = []
        now = self._clock()
        for field, sealed in zip(reply[0::2], reply[1::2], strict=True):
            opened = self._sealer.open(str(sealed), key=f"{partition}:{field}")
            if opened is None or len(opened) < _EXPIRY.size + 4:
                continue
            (expires,) = _EXPIRY.unpack_from(opened)
            row = np.frombuffer(opened[_EXPIRY.size:], dtype=np.float32)
            if expires <= now or row.shape[0] != query.shape[1]:
                continue
            keys.append(str(field))
            rows.append(row)
        if not rows:
            return None
        return _search(np.vstack(rows), keys, query)

    def add(self, partition: str, key: str, vector: Sequence[float], ttl_s: float) -> None:
        row = unit(vector)
        if row is None or ttl_s <= 0 or self._down():
            return
        value = _EXPIRY.pack(self._clock() + ttl_s) + row.astype(np.float32).tobytes()
        sealed = self._sealer.seal(value, key=f"{partition}:{key}")
        task = asyncio.get_running_loop().create_task(self._write(partition, key, sealed, ttl_s))
        self._writes.add(task)
        task.add_done_callback(self._writes.discard)

    async def aclose(self) -> None:
        for task in list(self._writes):
            task.cancel()
        await self._client.aclose()

    async def _write(self, partition: str, key: str, sealed: str, ttl_s: float) -> None:
        try:
            await asyncio.wait_for(self._client.run_script(
                self._script, [self._prefix + partition],
                [key, sealed, max(1, int(ttl_s * 1000)), self.max_per_partition]), max(self._timeout, 1.0))
        except _UNAVAILABLE as exc:
            self._mark_down(exc)

    def _down(self) -> bool:
        return self._down_until is not None and time.monotonic() < self._down_until

    def _mark_down(self, exc: BaseException) -> None:
        if self._down_until is None:
            logger.warning("Redis semantic cache index unreachable (%s): every semantic lookup is a miss, retried in "
                           "%.0fs", type(exc).__name__, self._retry_after_s)
        self._down_until = time.monotonic() + self._retry_after_s

    def _mark_up(self) -> None:
        if self._down_until is not None:
            self._down_until = None
            logger.info("Redis semantic cache index reachable again")

"""The response cache's stores: in process (bounded by bytes, LRU + TTL), in Redis (sealed, bounded waits), and the
sealing of what leaves the process.

The Redis tests need Redis on 127.0.0.1:6379 and use a key prefix of their own, removed afterwards.
"""

from __future__ import annotations

import asyncio
import time
import uuid
from collections.abc import Iterator

import pytest
import redis

from routing.clients.cache_sealing import Sealer
from routing.clients.response_cache_store import MemoryCacheStore, RedisCacheStore
from tests.gateway_process import free_port
from tests.services import drop_redis_keys

REDIS_URL = "redis://127.0.0.1:6379/0"


class Clock:
    def __init__(self) -> None:
        self.now = 100.0

    def __call__(self) -> float:
        return self.now


def run(coro: object) -> object:
    return asyncio.run(coro)  # type: ignore[arg-type]


def test_the_memory_store_evicts_the_least_recently_used_past_its_bytes() -> None:
    store = MemoryCacheStore(max_bytes=3 * 1100, max_entry_bytes=2000)
    for name in ("a", "b", "c"):
        store.put(name, b"x" * 1099, ttl_s=60)
    assert store.size_bytes == 3 * 1100
    assert store.get_now("a") is not None  # a is now the most recently used
    store.put("d", b"x" * 1099, ttl_s=60)
    assert store.get_now("b") is None
    assert [store.get_now(k) is not None for k in ("a", "c", "d")] == [True, True, True]
    assert store.size_bytes <= store.max_bytes


def test_the_memory_store_never_keeps_an_entry_above_its_entry_bound() -> None:
    store = MemoryCacheStore(max_bytes=10_000, max_entry_bytes=1024)
    store.put("big", b"x" * 1100, ttl_s=60)
    assert store.get_now("big") is None
    assert store.size_bytes == 0


def test_the_memory_store_drops_an_entry_when_its_ttl_has_passed() -> None:
    clock = Clock()
    store = MemoryCacheStore(max_bytes=10_000, max_entry_bytes=5000, clock=clock)
    store.put("k", b"answer", ttl_s=10)
    clock.now += 9.9
    assert store.get_now("k") == b"answer"
    clock.now += 0.2  # reading did not extend it: the TTL counts from the write
    assert store.get_now("k") is None
    assert store.size_bytes == 0


def test_rewriting_a_key_replaces_its_bytes() -> None:
    store = MemoryCacheStore(max_bytes=10_000, max_entry_bytes=5000)
    store.put("k", b"x" * 100, ttl_s=10)
    store.put("k", b"y" * 50, ttl_s=10)
    assert store.get_now("k") == b"y" * 50
    assert store.size_bytes == len("k") + 50
    assert len(store) == 1


def test_a_sealed_entry_opens_only_under_its_own_key_and_a_known_secret() -> None:
    sealer = Sealer(["secret-one"])
    sealed = sealer.seal(b"the answer", key="k1")
    assert b"the answer" not in sealed.encode()
    assert sealer.open(sealed, key="k1") == b"the answer"
    assert sealer.open(sealed, key="k2") is None  # moved under another key: refused
    assert Sealer(["secret-two"]).open(sealed, key="k1") is None
    assert Sealer(["secret-two", "secret-one"]).open(sealed, key="k1") == b"the answer"  # after a rotation
    assert sealer.open("not base64 !", key="k1") is None
    assert sealer.open(sealed[:-4] + "AAAA", key="k1") is None


@pytest.fixture
def prefix() -> Iterator[str]:
    name = f"gomodel:test:cache:{uuid.uuid4().hex[:10]}:"
    yield name
    drop_redis_keys(REDIS_URL, name)


@pytest.mark.services
def test_the_redis_store_keeps_sealed_entries_with_their_ttl(prefix: str) -> None:
    async def scenario() -> tuple[bytes | None, bytes | None]:
        store = RedisCacheStore(REDIS_URL, prefix=prefix, sealer=Sealer(["s"]), max_entry_bytes=1000, timeout=1.0)
        try:
            store.put("k", b"an answer", ttl_s=30)
            store.put("huge", b"x" * 2000, ttl_s=30)
            await asyncio.sleep(0)
            deadline = time.monotonic() + 5
            found = await store.get("k")
            while found is None and time.monotonic() < deadline:
                await asyncio.sleep(0.05)
                found = await store.get("k")
            return found, await store.get("huge")
        finally:
            await store.aclose()

    found, huge = run(scenario())  # type: ignore[misc]
    assert found == b"an answer"
    assert huge is None
    client = redis.Redis.from_url(REDIS_URL)
    try:
        raw = client.get(f"{prefix}k")
        ttl = client.pttl(f"{prefix}k")
    finally:
        client.close()
    assert raw is not None
    assert b"an answer" not in raw
    assert 0 < ttl <= 30_000


@pytest.mark.services
def test_an_unreachable_redis_is_a_miss_and_is_not_asked_again_for_a_while() -> None:
    async def scenario() -> list[bytes | None]:
        clock = Clock()
        store = RedisCacheStore(f"redis://127.0.0.1:{free_port()}/0", prefix="p:", sealer=Sealer(["s"]),
                                max_entry_bytes=1000, timeout=0.5, retry_after_s=5.0, clock=clock)
        try:
            first = await store.get("k")
            assert not store.available
            store.put("k", b"v", ttl_s=10)  # skipped while down: nothing is queued
            second = await store.get("k")
            clock.now += 6
            assert store.available
            return [first, second]
        finally:
            await store.aclose()

    assert run(scenario()) == [None, None]

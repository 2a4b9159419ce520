"""The semantic cache's vector indexes: in process (bounded partitions, bounded vectors per partition, TTL) and in
Redis (sealed, shared, a full partition bounded, an outage a miss). The Redis tests use a prefix of their own."""

from __future__ import annotations

import asyncio
import math
import time
import uuid
from collections.abc import Iterator

import pytest
import redis

from routing.clients.cache_sealing import Sealer
from routing.clients.vector_index import MemoryVectorIndex, RedisVectorIndex
from tests.gateway_process import free_port
from tests.services import drop_redis_keys

REDIS_URL = "redis://127.0.0.1:6379/0"


class Clock:
    def __init__(self) -> None:
        self.now = 1000.0

    def __call__(self) -> float:
        return self.now


def near(angle: float) -> list[float]:
    """A unit vector at ``angle`` radians from [1, 0, 0]."""
    return [math.cos(angle), math.sin(angle), 0.0]


def test_the_nearest_vector_of_the_partition_wins_with_its_cosine() -> None:
    index = MemoryVectorIndex(max_partitions=10, max_per_partition=10)
    index.add("p", "far", near(1.0), ttl_s=60)
    index.add("p", "close", near(0.1), ttl_s=60)
    index.add("other", "closest", near(0.0), ttl_s=60)
    found = asyncio.run(index.nearest("p", [2.0, 0.0, 0.0]))  # not a unit vector: normalised
    assert found is not None
    assert found[0] == "close"
    assert found[1] == pytest.approx(math.cos(0.1), abs=1e-5)
    assert asyncio.run(index.nearest("nowhere", near(0.0))) is None
    assert asyncio.run(index.nearest("p", [0.0, 0.0])) is None  # another size: no match
    assert asyncio.run(index.nearest("p", [0.0, 0.0, 0.0])) is None


def test_a_partition_keeps_its_newest_vectors_only() -> None:
    index = MemoryVectorIndex(max_partitions=10, max_per_partition=2)
    index.add("p", "first", near(0.0), ttl_s=60)
    index.add("p", "second", near(1.0), ttl_s=60)
    index.add("p", "third", near(2.0), ttl_s=60)
    assert len(index) == 2
    found = asyncio.run(index.nearest("p", near(0.0)))
    assert found is not None
    assert found[0] == "second"  # "first" is gone
    index.add("p", "second", near(0.0), ttl_s=60)  # the same key again: replaced, not repeated
    assert len(index) == 2


def test_the_least_recently_used_partition_goes_first() -> None:
    index = MemoryVectorIndex(max_partitions=2, max_per_partition=4)
    index.add("a", "ka", near(0.0), ttl_s=60)
    index.add("b", "kb", near(0.0), ttl_s=60)
    assert asyncio.run(index.nearest("a", near(0.0))) is not None  # a is used: b is now the oldest
    index.add("c", "kc", near(0.0), ttl_s=60)
    assert asyncio.run(index.nearest("b", near(0.0))) is None
    assert asyncio.run(index.nearest("a", near(0.0))) is not None


def test_a_vector_expires_with_its_entry() -> None:
    clock = Clock()
    index = MemoryVectorIndex(max_partitions=2, max_per_partition=4, clock=clock)
    index.add("p", "k", near(0.0), ttl_s=10)
    clock.now += 10.5
    assert asyncio.run(index.nearest("p", near(0.0))) is None
    assert len(index) == 0


@pytest.fixture
def prefix() -> Iterator[str]:
    name = f"gomodel:test:vectors:{uuid.uuid4().hex[:10]}:"
    yield name
    drop_redis_keys(REDIS_URL, name)


async def _eventually(index: RedisVectorIndex, partition: str, vector: list[float]) -> tuple[str, float] | None:
    deadline = time.monotonic() + 5
    while True:
        found = await index.nearest(partition, vector)
        if found is not None or time.monotonic() > deadline:
            return found
        await asyncio.sleep(0.05)


@pytest.mark.services
def test_the_redis_index_is_shared_sealed_and_bounded(prefix: str) -> None:
    async def scenario() -> tuple[tuple[str, float] | None, tuple[str, float] | None, int]:
        writer = RedisVectorIndex(REDIS_URL, prefix=prefix, sealer=Sealer(["s"]), max_per_partition=3, timeout=1.0)
        reader = RedisVectorIndex(REDIS_URL, prefix=prefix, sealer=Sealer(["s"]), max_per_partition=3, timeout=1.0)
        stranger = RedisVectorIndex(REDIS_URL, prefix=prefix, sealer=Sealer(["t"]), max_per_partition=3, timeout=1.0)
        try:
            for n in range(5):
                writer.add("p", f"k{n}", near(n / 10), ttl_s=30)
                await asyncio.sleep(0.05)
            found = await _eventually(reader, "p", near(0.41))
            return found, await stranger.nearest("p", near(0.41)), 0
        finally:
            for index in (writer, reader, stranger):
                await index.aclose()

    found, unsealed, _ = asyncio.run(scenario())
    assert found is not None
    assert found[0] == "k4"
    assert unsealed is None  # another secret opens nothing
    client = redis.Redis.from_url(REDIS_URL)
    try:
        assert client.hlen(f"{prefix}p") == 3
        assert 0 < client.pttl(f"{prefix}p") <= 30_000
    finally:
        client.close()


@pytest.mark.services
def test_an_unreachable_redis_index_is_a_miss() -> None:
    async def scenario() -> tuple[tuple[str, float] | None, bool]:
        index = RedisVectorIndex(f"redis://127.0.0.1:{free_port()}/0", prefix="p:", sealer=Sealer(["s"]),
                                 max_per_partition=3, timeout=0.5)
        try:
            found = await index.nearest("p", near(0.0))
            index.add("p", "k", near(0.0), ttl_s=10)  # skipped while down
            return found, index.available
        finally:
            await index.aclose()

    assert asyncio.run(scenario()) == (None, False)

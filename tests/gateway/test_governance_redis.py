"""Per-key limits in the engine with ``REDIS_URL`` set: a settlement is not waited for, yet it has reached Redis
by the time the engine hands the answer back (so the client's next request, to any process, sees the slot
returned and the tokens counted), and closing the store at a stop waits for the last settlements.

Needs Redis on 127.0.0.1:6379 (tests/conftest.py starts it when missing); counts go under a prefix of their own
in db 2 and are removed afterwards.
"""

from __future__ import annotations

import asyncio
import uuid
from collections.abc import Iterator
from typing import Any

import pytest

from routing.clients.limit_store import RedisLimitStore
from routing.core.limits import Limits
from routing.core.table import KeySpec, RoutingTable
from routing.gateway.state import state
from routing.models import hash_secret
from routing.simulator import SimulatorServer
from tests.gateway import support
from tests.gateway.support import answer, request, run
from tests.services import drop_redis_keys

pytestmark = pytest.mark.services

simulator, sim, table, fresh_state = support.simulator, support.sim, support.table, support.fresh_state

REDIS_URL = "redis://127.0.0.1:6379/2"


@pytest.fixture
def prefix(settings: Any) -> Iterator[str]:
    """Limits counted in Redis under a prefix of this test's own."""
    name = f"gomodel:test:engine-limits:{uuid.uuid4().hex[:12]}:"
    settings.REDIS_URL = REDIS_URL
    settings.GOMODEL_LIMIT_KEY_PREFIX = name
    state.renew()
    yield name
    drop_redis_keys(REDIS_URL, name)


async def stop() -> None:
    """What the lifespan shutdown does with Redis (gomodel_site/asgi.py): the shared state, pins and limits."""
    await state.stop_sharing()
    await state.pins.aclose()
    await state.close_limits()


def key(name: str, **limits: Any) -> KeySpec:
    return KeySpec(id=abs(hash(name)) % 10_000, name=name, secret_hash=hash_secret(name), limits=Limits(**limits))


def test_the_settlement_of_a_json_answer_is_in_redis_when_the_answer_is_returned(
        sim: SimulatorServer, table: RoutingTable, prefix: str) -> None:
    """One slot per key; after each answer another connection (another gateway process) reads the key's counts
    at once: the slot is back and the tokens are counted, every time, including when requests of several keys
    end in the same turn of the event loop (their settlements share one write)."""
    keys = [key(f"one-slot-{i}", max_concurrency=1, tpm=1_000_000) for i in range(3)]

    async def scenario() -> list[tuple[int, int, bool]]:
        observer = RedisLimitStore(REDIS_URL, prefix=prefix)
        seen = []
        try:
            for _ in range(4):
                replies = await asyncio.gather(*(answer(request(table, "primary", key=k)) for k in keys))
                for limited, reply in zip(keys, replies, strict=True):
                    counts = await observer.counts(limited.limit_scopes[0])
                    seen.append((reply.status, counts.slots, counts.tokens > 0))
        finally:
            await observer.aclose()
            await stop()
        return seen

    assert run(scenario()) == [(200, 0, True)] * 12


def test_closing_the_limit_store_at_a_stop_waits_for_the_last_settlements(
        sim: SimulatorServer, table: RoutingTable, prefix: str, transactional_db: None) -> None:
    # transactional_db: the budget's spend is seeded from the database (the audit trail) from a database thread
    limited = key("last-one", tpm=1_000_000, budget_usd=5.0, budget_period="total")

    async def scenario() -> tuple[int, int]:
        reply = await answer(request(table, "primary", key=limited))
        await stop()
        fresh = RedisLimitStore(REDIS_URL, prefix=prefix)
        try:
            counts = await fresh.counts(limited.limit_scopes[0])
        finally:
            await fresh.aclose()
        assert reply.status == 200
        return counts.tokens, counts.spend_nanos

    tokens, spend = run(scenario())
    assert tokens > 0
    assert spend > 0

"""Provider rpm/tpm in the engine with Redis: each attempt is admitted in Redis, so another process's attempts
count, and each answer's usage replaces its reservation there.

The engine serves with the module-wide ``state``, whose provider-quota store counts under a key prefix of this
test's own; a second store with a registry of its own stands for another gateway process. The simulator records
every request it receives, so "the provider never saw it" is read from its records.
"""

from __future__ import annotations

import asyncio
import dataclasses
import json
import uuid
from collections.abc import Iterator
from typing import Any

import pytest
import redis

from routing.clients.provider_quota_store import ProviderQuotaStore
from routing.core.provider_limits import ProviderLimits, QuotaRegistry, QuotaTicket
from routing.core.table import RoutingTable, TargetRef, VirtualModelSpec
from routing.gateway.state import state
from routing.simulator import SimulatorServer
from tests.gateway import support
from tests.gateway.support import answer, counted, request, run
from tests.gateway_process import free_port
from tests.services import drop_redis_keys

pytestmark = pytest.mark.services

simulator, sim, fresh_state = support.simulator, support.sim, support.fresh_state

REDIS_URL = "redis://127.0.0.1:6379/2"


@pytest.fixture
def prefix(fresh_state: Any) -> Iterator[str]:
    """This process's provider quotas counted in Redis under a prefix of this test's own."""
    name = f"gomodel:test:engine-provider-quota:{uuid.uuid4().hex[:12]}:"
    state._provider_quotas = ProviderQuotaStore(state.quotas, REDIS_URL, prefix=name)
    yield name
    drop_redis_keys(REDIS_URL, name)


def limited_table(sim_url: str, **limits: int) -> RoutingTable:
    """The tests' table with ``limits`` (rpm, tpm) on ``primary`` and a failover pool primary -> secondary."""
    base = support.routing_table(sim_url)
    models = [dataclasses.replace(m, **limits) if m.name == "primary" else m for m in base.models.values()]
    return RoutingTable.build(
        version=1, providers=list(base.providers.values()), models=models,
        virtual_models=[VirtualModelSpec(source="pool", strategy="failover",
                                         targets=(TargetRef("primary"), TargetRef("secondary")))],
    )


async def other_process_sends(prefix: str, count: int, **limits: int) -> None:
    """Another gateway process admits ``count`` attempts to ``primary`` (its minute, in the same Redis)."""
    registry = QuotaRegistry()
    registry.configure({"primary": ProviderLimits(**limits)})
    other = ProviderQuotaStore(registry, REDIS_URL, prefix=prefix)
    quota = registry.get("primary")
    assert quota is not None
    try:
        for _ in range(count):
            assert isinstance(await other.admit(quota, 0, 0.0), QuotaTicket)
    finally:
        await other.aclose()


def tokens_in_redis(prefix: str) -> int:
    with redis.Redis.from_url(REDIS_URL) as plain:
        return int(plain.hget(f"{prefix}primary:tok", "s") or 0)


def test_attempts_of_another_process_count_so_this_one_routes_elsewhere(sim: SimulatorServer, prefix: str) -> None:
    table = limited_table(sim.base_url, rpm=3)
    skips_before = counted("gomodel_target_limit_skips_total", target="primary", reason="at_provider_rpm")

    async def scenario() -> list[str]:
        await other_process_sends(prefix, 3, rpm=3)
        try:
            return [(await answer(request(table, "pool", f"q{i}"))).headers["X-GoModel-Target"] for i in range(2)]
        finally:
            await state.close_limits()

    assert run(scenario()) == ["secondary", "secondary"]
    assert sim.received("primary") == []
    assert counted("gomodel_target_limit_skips_total", target="primary",
                   reason="at_provider_rpm") == skips_before + 2


def test_a_concrete_model_whose_minute_is_full_in_redis_is_a_503_that_says_when_to_come_back(
        sim: SimulatorServer, prefix: str) -> None:
    table = limited_table(sim.base_url, rpm=1)

    async def scenario() -> tuple[int, dict[str, Any], str]:
        await other_process_sends(prefix, 1, rpm=1)
        try:
            reply = await answer(request(table, "primary"))
            return reply.status, reply.error, reply.headers.get("Retry-After", "")
        finally:
            await state.close_limits()

    status, error, retry_after = run(scenario())
    assert (status, error["code"]) == (503, "provider_limit_reached")
    assert 59 <= int(retry_after) <= 61
    assert sim.received("primary") == []


@pytest.mark.parametrize("stream", [False, True])
def test_an_answer_replaces_its_reservation_with_its_real_usage_in_redis(sim: SimulatorServer, prefix: str,
                                                                         stream: bool) -> None:
    table = limited_table(sim.base_url, tpm=100_000)

    async def scenario() -> int:
        try:
            extra: dict[str, Any] = {"stream_options": {"include_usage": True}} if stream else {}
            reply = await answer(request(table, "primary", "count my tokens", stream=stream, max_tokens=5000,
                                         **extra))
            assert reply.status == 200
            if stream:
                usage = next(event for event in reversed(reply.events) if '"usage"' in event and "null" not in event)
                return int(json.loads(usage)["usage"]["total_tokens"])
            return int(reply.json()["usage"]["total_tokens"])
        finally:
            await state.close_limits()  # the settlement is applied before the connection closes

    used = run(scenario())
    assert 0 < used < 5000
    assert tokens_in_redis(prefix) == used  # the 5000-token reservation is gone, the usage stays


def test_a_reservation_keeps_a_burst_within_the_tpm_before_any_answer_arrives(sim: SimulatorServer,
                                                                              prefix: str) -> None:
    table = limited_table(sim.base_url, tpm=1000)

    async def scenario() -> list[str]:
        try:
            replies = await asyncio.gather(*(answer(request(table, "pool", f"q{i}", max_tokens=400))
                                             for i in range(4)))
            return sorted(r.headers["X-GoModel-Target"] for r in replies)
        finally:
            await state.close_limits()

    # Two reservations of ~400 fit 1000; the other two go to the secondary although nothing was used yet.
    assert run(scenario()) == ["primary", "primary", "secondary", "secondary"]
    assert len(sim.received("primary")) == 2


def test_a_redis_outage_never_fails_a_request_and_counts_in_this_process(sim: SimulatorServer,
                                                                          fresh_state: Any) -> None:
    table = limited_table(sim.base_url, rpm=2)
    state._provider_quotas = ProviderQuotaStore(state.quotas, f"redis://127.0.0.1:{free_port()}/0",
                                                socket_timeout=0.2)

    async def scenario() -> list[str]:
        try:
            return [(await answer(request(table, "pool", f"q{i}"))).headers["X-GoModel-Target"] for i in range(3)]
        finally:
            await state.close_limits()

    assert run(scenario()) == ["primary", "primary", "secondary"]
    assert state.quotas.shared is False

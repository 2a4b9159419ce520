"""Cooldowns, lockouts and open breakers shared by processes through a real Redis.

Two ``GatewayState`` objects stand for two gateway processes: each has its own health registry and
background sync with its own connection, and they share only a Redis key prefix. The engine
serves with the module-wide ``state`` (one of the two), the simulator records what reached each provider.
Waits poll for a state with a bounded wait; none asserts how fast something happened.
"""

from __future__ import annotations

import asyncio
import dataclasses
import logging
import subprocess
import time
import uuid
from collections.abc import Callable, Iterator

import pytest
import redis

from routing.core.outcome import AttemptOutcome, ErrorClass
from routing.core.table import RoutingTable, TargetRef, VirtualModelSpec
from routing.gateway.background.shared_sync import SharedSync
from routing.gateway.state import GatewayState, state
from routing.simulator import SimulatorServer
from tests.gateway import support
from tests.gateway.support import answer, counted, eventually, request, run
from tests.gateway_process import free_port

pytestmark = pytest.mark.services

simulator, sim, fresh_state = support.simulator, support.sim, support.fresh_state

REDIS_URL = "redis://127.0.0.1:6379/3"


@pytest.fixture
def prefix() -> Iterator[str]:
    """A key prefix of this test's own; its keys are removed afterwards."""
    value = f"test:{uuid.uuid4().hex[:12]}:"
    yield value
    with redis.Redis.from_url(REDIS_URL) as plain:
        keys = list(plain.scan_iter(f"{value}*"))
        if keys:
            plain.delete(*keys)


def pool_table(sim_url: str, **primary_limits: int) -> RoutingTable:
    base = support.routing_table(sim_url)
    models = [dataclasses.replace(m, **primary_limits) if m.name == "primary" else m for m in base.models.values()]
    return RoutingTable.build(
        version=1, providers=list(base.providers.values()), models=models,
        virtual_models=[VirtualModelSpec(source="pool", strategy="failover",
                                         targets=(TargetRef("primary"), TargetRef("secondary")))],
    )


def replica(table: RoutingTable, url: str, prefix: str, gateway: GatewayState | None = None) -> SharedSync:
    """``gateway`` (a new one by default) following ``table`` and sharing through ``url`` under ``prefix``."""
    gateway = gateway or GatewayState()
    gateway.follow(table)
    shared = gateway.start_sharing(url, prefix=prefix)
    assert shared is not None
    return shared


def lockout() -> AttemptOutcome:
    return AttemptOutcome.failure(ErrorClass.INCOMPATIBLE, "auth", status=401, latency_s=0.05)


def rate_limited(retry_after_s: float) -> AttemptOutcome:
    return AttemptOutcome.failure(ErrorClass.TRANSIENT, "rate_limited", status=429, latency_s=0.05,
                                  retry_after_s=retry_after_s)


def cooling(shared: SharedSync, name: str) -> bool:
    return shared.health.get(name).status(time.monotonic()) == "cooling"


def test_a_401_on_one_process_keeps_the_other_off_the_target(sim: SimulatorServer, prefix: str) -> None:
    table = pool_table(sim.base_url)
    sim.set_fault("primary", {"kind": "status", "status": 401})
    adopted_before = counted("gomodel_shared_health_adopted_total", event="open")

    async def scenario() -> list[str]:
        here = replica(table, REDIS_URL, prefix, state)  # the engine's process
        there = replica(table, REDIS_URL, prefix)
        try:
            # The engine's process sends a request to primary and gets the provider's 401; the probe with the
            # gateway's own credentials it sends at once gets the same: a lockout here.
            reply = await answer(request(table, "primary"))
            assert reply.status in (401, 502)
            await asyncio.gather(*state.confirming.values())
            assert cooling(here, "primary")
            await eventually(lambda: cooling(there, "primary"), what="the lockout reaching the other process")
            return [there.health.get("primary").shared_origin or "", here.origin]
        finally:
            await there.stop()
            await state.stop_sharing()

    origin, engine_origin = run(scenario())
    assert origin == engine_origin  # the admin can say which process the verdict came from
    assert counted("gomodel_shared_health_adopted_total", event="open") == adopted_before + 1
    assert len(sim.received("primary")) == 2  # the request, and the confirming one-token completion


def test_a_process_that_adopted_a_lockout_sends_no_request_to_the_target(sim: SimulatorServer, prefix: str) -> None:
    table = pool_table(sim.base_url)

    async def scenario() -> list[str]:
        there = replica(table, REDIS_URL, prefix)
        here = replica(table, REDIS_URL, prefix, state)  # the engine serves with this one
        try:
            there.health.get("primary").record(lockout(), time.monotonic())  # the other process's 401
            await eventually(lambda: cooling(here, "primary"), what="the lockout reaching the engine's process")
            return [(await answer(request(table, "pool", f"q{i}"))).headers["X-GoModel-Target"] for i in range(3)]
        finally:
            await there.stop()
            await state.stop_sharing()

    assert run(scenario()) == ["secondary"] * 3
    assert sim.received("primary") == []  # this process never asked the locked-out provider


def test_a_429_retry_after_propagates_and_adoption_never_shortens_a_cooldown(sim: SimulatorServer,
                                                                              prefix: str) -> None:
    table = pool_table(sim.base_url)

    async def scenario() -> tuple[float, float, float, float]:
        a = replica(table, REDIS_URL, prefix)
        b = replica(table, REDIS_URL, prefix)
        try:
            now = time.monotonic()
            a.health.get("primary").record(rate_limited(120.0), now)
            await eventually(lambda: cooling(b, "primary"), what="the 429 cooldown reaching b")
            a_until, b_until = a.health.get("primary").cooldown_until, b.health.get("primary").cooldown_until
            # b already holds a lockout on secondary (300 s); a's shorter 429 there must not shorten it.
            b.health.get("secondary").record(lockout(), time.monotonic())
            long_until = b.health.get("secondary").cooldown_until
            published = counted("gomodel_shared_health_published_total", event="open")
            a.health.get("secondary").record(rate_limited(20.0), time.monotonic())
            await eventually(lambda: counted("gomodel_shared_health_published_total", event="open") > published,
                             what="a's 429 on secondary being written")
            await a.sync_once()
            await b.sync_once()  # b has read it
            assert a_until is not None
            assert b_until is not None
            assert long_until is not None
            return a_until, b_until, long_until, b.health.get("secondary").cooldown_until or 0.0
        finally:
            await a.stop()
            await b.stop()

    a_until, b_until, long_until, after = run(scenario())
    # The Retry-After's end, carried as a remaining duration on Redis's clock: the same moment within the
    # poll and the round trips, never earlier.
    assert b_until == pytest.approx(a_until, abs=1.0)
    assert after == long_until  # the later end won


@dataclasses.dataclass
class PrivateRedis:
    url: str
    start: Callable[[], None]
    stop: Callable[[], None]


@pytest.fixture
def private_redis() -> Iterator[PrivateRedis]:
    """A Redis server of this test's own that the test can stop and start again (a real outage)."""
    port = free_port()
    command = ["redis-server", "--port", str(port), "--bind", "127.0.0.1", "--save", "", "--appendonly", "no"]
    procs: list[subprocess.Popen[bytes]] = []

    def start() -> None:
        procs.append(subprocess.Popen(command, stdout=subprocess.DEVNULL, stderr=subprocess.DEVNULL))
        give_up = time.monotonic() + 10
        while True:
            try:
                with redis.Redis(port=port, socket_timeout=0.5) as plain:
                    plain.ping()
                return
            except redis.ConnectionError:
                if time.monotonic() > give_up:
                    raise
                time.sleep(0.05)

    def stop() -> None:
        proc = procs[-1]
        proc.terminate()
        proc.wait(timeout=10)

    start()
    yield PrivateRedis(f"redis://127.0.0.1:{port}/0", start, stop)
    for proc in procs:
        if proc.poll() is None:
            proc.terminate()
            proc.wait(timeout=10)


def test_a_redis_outage_fails_no_request_is_logged_once_and_sharing_resumes(
        sim: SimulatorServer, private_redis: PrivateRedis, caplog: pytest.LogCaptureFixture) -> None:
    url, start, stop = private_redis.url, private_redis.start, private_redis.stop
    table = pool_table(sim.base_url)
    outages_before = counted("gomodel_shared_state_outages_total")

    async def scenario() -> list[str]:
        here = replica(table, url, "gomodel:", state)
        there = replica(table, url, "gomodel:")
        try:
            await eventually(lambda: here.redis_up is True and there.redis_up is True, what="both connected")
            stop()
            await eventually(lambda: here.redis_up is False and there.redis_up is False, what="the outage noticed")
            for _ in range(3):  # several failed rounds; one log line per process
                assert not await here.sync_once()
            # Requests are served as before, and local state works: a lockout here keeps this process off primary.
            targets = [(await answer(request(table, "pool", f"q{i}"))).headers["X-GoModel-Target"] for i in range(2)]
            here.health.get("primary").record(lockout(), time.monotonic())
            targets.append((await answer(request(table, "pool", "after the lockout"))).headers["X-GoModel-Target"])
            assert not cooling(there, "primary")  # not shared while Redis is away
            await asyncio.to_thread(start)
            # The lockout waited in the outbox and is written once Redis answers; the other process adopts it.
            await eventually(lambda: cooling(there, "primary"), timeout=10, what="the lockout shared after recovery")
            return targets
        finally:
            await there.stop()
            await state.stop_sharing()

    with caplog.at_level(logging.WARNING, logger="gomodel.shared"):
        targets = run(scenario())
    assert targets == ["primary", "primary", "secondary"]
    lost = [r for r in caplog.records if "Redis unreachable" in r.getMessage()]
    back = [r for r in caplog.records if "reachable again" in r.getMessage()]
    assert len(lost) == 2  # once per process, not once per round
    assert len(back) == 2
    assert counted("gomodel_shared_state_outages_total") == outages_before + 2


def test_without_redis_health_stays_in_the_process(sim: SimulatorServer, settings: object) -> None:
    table = pool_table(sim.base_url)

    async def scenario() -> tuple[object, bool]:
        state.follow(table)  # REDIS_URL is unset (the fixture): nothing is shared
        state.health.get("primary").record(lockout(), time.monotonic())
        other = GatewayState()
        other.follow(table)
        return state.shared, cooling_in(other, "primary")

    shared, elsewhere = run(scenario())
    assert shared is None
    assert elsewhere is False


def cooling_in(gateway: GatewayState, name: str) -> bool:
    return gateway.health.get(name).status(time.monotonic()) == "cooling"


def test_a_probe_success_elsewhere_closes_a_breaker_whose_cooldown_is_over(sim: SimulatorServer,
                                                                           prefix: str) -> None:
    table = pool_table(sim.base_url)

    async def scenario() -> str:
        a = replica(table, REDIS_URL, prefix)
        b = replica(table, REDIS_URL, prefix)
        try:
            now = time.monotonic()
            # Both saw the target fail long enough ago that their cooldowns are over: both are probing.
            for side in (a, b):
                side.health.get("primary").record(rate_limited(1.0), now - 40.0)
            health_a = a.health.get("primary")
            assert health_a.begin(now) == "probe"
            health_a.record(AttemptOutcome.success(0.1), time.monotonic())
            health_a.end(time.monotonic(), probe=True)
            await eventually(lambda: b.health.get("primary").status(time.monotonic()) == "healthy",
                             what="the close reaching b")
            return b.health.get("primary").status(time.monotonic())
        finally:
            await a.stop()
            await b.stop()

    assert run(scenario()) == "healthy"

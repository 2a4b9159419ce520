"""Through a real Redis: a 404 one gateway key saw stays in its process, a confirmed one reaches every replica."""

from __future__ import annotations

import dataclasses
import time
import uuid
from collections.abc import Iterator

import pytest
import redis

from routing.core.table import KeySpec, RoutingTable
from routing.gateway.background.shared_sync import SharedSync
from routing.gateway.state import GatewayState, state
from routing.models import hash_secret
from routing.simulator import SimulatorServer
from tests.gateway import support
from tests.gateway.support import answer, eventually, request, run

pytestmark = pytest.mark.services

simulator, sim, fresh_state = support.simulator, support.sim, support.fresh_state

REDIS_URL = "redis://127.0.0.1:6379/3"
KEY_A = KeySpec(id=31, name="tenant-a", secret_hash=hash_secret("sk-share-a"))
KEY_B = KeySpec(id=32, name="tenant-b", secret_hash=hash_secret("sk-share-b"))


@pytest.fixture
def prefix() -> Iterator[str]:
    value = f"test:{uuid.uuid4().hex[:12]}:"
    yield value
    with redis.Redis.from_url(REDIS_URL) as plain:
        keys = list(plain.scan_iter(f"{value}*"))
        if keys:
            plain.delete(*keys)


def unprobed_table(sim_url: str) -> RoutingTable:
    base = support.routing_table(sim_url)
    providers = [dataclasses.replace(p, probe="off") if p.name == "sim" else p for p in base.providers.values()]
    return RoutingTable.build(version=1, providers=providers, models=list(base.models.values()),
                              virtual_models=list(base.virtual_models.values()), keys=[KEY_A, KEY_B])


def replica(table: RoutingTable, prefix: str, gateway: GatewayState | None = None) -> SharedSync:
    gateway = gateway or GatewayState()
    gateway.follow(table)
    shared = gateway.start_sharing(REDIS_URL, prefix=prefix)
    assert shared is not None
    return shared


def verdicts(prefix: str, target: str) -> list[tuple[str, str]]:
    """The (event, reason) entries of the shared health stream about ``target``."""
    with redis.Redis.from_url(REDIS_URL, decode_responses=True) as plain:
        return [(f["e"], f["r"]) for _id, f in plain.xrange(f"{prefix}health") if f["t"] == target]


def test_only_a_confirmed_lockout_reaches_the_other_replicas(sim: SimulatorServer, prefix: str) -> None:
    table = unprobed_table(sim.base_url)
    sim.set_fault("primary", {"kind": "status", "status": 404})

    async def scenario() -> tuple[list[tuple[str, str]], list[tuple[str, str]]]:
        here = replica(table, prefix, state)
        there = replica(table, prefix)
        try:
            await answer(request(table, "pair", key=KEY_A))
            await here.sync_once()  # whatever this process had to share is written now
            suspected = verdicts(prefix, "primary")
            assert there.health.get("primary").status(time.monotonic()) == "healthy"
            await answer(request(table, "pair", key=KEY_B))  # a second key: confirmed
            await eventually(lambda: there.health.get("primary").status(time.monotonic()) == "cooling",
                             what="the confirmed lockout reaching the other replica")
            return suspected, verdicts(prefix, "primary")
        finally:
            await there.stop()
            await state.stop_sharing()

    suspected, confirmed = run(scenario())
    assert suspected == []
    assert confirmed == [("open", "not_found")]

"""A 401/403/404 one gateway key saw, in process against the simulator: that key alone avoids the target until a
probe with the gateway's own credentials or a second key confirms it; a models listing never locks a target out.
"""

from __future__ import annotations

import asyncio
import dataclasses
import time
from typing import Any

import pytest

from routing.clients import upstream
from routing.core.outcome import AttemptOutcome, ErrorClass
from routing.core.table import KeySpec, RoutingTable
from routing.gateway import audit_handoff
from routing.gateway.background.prober import Prober
from routing.gateway.state import GatewayState, state
from routing.models import hash_secret
from routing.simulator import SimulatorServer
from tests.gateway import support
from tests.gateway.support import answer, request, run

simulator, sim, table, fresh_state = support.simulator, support.sim, support.table, support.fresh_state

KEY_A = KeySpec(id=21, name="tenant-a", secret_hash=hash_secret("sk-tenant-a"))
KEY_B = KeySpec(id=22, name="tenant-b", secret_hash=hash_secret("sk-tenant-b"))


@pytest.fixture
def published(monkeypatch: pytest.MonkeyPatch) -> list[dict[str, Any]]:
    """The probes' audit events (the prober hands them to the publisher itself)."""
    events: list[dict[str, Any]] = []
    monkeypatch.setattr(audit_handoff, "publish", events.append)
    return events


def with_probe(table: RoutingTable, probe: str) -> RoutingTable:
    providers = [dataclasses.replace(p, probe=probe) if p.name == "sim" else p for p in table.providers.values()]
    return RoutingTable.build(version=table.version + 1, providers=providers, models=list(table.models.values()),
                              virtual_models=list(table.virtual_models.values()), keys=[KEY_A, KEY_B])


async def confirmations_done() -> None:
    await asyncio.gather(*state.confirming.values())


def cooling(gateway: GatewayState, name: str) -> bool:
    return gateway.health.get(name).status(time.monotonic()) == "cooling"


def test_one_keys_404_keeps_only_that_key_off_and_a_second_keys_confirms_it(
        sim: SimulatorServer, table: RoutingTable, fresh_state: GatewayState,
        audit_events: list[dict[str, Any]]) -> None:
    unprobed = with_probe(table, "off")  # no confirming probe: only a second key can confirm
    sim.set_fault("primary", {"kind": "status", "status": 404})

    async def scenario() -> list[tuple[str, str]]:
        served = []
        for key in (KEY_A, KEY_A, KEY_B, KEY_A, KEY_B):
            reply = await answer(request(unprobed, "pair", key=key))
            served.append((reply.headers["X-GoModel-Target"], reply.headers["X-GoModel-Attempts"]))
            if key is KEY_A and len(served) == 2:
                assert not cooling(fresh_state, "primary")  # one key's 404 locks nobody else out
        return served

    assert run(scenario()) == [("secondary", "2"),  # A meets the 404 and falls back
                               ("secondary", "1"),  # A keeps off primary
                               ("secondary", "2"),  # B still tries primary: and meets the same 404
                               ("secondary", "1"), ("secondary", "1")]  # confirmed: everyone keeps off
    assert cooling(fresh_state, "primary")
    assert len(sim.received("primary")) == 2
    assert [a["caused_by"] for e in audit_events for a in e["attempts"] if a["target"] == "primary"] == [
        "target", "target"]


def test_a_probe_with_the_gateways_credentials_confirms_a_404_for_every_key(
        sim: SimulatorServer, table: RoutingTable, fresh_state: GatewayState,
        published: list[dict[str, Any]]) -> None:
    keyed = with_probe(table, "")  # the simulator's listing leaves primary out: a completion decides
    sim.set_fault("primary", {"kind": "status", "status": 404})

    async def scenario() -> tuple[int, str]:
        assert (await answer(request(keyed, "primary", key=KEY_A))).status == 502
        await confirmations_done()
        assert cooling(fresh_state, "primary")
        reply = await answer(request(keyed, "pair", key=KEY_B))
        return reply.status, reply.headers["X-GoModel-Attempts"]

    assert run(scenario()) == (200, "1")  # B went straight to secondary
    confirm = [e for e in published if e["endpoint"] == "probe"]
    assert [e["attempts"][0]["action"] for e in confirm] == ["probe:confirmed"]
    assert [r["path"] for r in sim.received("primary")] == ["/v1/chat/completions"] * 2  # A's, then the probe's
    assert sim.received("primary")[-1]["body"]["max_tokens"] == 1


def test_a_probe_that_passes_dismisses_the_404_the_request_earned(
        sim: SimulatorServer, table: RoutingTable, fresh_state: GatewayState,
        published: list[dict[str, Any]]) -> None:
    keyed = with_probe(table, "")
    sim.set_fault("primary", {"kind": "status", "status": 404, "times": 1})  # that request's own 404

    async def scenario() -> list[int]:
        statuses = [(await answer(request(keyed, "primary", key=KEY_A))).status]
        await confirmations_done()
        statuses.append((await answer(request(keyed, "primary", "again", key=KEY_A))).status)
        return statuses

    assert run(scenario()) == [502, 200]  # the key that saw it is not kept off a target that works
    assert not cooling(fresh_state, "primary")
    assert [e["attempts"][0]["action"] for e in published if e["endpoint"] == "probe"] == ["probe:dismissed"]


def test_a_flood_of_404s_sends_one_confirming_probe(
        sim: SimulatorServer, table: RoutingTable, fresh_state: GatewayState,
        published: list[dict[str, Any]]) -> None:
    keyed = with_probe(table, "")
    sim.set_fault("primary", {"kind": "status", "status": 404, "times": 1})
    keys = [KeySpec(id=100 + n, name=f"k{n}", secret_hash=hash_secret(f"sk-{n}")) for n in range(6)]

    async def scenario() -> None:
        await answer(request(keyed, "primary", key=keys[0]))
        await confirmations_done()  # it passed: the next keys' 404s (if any) are the requests' own
        sim.set_fault("primary", {"kind": "status", "status": 404})
        for key in keys[1:]:
            await answer(request(keyed, "primary", key=key))
        await confirmations_done()

    run(scenario())
    calls = sim.received("primary")
    assert len(calls) == 1 + 1 + 5  # the first request, its probe, the five others; no further probe
    assert not cooling(fresh_state, "primary")


def prober_round(routing_table: RoutingTable) -> list[Any]:
    async def go() -> list[Any]:
        try:
            return list(await Prober(state, table=lambda: routing_table).run_round())
        finally:
            await upstream.pool.aclose()

    return asyncio.run(go())


@pytest.fixture
def probing(sim: SimulatorServer) -> RoutingTable:
    return support.routing_table(sim.base_url)


def test_a_listing_without_the_model_falls_back_to_a_completion_that_ends_a_5xx_cooldown(
        sim: SimulatorServer, probing: RoutingTable, published: list[dict[str, Any]]) -> None:
    health = state.health.get("primary")
    for _ in range(3):
        health.record(AttemptOutcome.failure(ErrorClass.TRANSIENT, "server_error", status=500), time.monotonic())

    records = [r for r in prober_round(probing) if r.task.target == "primary"]

    assert [(r.call.mode, r.effect) for r in records] == [("completion", "closed")]
    assert health.status(time.monotonic()) == "healthy"


def test_a_listing_without_the_model_never_turns_a_5xx_cooldown_into_a_lockout(
        sim: SimulatorServer, probing: RoutingTable, published: list[dict[str, Any]]) -> None:
    health = state.health.get("primary")
    for _ in range(3):
        health.record(AttemptOutcome.failure(ErrorClass.TRANSIENT, "server_error", status=500), time.monotonic())
    until = health.cooldown_until
    sim.set_fault("primary", {"kind": "status", "status": 500})  # still down: the completion fails too

    for _ in range(3):
        records = [r for r in prober_round(probing) if r.task.target == "primary"]
        assert [(r.call.mode, r.call.outcome.reason, r.effect) for r in records] == [
            ("completion", "server_error", "unchanged")]
    assert (health.cooldown_until, health.open_kind) == (until, "transient")

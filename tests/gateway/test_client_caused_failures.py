"""Failures the request itself caused, in process against the simulator: they cool no target for anyone.

A client that sets a deadline its model cannot meet, or a max_tokens its JSON cannot fit in, fails its own
requests; the target's breaker, runs and latency estimate stay what every other caller's traffic made them.
"""

from __future__ import annotations

import dataclasses
import time
from typing import Any

from routing.core.table import RoutingTable
from routing.gateway.state import GatewayState
from routing.simulator import SimulatorServer
from tests.gateway import support
from tests.gateway.support import answer, request, run

simulator, sim, table, fresh_state = support.simulator, support.sim, support.table, support.fresh_state


def untouched(gateway: GatewayState, name: str) -> tuple[str, int, float | None]:
    health = gateway.health.get(name)
    return health.status(time.monotonic()), health.consecutive_failures, health.latency_estimate_s


def test_a_timeout_at_the_clients_own_deadline_never_cools_the_target(
        sim: SimulatorServer, table: RoutingTable, fresh_state: GatewayState,
        audit_events: list[dict[str, Any]]) -> None:
    sim.set_fault("primary", {"kind": "slow_first_byte", "ms": 400})

    async def scenario() -> list[int]:
        return [(await answer(request(table, "primary", f"q{i}", headers={"X-GoModel-Deadline-Ms": "100"}))).status
                for i in range(5)]

    assert run(scenario()) == [504] * 5
    assert untouched(fresh_state, "primary") == ("healthy", 0, None)
    assert [(a["reason"], a["caused_by"]) for e in audit_events for a in e["attempts"]] == [("timeout", "client")] * 5
    sim.clear_faults()
    assert run(answer(request(table, "primary", "anyone else"))).status == 200


def test_a_workload_contracts_deadline_counts_as_the_clients_too(
        sim: SimulatorServer, table: RoutingTable, fresh_state: GatewayState) -> None:
    tight = RoutingTable.build(
        version=2, providers=list(table.providers.values()), models=list(table.models.values()),
        contracts=[dataclasses.replace(table.contracts["extract"], deadline_ms=150)])
    sim.set_fault("primary", {"kind": "slow_first_byte", "ms": 600})

    async def scenario() -> list[int]:
        return [(await answer(request(tight, "primary", f"q{i}", headers={"X-GoModel-Workload": "extract"}))).status
                for i in range(3)]

    assert run(scenario()) == [504] * 3
    assert untouched(fresh_state, "primary") == ("healthy", 0, None)


def test_a_timeout_of_the_providers_own_timeout_still_counts(
        sim: SimulatorServer, table: RoutingTable, fresh_state: GatewayState,
        audit_events: list[dict[str, Any]]) -> None:
    providers = [dataclasses.replace(p, timeout_s=0.1) if p.name == "sim" else p for p in table.providers.values()]
    impatient = RoutingTable.build(version=2, providers=providers, models=list(table.models.values()))
    sim.set_fault("primary", {"kind": "slow_first_byte", "ms": 400})

    async def scenario() -> None:
        for i in range(3):
            await answer(request(impatient, "primary", f"q{i}"))

    run(scenario())
    assert fresh_state.health.get("primary").status(time.monotonic()) == "cooling"
    assert audit_events[0]["attempts"][0]["caused_by"] == "target"


def test_a_stream_cut_off_at_the_clients_deadline_never_cools_the_target(
        sim: SimulatorServer, table: RoutingTable, fresh_state: GatewayState,
        audit_events: list[dict[str, Any]]) -> None:
    async def scenario() -> None:
        for i in range(4):  # 8 chunks 40 ms apart: the first arrives in time, the rest is cut off at 150 ms
            await answer(request(table, "slow-stream", f"q{i}", stream=True, headers={"X-GoModel-Deadline-Ms": "150"}))

    run(scenario())
    health = fresh_state.health.get("slow-stream")
    assert (health.status(time.monotonic()), health.consecutive_failures) == ("healthy", 0)
    assert [(a["reason"], a["caused_by"]) for e in audit_events for a in e["attempts"]] == [
        ("stream_cut", "client")] * 4


def test_truncations_its_own_max_tokens_forced_never_cool_the_target(
        sim: SimulatorServer, table: RoutingTable, fresh_state: GatewayState,
        audit_events: list[dict[str, Any]]) -> None:
    async def scenario() -> list[int]:
        return [(await answer(request(table, "primary", f"q{i}", max_tokens=1,
                                      response_format={"type": "json_object"}))).status for i in range(6)]

    assert run(scenario()) == [502] * 6
    assert [(a["reason"], a["validation"], a["caused_by"]) for e in audit_events for a in e["attempts"]] == [
        ("truncated", "rejected:truncated", "client")] * 6
    status, failures, _latency = untouched(fresh_state, "primary")
    assert (status, failures) == ("healthy", 0)
    assert run(answer(request(table, "primary", "anyone else"))).status == 200


def test_answers_that_break_the_clients_schema_never_cool_the_target(
        sim: SimulatorServer, table: RoutingTable, fresh_state: GatewayState) -> None:
    sim.set_fault("primary", {"kind": "schema_violation"})

    async def scenario() -> None:
        for i in range(6):
            await answer(request(table, "primary", f"q{i}", response_format=support.SCHEMA_FORMAT))

    run(scenario())
    status, failures, _latency = untouched(fresh_state, "primary")
    assert (status, failures) == ("healthy", 0)


def test_malformed_answers_still_cool_the_target(
        sim: SimulatorServer, table: RoutingTable, fresh_state: GatewayState) -> None:
    sim.set_fault("primary", {"kind": "malformed_json"})

    async def scenario() -> None:
        for i in range(5):
            await answer(request(table, "primary", f"q{i}"))

    run(scenario())
    assert fresh_state.health.get("primary").status(time.monotonic()) == "cooling"

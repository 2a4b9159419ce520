"""Cold start and exploration through the engine: real requests to the simulator, the gateway's seeded generator
(``fresh_state`` sets ``random.Random(0)``), health fed directly where a test needs a target fast or slow."""

from __future__ import annotations

import time
from collections import Counter
from typing import Any

from audit.delivery.event import prepare_event
from routing.core.outcome import AttemptOutcome, ErrorClass
from routing.core.table import RoutingTable, SettingsInForce, TargetRef, VirtualModelSpec
from routing.gateway.inspection.explain import explain_call
from routing.gateway.state import GatewayState
from routing.simulator import SimulatorServer
from tests.gateway import support
from tests.gateway.support import answer, request, routing_table, run

simulator, sim, fresh_state = support.simulator, support.sim, support.fresh_state

REQUESTS = 20


def explore_table(sim: SimulatorServer, exploration: float, cold_start: int = 3) -> RoutingTable:
    """The tests' table with ``explore``: adaptive over primary and secondary, no session keeping (so every
    request is a fresh pick), no weight floor (so only exploration can reach a starved target)."""
    base = routing_table(sim.base_url, settings=SettingsInForce(
        exploration=exploration, cold_start_observations=cold_start, min_weight_fraction=0.0))
    explore = VirtualModelSpec("explore", "adaptive", (TargetRef("primary"), TargetRef("secondary")),
                               session_affinity=False)
    return RoutingTable.build(version=base.version, providers=list(base.providers.values()),
                              models=list(base.models.values()),
                              virtual_models=[*base.virtual_models.values(), explore],
                              tier_routes=list(base.tier_routes.values()), contracts=list(base.contracts.values()),
                              settings=base.settings)


def measure(state: GatewayState, name: str, latency_s: float, samples: int = 10) -> None:
    health = state.health.get(name)
    now = time.monotonic()
    for index in range(samples):
        health.record(AttemptOutcome.success(latency_s), now - samples + index)


async def serve(table: RoutingTable, audit_events: list[dict[str, Any]]) -> Counter[str]:
    for index in range(REQUESTS):
        reply = await answer(request(table, "explore", f"hello number {index}"))
        assert reply.status == 200, reply.body
    return Counter(event["target"] for event in audit_events)


def test_the_exploration_share_reaches_a_target_the_weights_starve(
        sim: SimulatorServer, fresh_state: GatewayState, audit_events: list[dict[str, Any]]) -> None:
    measure(fresh_state, "primary", 0.001)
    measure(fresh_state, "secondary", 5.0)  # 5,000 times slower: p2c alone sends it 1 pick in 5,000
    served = run(serve(explore_table(sim, exploration=0.5), audit_events))
    assert served["secondary"] >= 3
    for event in audit_events:
        selection = event["selection"]
        assert selection["exploration"] == 0.5
        if event["target"] == "secondary":
            assert selection["explored"] is True
            assert selection["why"].startswith("exploration: uniform draw among 2 healthy targets")


def test_without_exploration_the_starved_target_gets_nothing(
        sim: SimulatorServer, fresh_state: GatewayState, audit_events: list[dict[str, Any]]) -> None:
    measure(fresh_state, "primary", 0.001)
    measure(fresh_state, "secondary", 5.0)
    served = run(serve(explore_table(sim, exploration=0.0), audit_events))
    assert served == Counter({"primary": REQUESTS})
    assert not any(event["selection"]["explored"] for event in audit_events)


def test_a_cooling_target_is_never_explored(
        sim: SimulatorServer, fresh_state: GatewayState, audit_events: list[dict[str, Any]]) -> None:
    measure(fresh_state, "primary", 0.001)
    fresh_state.health.get("secondary").record(
        AttemptOutcome.failure(ErrorClass.TRANSIENT, "rate_limited", status=429), time.monotonic())
    served = run(serve(explore_table(sim, exploration=0.5), audit_events))
    assert served == Counter({"primary": REQUESTS})


def test_a_new_target_is_in_cold_start_until_it_has_n_observations(
        sim: SimulatorServer, fresh_state: GatewayState, audit_events: list[dict[str, Any]]) -> None:
    table = explore_table(sim, exploration=0.0, cold_start=3)
    measure(fresh_state, "primary", 0.001)
    measure(fresh_state, "secondary", 5.0, samples=1)  # one slow answer: without the bonus, starved
    served = run(serve(table, audit_events))
    assert served["secondary"] >= 2  # weighed as fast as primary until its third observation
    views = [c for e in audit_events for c in e["selection"]["candidates"] if c["target"] == "secondary"]
    assert views[0]["cold_start"] is True
    assert views[0]["observations"] == 1
    assert views[-1]["observations"] >= 3
    assert views[-1]["cold_start"] is False
    cold_wins = [e for e in audit_events if e["target"] == "secondary"]
    assert "(cold start: 1 of 3 observations)" in cold_wins[0]["selection"]["why"]


def test_explain_shows_the_share_the_targets_it_may_draw_and_the_cold_start(
        sim: SimulatorServer, fresh_state: GatewayState) -> None:
    table = explore_table(sim, exploration=0.25)
    fresh_state.follow(table)
    measure(fresh_state, "primary", 0.2)
    out = run(explain_call(request(table, "explore")))
    [selection] = out["selections"]
    assert selection["exploration"] == 0.25
    assert selection["exploration_targets"] == ["primary", "secondary"]
    views = {c["target"]: c for c in selection["candidates"]}
    assert (views["primary"]["cold_start"], views["primary"]["observations"]) == (False, 10)
    assert (views["secondary"]["cold_start"], views["secondary"]["observations"]) == (True, 0)


def test_the_audit_keeps_the_exploration_and_the_cold_start(
        sim: SimulatorServer, fresh_state: GatewayState, audit_events: list[dict[str, Any]]) -> None:
    measure(fresh_state, "primary", 0.001)
    run(serve(explore_table(sim, exploration=0.5), audit_events))
    explored = next(e for e in audit_events if e["selection"]["explored"])
    prepared = prepare_event(explored, store_bodies=False, max_bytes=1_000_000)
    assert prepared["selection"]["explored"] is True
    assert prepared["selection"]["exploration"] == 0.5
    assert prepared["selection"]["why"].startswith("exploration:")
    views = {c["target"]: c for c in prepared["selection"]["candidates"]}
    assert views["secondary"]["cold_start"] is (views["secondary"]["observations"] < 3)


def test_a_target_that_fails_the_contract_is_never_explored(
        sim: SimulatorServer, fresh_state: GatewayState, audit_events: list[dict[str, Any]]) -> None:
    base = explore_table(sim, exploration=0.5)
    mixed = VirtualModelSpec("mixed", "adaptive", (TargetRef("primary"), TargetRef("text-only"), TargetRef("third")),
                             session_affinity=False)
    table = RoutingTable.build(version=base.version, providers=list(base.providers.values()),
                               models=list(base.models.values()), virtual_models=[*base.virtual_models.values(), mixed],
                               settings=base.settings)
    image = [{"role": "user", "content": [{"type": "text", "text": "what is this?"},
                                          {"type": "image_url", "image_url": {"url": "data:image/png;base64,iVBO"}}]}]

    async def serve_images() -> None:
        for _ in range(REQUESTS):
            reply = await answer(request(table, "mixed", messages=image))
            assert reply.status == 200, reply.body

    run(serve_images())
    assert {event["target"] for event in audit_events} <= {"primary", "third"}
    assert any(event["selection"]["explored"] for event in audit_events)
    assert all(("text-only", "modality:image") in [(s["target"], s["reason"]) for s in e["selection"]["skipped"]]
               for e in audit_events)

"""Planning: from a target name to the ordered models to try, and session keeping through the engine.

``plan_targets`` is called directly with a fresh GatewayState (no upstream involved); the session tests
serve real requests so the pin written after a success is the one the next request reads.
"""

from __future__ import annotations

import time
import uuid
from dataclasses import replace
from typing import Any

from routing.core.contracts import EffectiveContract, effective_contract
from routing.core.features import extract_features
from routing.core.outcome import AttemptOutcome, ErrorClass
from routing.core.requirements import requirements_from_features
from routing.core.table import RoutingTable, TargetRef, VirtualModelSpec
from routing.gateway.planning import PlanInputs, plan_targets
from routing.gateway.state import GatewayState
from routing.simulator import SimulatorServer
from tests.gateway import support
from tests.gateway.support import answer, request, routing_table, run

simulator, sim, table, fresh_state = support.simulator, support.sim, support.table, support.fresh_state

OFFLINE = routing_table("http://127.0.0.1:9")  # planning never calls upstream


def contract_for(body: dict[str, Any]) -> EffectiveContract:
    return effective_contract(requirements_from_features(extract_features(body, "openai")), None)


TEXT = contract_for({"model": "x", "messages": [{"role": "user", "content": "hi"}]})
IMAGE = contract_for({"model": "x", "messages": [{"role": "user", "content": [
    {"type": "text", "text": "what is this?"},
    {"type": "image_url", "image_url": {"url": "data:image/png;base64,iVBORw0KGgo="}}]}]})


def inputs(table: RoutingTable = OFFLINE, contract: EffectiveContract = TEXT, **fields: Any) -> PlanInputs:
    return PlanInputs(**{"table": table, "contract": contract, "session_targets": {}, "warm_target": None,
                         "now": time.monotonic(), **fields})


def with_virtual(*extra: VirtualModelSpec) -> RoutingTable:
    return RoutingTable.build(version=2, providers=list(OFFLINE.providers.values()),
                              models=list(OFFLINE.models.values()),
                              virtual_models=[*OFFLINE.virtual_models.values(), *extra])


def test_a_concrete_model_is_its_own_plan(fresh_state: GatewayState) -> None:
    plan = plan_targets("primary", inputs(), fresh_state)
    assert [m.name for m in plan.models] == ["primary"]
    assert plan.records == []


def test_nested_virtual_models_are_flattened_in_order_each_model_once(fresh_state: GatewayState) -> None:
    table = with_virtual(VirtualModelSpec("again", "failover", (TargetRef("pair"), TargetRef("primary"),
                                                                TargetRef("nested"))))
    plan = plan_targets("again", inputs(table), fresh_state)
    assert [m.name for m in plan.models] == ["primary", "secondary", "third"]
    assert [r.virtual_model for r in plan.records] == ["again", "pair", "nested", "pair"]


def test_targets_that_cannot_meet_the_contract_are_left_out_with_the_reason(fresh_state: GatewayState) -> None:
    table = with_virtual(VirtualModelSpec("mixed", "failover", (TargetRef("text-only"), TargetRef("primary"))))
    plan = plan_targets("mixed", inputs(table, IMAGE), fresh_state)
    assert [m.name for m in plan.models] == ["primary"]
    [(name, reason)] = plan.records[0].skipped
    assert name == "text-only"
    assert "image" in reason
    nothing = plan_targets("text-only", inputs(table, IMAGE), fresh_state)
    assert nothing.models == []
    assert nothing.rejected
    assert nothing.rejected[0][0] == "text-only"


def test_a_disabled_target_is_skipped(fresh_state: GatewayState) -> None:
    base = with_virtual()
    models = {**base.models, "primary": replace(base.models["primary"], enabled=False)}
    table = RoutingTable.build(version=3, providers=list(base.providers.values()), models=list(models.values()),
                               virtual_models=list(base.virtual_models.values()))
    plan = plan_targets("pair", inputs(table), fresh_state)
    assert [m.name for m in plan.models] == ["secondary"]
    assert ("primary", "disabled") in plan.records[0].skipped


def test_a_cooling_target_is_left_out_and_all_cooling_says_when_to_come_back(
        fresh_state: GatewayState) -> None:
    now = time.monotonic()
    rate_limited = AttemptOutcome.failure(ErrorClass.TRANSIENT, "rate_limited", status=429, retry_after_s=20.0)
    fresh_state.health.get("primary").record(rate_limited, now)
    plan = plan_targets("pair", inputs(now=now), fresh_state)
    assert [m.name for m in plan.models] == ["secondary"]
    assert plan.retry_after_s is None

    fresh_state.health.get("secondary").record(rate_limited, now)
    cooling = plan_targets("pair", inputs(now=now), fresh_state)
    assert cooling.models == []
    assert cooling.retry_after_s is not None
    assert 29 < cooling.retry_after_s <= 30


def test_a_session_s_target_is_kept_while_it_is_available(fresh_state: GatewayState) -> None:
    kept = plan_targets("sticky", inputs(session_targets={"sticky": "secondary"}), fresh_state)
    assert kept.models[0].name == "secondary"
    assert kept.records[0].selection is not None
    assert kept.records[0].selection.affinity == "honored"


def test_a_session_stays_on_its_target_until_that_target_fails(
        sim: SimulatorServer, table: RoutingTable, audit_events: list[dict[str, Any]]) -> None:
    session = {"X-Session-Id": uuid.uuid4().hex}
    first = run(answer(request(table, "sticky", "turn 0", headers=session))).headers["X-GoModel-Target"]
    other = "secondary" if first == "primary" else "primary"
    for turn in range(1, 8):
        reply = run(answer(request(table, "sticky", f"turn {turn}", headers=session)))
        assert reply.headers["X-GoModel-Target"] == first
    assert {e["selection"]["affinity"] for e in audit_events[1:]} == {"honored"}

    sim.set_fault(first, {"kind": "rate_limit", "retry_after": 30, "times": 1})
    moved = run(answer(request(table, "sticky", "turn 8", headers=session)))
    assert (moved.headers["X-GoModel-Target"], moved.headers["X-GoModel-Attempts"]) == (other, "2")
    for turn in range(9, 12):  # re-pinned to the target that answered
        assert run(answer(request(table, "sticky", f"turn {turn}", headers=session))).headers[
            "X-GoModel-Target"] == other

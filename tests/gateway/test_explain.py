"""/v1/routing/explain in process: the same resolve step as a real request, and nothing changed by asking."""

from __future__ import annotations

import uuid
from typing import Any

import pytest

from routing.core.table import RoutingTable
from routing.gateway.gateway_error import GatewayError
from routing.gateway.inspection.explain import explain_call
from routing.gateway.state import GatewayState
from routing.gateway.tiers import TIER_PIN_NAMESPACE
from routing.simulator import SimulatorServer
from tests.gateway import support
from tests.gateway.support import LIMITED_KEY, answer, request, run

simulator, sim, table, fresh_state = support.simulator, support.sim, support.table, support.fresh_state

HARD = "Think step by step about why the build fails"


def refused(call: Any) -> GatewayError:
    with pytest.raises(GatewayError) as caught:
        run(explain_call(call))
    return caught.value


def test_a_key_may_not_explain_a_model_it_may_not_use(sim: SimulatorServer, table: RoutingTable) -> None:
    error = refused(request(table, "pair", key=LIMITED_KEY))
    assert (error.status, error.code, error.param) == (403, "model_not_allowed", "model")
    allowed = run(explain_call(request(table, "primary", key=LIMITED_KEY)))
    assert allowed["kind"] == "model"
    assert allowed["candidates"] == ["primary"]


def test_an_unknown_workload_is_400_as_in_a_real_request(sim: SimulatorServer, table: RoutingTable) -> None:
    call = request(table, "pair", headers={"X-GoModel-Workload": "no-such-workload"})
    error = refused(call)
    assert (error.status, error.code, error.param) == (400, "unknown_workload", "X-GoModel-Workload")
    real = run(answer(request(table, "pair", headers={"X-GoModel-Workload": "no-such-workload"})))
    assert (real.status, real.error["code"]) == (error.status, error.code)
    known = run(explain_call(request(table, "pair", headers={"X-GoModel-Workload": "extract"})))
    assert known["workload"] == "extract"


def test_an_unknown_model_and_a_broken_schema_are_refused(sim: SimulatorServer, table: RoutingTable) -> None:
    assert refused(request(table, "no-such-model")).status == 404
    broken = {"type": "json_schema", "json_schema": {"name": "p", "schema": {"type": "no-such-type"}}}
    assert refused(request(table, "pair", response_format=broken)).param == "response_format"


def test_it_explains_a_tier_verdict_without_touching_the_session_pin(
        sim: SimulatorServer, table: RoutingTable, fresh_state: GatewayState) -> None:
    session = {"X-Session-Id": uuid.uuid4().hex}
    assert run(answer(request(table, "normal", "hello", headers=session))).headers["X-GoModel-Pro-Tier"] == "easy"
    pin_key = f"normal|{request(table, 'normal', headers=session).session.value}"

    explained = run(explain_call(request(table, "normal", HARD, headers=session)))

    verdict = explained["tier"]
    assert (verdict["verdict_tier"], verdict["tier"], verdict["target"]) == ("hard", "hard", "pair")
    assert (verdict["pin_before"], verdict["escalated"]) == ("easy", True)
    assert explained["target"] == "pair"
    assert explained["candidates"] == ["primary", "secondary"]
    assert run(fresh_state.pins.get(TIER_PIN_NAMESPACE, pin_key)) == "easy"  # read, not written
    follow_up = run(answer(request(table, "normal", "thanks", headers=session)))
    assert follow_up.headers["X-GoModel-Pro-Tier"] == "easy"  # the explanation escalated nothing
    assert [r["model"] for r in sim.received()] == ["primary", "primary"]  # the two real requests only


def test_it_leaves_round_robin_positions_alone(sim: SimulatorServer, table: RoutingTable,
                                              fresh_state: GatewayState) -> None:
    first = run(explain_call(request(table, "rr")))
    second = run(explain_call(request(table, "rr")))
    assert first["selections"][0]["winner"] == second["selections"][0]["winner"]
    assert fresh_state.round_robin == {}
    served = run(answer(request(table, "rr")))
    assert served.headers["X-GoModel-Target"] == first["selections"][0]["winner"]


def test_it_shows_a_cooling_target_and_when_everything_cools(sim: SimulatorServer, table: RoutingTable) -> None:
    sim.set_fault("primary", {"kind": "rate_limit", "retry_after": 30})
    run(answer(request(table, "pair")))
    explained = run(explain_call(request(table, "pair")))
    states = {c["target"]: c["status"] for c in explained["selections"][0]["candidates"]}
    assert states == {"primary": "cooling", "secondary": "healthy"}
    assert explained["candidates"] == ["secondary"]
    assert "all_cooling_retry_after_s" not in explained

    sim.set_fault("secondary", {"kind": "rate_limit", "retry_after": 30})
    run(answer(request(table, "secondary")))
    everything = run(explain_call(request(table, "pair")))
    assert everything["candidates"] == []
    assert 0 < everything["all_cooling_retry_after_s"] <= 30

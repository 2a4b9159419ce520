"""Routing policies in process: selection by header, body and default; each strategy and constraint on a real
request; fallback chains in X-GoModel-Policy, the audit event and explain; unknown policies (400) and unmet
constraints (503) in both envelopes; health still applies; tier routes' virtual models are policed too.

The virtual model ``pool`` (adaptive) lists ``third`` (dear, no strength), ``primary`` (code) and ``secondary``
(cheap, writing).
"""

from __future__ import annotations

import dataclasses
import time
from types import MappingProxyType
from typing import Any

from routing.core.outcome import AttemptOutcome, ErrorClass
from routing.core.policies import PolicySpec
from routing.core.table import CategoryRouteSpec, RoutingTable, TargetRef, VirtualModelSpec
from routing.gateway.inspection.explain import explain_call
from routing.gateway.state import GatewayState
from routing.simulator import SimulatorServer
from tests.gateway import support
from tests.gateway.support import Reply, answer, counted, request, run

simulator, sim, table, fresh_state = support.simulator, support.sim, support.table, support.fresh_state

POLICIES = (
    PolicySpec("ordered", "priority"),
    PolicySpec("cheap", "cost"),
    PolicySpec("fast", "latency"),
    PolicySpec("writer", "strength", strength="writing"),
    PolicySpec("quick", "latency", max_latency_ms=100, fallback_to="cheap"),
    PolicySpec("strict", "cost", max_latency_ms=100, fallback_to="quick"),
    PolicySpec("penny", "cost", max_cost_usd=1e-9),
    PolicySpec("instant", "latency", max_latency_ms=1),
)


def policed(table: RoutingTable, *extra: PolicySpec) -> RoutingTable:
    """``table`` with priced, strong models, the ``pool`` virtual model and the policies."""
    models = dict(table.models)
    models["third"] = dataclasses.replace(models["third"], input_price=5.0, output_price=10.0)
    models["primary"] = dataclasses.replace(models["primary"], strengths=frozenset({"code"}))
    models["secondary"] = dataclasses.replace(models["secondary"], input_price=0.1, output_price=0.2,
                                              strengths=frozenset({"writing"}))
    virtual = {**table.virtual_models, "pool": VirtualModelSpec(
        "pool", "adaptive", (TargetRef("third"), TargetRef("primary"), TargetRef("secondary")))}
    policies = {p.name: p for p in (*POLICIES, *extra)}
    return dataclasses.replace(table, models=MappingProxyType(models), virtual_models=MappingProxyType(virtual),
                               policies=MappingProxyType(policies))


def seed_latency(state: GatewayState, **latency_ms: float) -> None:
    now = time.monotonic()
    for name, ms in latency_ms.items():
        for _ in range(5):
            state.health.get(name).record(AttemptOutcome.success(ms / 1000), now)


def ask(table: RoutingTable, model: str = "pool", policy: str | None = None, **extra: Any) -> Reply:
    headers = {"X-Routing-Policy": policy} if policy else {}
    headers.update(extra.pop("headers", {}))
    return run(answer(request(policed(table), model, headers=headers, **extra)))


def served(reply: Reply) -> tuple[str, str]:
    assert reply.status == 200, reply.body
    return reply.headers["X-GoModel-Policy"], reply.headers["X-GoModel-Target"]


def test_the_header_selects_each_strategy(sim: SimulatorServer, table: RoutingTable,
                                          fresh_state: GatewayState) -> None:
    seed_latency(fresh_state, third=40, primary=300, secondary=900)
    assert served(ask(table, policy="ordered")) == ("ordered", "third")
    assert served(ask(table, policy="cheap")) == ("cheap", "secondary")
    assert served(ask(table, policy="fast")) == ("fast", "third")
    assert served(ask(table, policy="writer")) == ("writer", "secondary")


def test_the_body_field_selects_a_policy_and_never_goes_upstream(sim: SimulatorServer, table: RoutingTable) -> None:
    reply = ask(table, metadata={"routing_policy": "cheap", "tag": "kept"})
    assert served(reply) == ("cheap", "secondary")
    assert sim.received()[-1]["body"]["metadata"] == {"tag": "kept"}
    ask(table, metadata={"routing_policy": "cheap"})
    assert "metadata" not in sim.received()[-1]["body"]


def test_the_header_wins_over_the_body(sim: SimulatorServer, table: RoutingTable) -> None:
    assert served(ask(table, policy="ordered", metadata={"routing_policy": "cheap"})) == ("ordered", "third")


def test_a_default_policy_applies_to_requests_that_name_none(sim: SimulatorServer, table: RoutingTable,
                                                             audit_events: list[dict[str, Any]]) -> None:
    assert "X-GoModel-Policy" not in ask(table).headers  # no default configured: no policy
    reply = run(answer(request(policed(table, PolicySpec("default", "cost")), "pool")))
    assert served(reply) == ("default", "secondary")
    assert audit_events[-1]["policy_decision"]["source"] == "default"


def test_constraints_filter_and_the_chain_falls_back_step_by_step(
        sim: SimulatorServer, table: RoutingTable, fresh_state: GatewayState,
        audit_events: list[dict[str, Any]]) -> None:
    seed_latency(fresh_state, third=400, primary=300, secondary=900)
    reply = ask(table, policy="strict")
    assert served(reply) == ("strict>quick>cheap", "secondary")
    event = audit_events[-1]
    assert (event["policy"], event["policy_chain"]) == ("cheap", "strict>quick>cheap")
    assert [(s["from"], s["to"], s["virtual_model"], s["reason"]) for s in event["policy_decision"]["steps"]] == [
        ("strict", "quick", "pool", "max_latency_ms"), ("quick", "cheap", "pool", "max_latency_ms")]
    assert event["selection"]["policy"] == "cheap"
    assert event["selection"]["why"].startswith("routing policy cheap (cost): ")


def test_a_constraint_keeps_only_the_targets_that_meet_it(sim: SimulatorServer, table: RoutingTable,
                                                          fresh_state: GatewayState,
                                                          audit_events: list[dict[str, Any]]) -> None:
    seed_latency(fresh_state, third=400, primary=50, secondary=900)
    assert served(ask(table, policy="quick")) == ("quick", "primary")
    skipped = {s["target"]: s["reason"] for s in audit_events[-1]["selection"]["skipped"]}
    assert skipped == {"third": "policy:max_latency_ms", "secondary": "policy:max_latency_ms"}


def test_failover_follows_the_policys_order(sim: SimulatorServer, table: RoutingTable,
                                            audit_events: list[dict[str, Any]]) -> None:
    sim.set_fault("secondary", {"kind": "context_overflow"})  # this target cannot serve it: the next one can
    reply = ask(table, policy="cheap")
    assert served(reply) == ("cheap", "primary")  # cheapest first, then the next cheapest
    assert [a["target"] for a in audit_events[-1]["attempts"]] == ["secondary", "primary"]


def test_cooling_targets_are_still_skipped(sim: SimulatorServer, table: RoutingTable,
                                           fresh_state: GatewayState) -> None:
    rate_limited = AttemptOutcome.failure(ErrorClass.TRANSIENT, "rate_limited", status=429, retry_after_s=20.0)
    fresh_state.health.get("secondary").record(rate_limited, time.monotonic())
    assert served(ask(table, policy="cheap")) == ("cheap", "primary")
    writer = ask(table, policy="writer")  # its only target is cooling: the cooldown's 503, not an unmet policy
    assert writer.status == 503
    assert writer.error["code"] == "all_targets_cooling"
    assert int(writer.headers["Retry-After"]) > 1


def test_unmet_constraints_are_a_503_naming_the_policy_and_the_constraint(
        sim: SimulatorServer, table: RoutingTable, fresh_state: GatewayState,
        audit_events: list[dict[str, Any]]) -> None:
    reply = ask(table, policy="penny")
    assert reply.status == 503
    assert reply.error["code"] == "routing_policy_unmet"
    assert "`penny`" in reply.error["message"]
    assert "max_cost_usd=1e-09" in reply.error["message"]
    assert "Retry-After" not in reply.headers
    assert reply.headers["X-GoModel-Policy"] == "penny"
    assert audit_events[-1]["policy_decision"]["unmet"] == "max_cost_usd=1e-09"
    seed_latency(fresh_state, third=40, primary=30, secondary=90)
    slow = ask(table, policy="instant")
    assert slow.status == 503
    assert "max_latency_ms=1" in slow.error["message"]
    assert slow.headers["Retry-After"] == "10"
    anthropic = ask(table, policy="penny", inbound="anthropic")
    assert anthropic.status == 503
    assert anthropic.json()["type"] == "error"
    assert "penny" in anthropic.json()["error"]["message"]
    assert sim.received() == []


def test_an_unknown_policy_is_a_400_naming_the_header_or_the_body_field(sim: SimulatorServer,
                                                                        table: RoutingTable) -> None:
    reply = ask(table, policy="nope")
    assert reply.status == 400
    assert (reply.error["param"], reply.error["code"]) == ("X-Routing-Policy", "unknown_routing_policy")
    assert "nope" in reply.error["message"]
    body = ask(table, metadata={"routing_policy": "nope"})
    assert (body.status, body.error["param"]) == (400, "metadata.routing_policy")
    anthropic = ask(table, policy="nope", inbound="anthropic")
    assert anthropic.status == 400
    assert "X-Routing-Policy" in anthropic.json()["error"]["message"]
    assert sim.received() == []


def test_a_tier_routes_virtual_model_is_policed(sim: SimulatorServer, table: RoutingTable) -> None:
    # normal: easy primary (a concrete model: nothing to choose), hard the failover pair (primary, secondary).
    reply = ask(table, "normal", policy="cheap", headers={"X-GoModel-Tier": "hard"})
    assert served(reply) == ("cheap", "secondary")
    assert reply.headers["X-GoModel-Pro-Tier-Target"] == "pair"


def test_a_category_routes_virtual_model_is_policed(sim: SimulatorServer, table: RoutingTable) -> None:
    route = CategoryRouteSpec(alias="content", targets={"writing": "pool"}, default="primary")
    routed = dataclasses.replace(policed(table), category_routes=MappingProxyType({"content": route}))
    reply = run(answer(request(routed, "content", "Write a poem about autumn",
                               headers={"X-Routing-Policy": "cheap"})))
    assert served(reply) == ("cheap", "secondary")
    assert reply.headers["X-GoModel-Category-Target"] == "pool"
    general = run(answer(request(routed, "content", "Hello", headers={"X-Routing-Policy": "cheap"})))
    assert served(general) == ("cheap", "primary")  # a concrete model: no choice for the policy to make


def test_decisions_and_steps_are_counted(sim: SimulatorServer, table: RoutingTable,
                                         fresh_state: GatewayState) -> None:
    seed_latency(fresh_state, third=400, primary=300, secondary=900)
    applied = counted("gomodel_routing_policy_decisions_total", policy="cheap", final_policy="cheap",
                      outcome="applied")
    fallback = counted("gomodel_routing_policy_decisions_total", policy="quick", final_policy="cheap",
                       outcome="fallback")
    steps = counted("gomodel_routing_policy_fallback_steps_total", from_policy="quick", to_policy="cheap")
    unmet = counted("gomodel_routing_policy_decisions_total", policy="penny", final_policy="penny", outcome="unmet")
    ask(table, policy="cheap")
    ask(table, policy="quick")
    ask(table, policy="penny")
    assert counted("gomodel_routing_policy_decisions_total", policy="cheap", final_policy="cheap",
                   outcome="applied") == applied + 1
    assert counted("gomodel_routing_policy_decisions_total", policy="quick", final_policy="cheap",
                   outcome="fallback") == fallback + 1
    assert counted("gomodel_routing_policy_fallback_steps_total", from_policy="quick", to_policy="cheap") == steps + 1
    assert counted("gomodel_routing_policy_decisions_total", policy="penny", final_policy="penny",
                   outcome="unmet") == unmet + 1


def test_explain_shows_the_policy_and_its_steps(sim: SimulatorServer, table: RoutingTable,
                                                fresh_state: GatewayState) -> None:
    seed_latency(fresh_state, third=400, primary=300, secondary=900)
    call = request(policed(table), "pool", headers={"X-Routing-Policy": "quick"})
    explained = run(explain_call(call))
    policy = explained["policy"]
    assert (policy["selected"], policy["policy"], policy["chain"], policy["source"]) == (
        "quick", "cheap", "quick>cheap", "header")
    assert policy["steps"] == [{"from": "quick", "to": "cheap", "virtual_model": "pool", "reason": "max_latency_ms"}]
    assert explained["candidates"] == ["secondary", "primary", "third"]
    assert explained["selections"][0]["policy"] == "cheap"
    assert run(explain_call(request(policed(table), "pool")))["policy"] is None
    assert sim.received() == []

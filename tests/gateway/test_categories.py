"""Category routes in process: the category and target headers, forcing, tier aliases as targets, explain, audit.

The category route ``content`` sends code to the tier alias ``normal`` (easy ``primary``, hard the ``pair``
pool), writing to the ``rr`` pool, math to ``third``, images to ``claude`` and anything else to ``secondary``.
"""

from __future__ import annotations

import dataclasses
from types import MappingProxyType
from typing import Any

from routing.core.table import CategoryRouteSpec, RoutingTable, SettingsInForce
from routing.gateway.inspection.explain import explain_call
from routing.simulator import SimulatorServer
from tests.gateway import support
from tests.gateway.support import Reply, answer, counted, request, routing_table, run

simulator, sim, table, fresh_state = support.simulator, support.sim, support.table, support.fresh_state

ROUTE = CategoryRouteSpec(alias="content", targets={"code": "normal", "writing": "rr", "math": "third",
                                                     "vision": "claude"}, default="secondary")
IMAGE = {"type": "image_url", "image_url": {"url": "data:image/png;base64,iVBORw0KGgo="}}


def with_route(table: RoutingTable, route: CategoryRouteSpec = ROUTE) -> RoutingTable:
    return dataclasses.replace(table, category_routes=MappingProxyType({route.alias: route}))


def ask(table: RoutingTable, text: Any, **headers: str) -> Reply:
    all_headers = {name.replace("_", "-"): value for name, value in headers.items()}
    return run(answer(request(with_route(table), "content", text, headers=all_headers)))


def category(reply: Reply) -> tuple[str, str, str]:
    assert reply.status == 200, reply.body
    return reply.headers["X-GoModel-Category"], reply.headers["X-GoModel-Category-Target"], \
        reply.headers["X-GoModel-Target"]


def test_each_category_reaches_its_target(sim: SimulatorServer, table: RoutingTable) -> None:
    assert category(ask(table, "Schreibe ein Gedicht über den Herbst")) == ("writing", "rr", "primary")
    assert category(ask(table, "求这个积分的值")) == ("math", "third", "third")
    assert category(ask(table, "Hello, how are you?")) == ("general", "secondary", "secondary")
    assert category(ask(table, [{"type": "text", "text": "What is in this picture?"}, IMAGE])) == (
        "vision", "claude", "claude")
    assert [r["model"] for r in sim.received()][-1] == "claude-sim"


def test_a_tier_alias_as_target_decides_the_category_first_then_the_tier(
        sim: SimulatorServer, table: RoutingTable, audit_events: list[dict[str, Any]]) -> None:
    easy = ask(table, "Fix the bug in my Python script")
    assert category(easy) == ("code", "normal", "primary")
    assert (easy.headers["X-GoModel-Pro-Tier"], easy.headers["X-GoModel-Pro-Tier-Target"]) == ("easy", "primary")
    hard = ask(table, "Think step by step: refactor this Python module")
    assert category(hard)[:2] == ("code", "normal")
    assert (hard.headers["X-GoModel-Pro-Tier"], hard.headers["X-GoModel-Pro-Tier-Target"]) == ("hard", "pair")
    event = audit_events[-1]
    assert (event["category"], event["category_rule"], event["category_alias"], event["category_target"]) == (
        "code", "keywords", "content", "normal")
    assert event["category_detail"] == "refactor*"
    assert event["tier"]["alias"] == "normal"
    assert event["tier"]["tier"] == "hard"
    assert event["requested_model"] == "content"


def test_a_route_without_tier_target_sends_no_tier_headers(sim: SimulatorServer, table: RoutingTable) -> None:
    reply = ask(table, "Draft a short speech")
    assert category(reply)[:2] == ("writing", "rr")
    assert "X-GoModel-Pro-Tier" not in reply.headers


def test_the_header_forces_the_category(sim: SimulatorServer, table: RoutingTable,
                                        audit_events: list[dict[str, Any]]) -> None:
    reply = ask(table, "Hello there", X_GoModel_Category="MATH")
    assert category(reply) == ("math", "third", "third")
    assert (audit_events[-1]["category_rule"], audit_events[-1]["category_detail"]) == (
        "header", "X-GoModel-Category")


def test_an_unknown_category_header_is_400_naming_it_in_both_envelopes(sim: SimulatorServer,
                                                                       table: RoutingTable) -> None:
    reply = ask(table, "Hello", X_GoModel_Category="poetry")
    assert reply.status == 400
    assert reply.error["param"] == "X-GoModel-Category"
    assert reply.error["code"] == "unknown_category"
    assert "poetry" in reply.error["message"]
    anthropic = run(answer(request(with_route(table), "content", "Hello", inbound="anthropic",
                                   headers={"X-GoModel-Category": "poetry"})))
    assert anthropic.status == 400
    assert anthropic.json()["type"] == "error"
    assert "X-GoModel-Category" in anthropic.json()["error"]["message"]
    assert sim.received() == []


def test_a_failed_request_still_carries_the_category_headers(sim: SimulatorServer, table: RoutingTable) -> None:
    route = CategoryRouteSpec(alias="content", targets={"code": "dead-pair"}, default="unreachable")
    reply = run(answer(request(with_route(table, route), "content", "hello")))
    assert reply.status >= 500
    assert reply.headers["X-GoModel-Category"] == "general"
    assert reply.headers["X-GoModel-Category-Target"] == "unreachable"


def test_operator_keywords_and_threshold_apply(sim: SimulatorServer) -> None:
    settings = SettingsInForce(category_keywords=(("writing", ("limerick",)),), category_long_context_tokens=50)
    table = routing_table(sim.base_url, settings=settings)
    assert category(ask(table, "a limerick about cats")) [0] == "writing"
    assert category(ask(table, "Draft a short speech"))[0] == "general"  # the built-in writing list is replaced
    assert category(ask(table, "hello " * 40)) == ("long_context", "secondary", "secondary")


def test_decisions_are_counted_by_alias_and_category(sim: SimulatorServer, table: RoutingTable) -> None:
    before = counted("gomodel_category_decisions_total", alias="content", category="math")
    ask(table, "what is 12 * 7?")
    ask(table, "hello", X_GoModel_Category="math")
    assert counted("gomodel_category_decisions_total", alias="content", category="math") == before + 2


def test_explain_shows_the_category_and_the_rule_then_the_tier(sim: SimulatorServer, table: RoutingTable) -> None:
    explained = run(explain_call(request(with_route(table), "content", "Think step by step and debug this")))
    assert explained["kind"] == "category"
    assert explained["category"] == {"alias": "content", "category": "code", "rule": "keywords",
                                     "detail": "debug*", "target": "normal", "forced": False,
                                     "long_context_tokens": 32000}
    assert explained["tier"]["alias"] == "normal"
    assert explained["tier"]["tier"] == "hard"
    assert explained["target"] == "pair"
    assert sim.received() == []
    forced = run(explain_call(request(with_route(table), "content", "hello",
                                      headers={"X-GoModel-Category": "vision"})))
    assert (forced["category"]["rule"], forced["target"]) == ("header", "claude")


def test_a_category_alias_obeys_the_keys_allowed_models(sim: SimulatorServer, table: RoutingTable) -> None:
    reply = run(answer(request(with_route(table), "content", "hello", key=support.LIMITED_KEY)))
    assert reply.status == 403

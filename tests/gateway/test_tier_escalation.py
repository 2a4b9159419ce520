"""Capability escalation in process: a tier that cannot serve the request hands it to the other tier.

Tier routes over the simulator: ``vision`` (easy: text-only, hard: primary with images and tools), ``thinker``
(easy: primary without reasoning, hard: reasoner), ``blind`` (both tiers text-only) and ``upside`` (easy:
primary, hard: text-only).
"""

from __future__ import annotations

import uuid
from typing import Any

import pytest

from routing.core.table import ModelSpec, RoutingTable, TierRouteSpec
from routing.gateway.gateway_error import GatewayError
from routing.gateway.inspection.explain import explain_call
from routing.gateway.state import GatewayState, state
from routing.gateway.tiers import TIER_PIN_NAMESPACE
from routing.providers.capabilities import required_capabilities
from routing.simulator import SimulatorServer
from tests.gateway import support
from tests.gateway.support import Reply, answer, counted, request, routing_table, run

simulator, sim, fresh_state = support.simulator, support.sim, support.fresh_state

HARD = "Think step by step about why the build fails"
IMAGE_PART = {"type": "image_url", "image_url": {"url": "data:image/png;base64,iVBORw0KGgo="}}
TOOLS = [{"type": "function", "function": {"name": "lookup", "parameters": {"type": "object"}}}]


@pytest.fixture
def table(simulator: SimulatorServer) -> RoutingTable:
    base = routing_table(simulator.base_url)
    reasoner = ModelSpec(name="reasoner", provider="sim", upstream="reasoner", input_price=3.0, output_price=6.0,
                         capabilities=frozenset({"text", "reasoning"}))
    routes = [
        TierRouteSpec("vision", easy="text-only", hard="primary"),
        TierRouteSpec("thinker", easy="primary", hard="reasoner"),
        TierRouteSpec("blind", easy="text-only", hard="text-only"),
        TierRouteSpec("upside", easy="primary", hard="text-only"),
    ]
    return RoutingTable.build(version=base.version, providers=list(base.providers.values()),
                              models=[*base.models.values(), reasoner],
                              virtual_models=list(base.virtual_models.values()),
                              tier_routes=[*base.tier_routes.values(), *routes],
                              contracts=list(base.contracts.values()), settings=base.settings)


def image_message(text: str = "what is in this picture?") -> list[dict[str, Any]]:
    return [{"role": "user", "content": [{"type": "text", "text": text}, IMAGE_PART]}]


def send(table: RoutingTable, alias: str, text: str = "hello", *, session: str | None = None,
         headers: dict[str, str] | None = None, **extra: Any) -> Reply:
    all_headers = {**(headers or {}), **({"X-Session-Id": session} if session else {})}
    return run(answer(request(table, alias, text, headers=all_headers, **extra)))


def pin(session: str, alias: str) -> str | None:
    """The session's tier pin on ``alias`` (the session id is scoped and hashed as the engine does)."""
    call = request(RoutingTable(), alias, headers={"X-Session-Id": session})
    return run(state.pins.get(TIER_PIN_NAMESPACE, f"{alias}|{call.session.value}"))


def test_an_image_to_a_text_only_easy_tier_lands_on_hard(
        sim: SimulatorServer, table: RoutingTable, audit_events: list[dict[str, Any]]) -> None:
    metric = "gomodel_pro_smartroute_requests_total"
    easy, hard = counted(metric, alias="vision", tier="easy"), counted(metric, alias="vision", tier="hard")
    escalations = counted("gomodel_pro_smartroute_escalations_total", alias="vision", cause="capability")
    reply = send(table, "vision", messages=image_message())
    assert reply.status == 200, reply.body
    assert reply.headers["X-GoModel-Pro-Tier"] == "hard"
    assert reply.headers["X-GoModel-Pro-Tier-Target"] == "primary"
    assert reply.headers["X-GoModel-Pro-Tier-Escalated"] == "capability"
    assert reply.headers["X-GoModel-Target"] == "primary"
    assert [r["model"] for r in sim.received()] == ["primary"]
    [event] = audit_events
    tier = event["tier"]
    assert (tier["tier"], tier["escalation"], tier["escalated"]) == ("hard", "capability", True)
    assert {"name": "capability", "points": 0, "detail": "text-only lacks image"} in tier["signals"]
    assert counted(metric, alias="vision", tier="hard") == hard + 1  # counted by the tier used
    assert counted(metric, alias="vision", tier="easy") == easy
    assert counted("gomodel_pro_smartroute_escalations_total", alias="vision", cause="capability") == escalations + 1


def test_the_escalation_raises_the_session_pin_as_a_hard_verdict_would(
        sim: SimulatorServer, table: RoutingTable, fresh_state: GatewayState) -> None:
    session = uuid.uuid4().hex
    assert send(table, "vision", session=session, messages=image_message()).headers["X-GoModel-Pro-Tier"] == "hard"
    assert pin(session, "vision") == "hard"
    follow_up = send(table, "vision", "thanks!", session=session)
    assert follow_up.headers["X-GoModel-Pro-Tier"] == "hard"  # held by the pin, like any escalation
    assert "X-GoModel-Pro-Tier-Escalated" not in follow_up.headers


def test_a_plain_text_request_is_not_escalated(sim: SimulatorServer, table: RoutingTable) -> None:
    reply = send(table, "vision", "hello")
    assert (reply.status, reply.headers["X-GoModel-Pro-Tier"]) == (200, "easy")
    assert "X-GoModel-Pro-Tier-Escalated" not in reply.headers


def test_low_reasoning_effort_to_an_easy_model_without_reasoning_goes_to_hard(
        sim: SimulatorServer, table: RoutingTable, audit_events: list[dict[str, Any]]) -> None:
    reply = send(table, "thinker", "hi", reasoning_effort="low")  # low is no reasoning short-cut: easy verdict
    assert reply.status == 200, reply.body
    assert (reply.headers["X-GoModel-Pro-Tier"], reply.headers["X-GoModel-Target"]) == ("hard", "reasoner")
    assert reply.headers["X-GoModel-Pro-Tier-Escalated"] == "capability"
    assert audit_events[0]["tier"]["signals"][-1]["detail"] == "primary lacks reasoning"


def test_tools_to_an_easy_model_without_tools_go_to_hard(sim: SimulatorServer, table: RoutingTable) -> None:
    reply = send(table, "vision", "what's the weather?", tools=TOOLS)
    assert reply.status == 200, reply.body
    assert (reply.headers["X-GoModel-Pro-Tier"], reply.headers["X-GoModel-Pro-Tier-Escalated"]) == \
        ("hard", "capability")


def test_a_hard_tier_that_cannot_serve_hands_the_request_down_without_lowering_the_pin(
        sim: SimulatorServer, table: RoutingTable, audit_events: list[dict[str, Any]]) -> None:
    session = uuid.uuid4().hex
    reply = send(table, "upside", session=session, messages=image_message(HARD))
    assert reply.status == 200, reply.body
    assert (reply.headers["X-GoModel-Pro-Tier"], reply.headers["X-GoModel-Target"]) == ("easy", "primary")
    assert reply.headers["X-GoModel-Pro-Tier-Escalated"] == "capability"
    tier = audit_events[0]["tier"]
    assert (tier["escalation"], tier["escalated"]) == ("capability", False)  # the pin did not move
    assert pin(session, "upside") == "hard"


@pytest.mark.parametrize("inbound", ["openai", "anthropic"])
def test_no_tier_can_serve_it_is_a_400_naming_the_capability_in_the_clients_envelope(
        sim: SimulatorServer, table: RoutingTable, inbound: str) -> None:
    if inbound == "anthropic":
        image = {"type": "image", "source": {"type": "base64", "media_type": "image/png", "data": "iVBORw0KGgo="}}
        messages = [{"role": "user", "content": [{"type": "text", "text": "what is this?"}, image]}]
    else:
        messages = image_message()
    reply = run(answer(request(table, "blind", inbound=inbound, messages=messages)))  # type: ignore[arg-type]
    assert reply.status == 400
    body = reply.json()
    if inbound == "anthropic":
        assert body["type"] == "error"
        message = body["error"]["message"]
    else:
        assert body["error"]["code"] == "unsupported_capability"
        assert body["error"]["param"] == "messages[0].content[1]"
        message = body["error"]["message"]
    assert "No tier of `blind` can serve this request" in message
    assert "`image`" in message
    assert sim.received() == []


def test_a_forced_tier_is_not_second_guessed(sim: SimulatorServer, table: RoutingTable) -> None:
    reply = send(table, "vision", headers={"X-GoModel-Tier": "easy"}, messages=image_message())
    assert reply.status == 400
    assert "image" in reply.error["message"]
    assert "X-GoModel-Pro-Tier-Escalated" not in reply.headers
    assert sim.received() == []


def test_the_body_is_scanned_once_for_the_tier_and_the_attempts(
        sim: SimulatorServer, table: RoutingTable, monkeypatch: pytest.MonkeyPatch) -> None:
    from routing.gateway import records

    scanned: list[str] = []

    def counting(inbound: Any, body: Any) -> dict[str, str]:
        scanned.append(inbound)
        return required_capabilities(inbound, body)

    monkeypatch.setattr(records, "required_capabilities", counting)
    reply = send(table, "vision", messages=image_message())
    assert reply.status == 200, reply.body
    assert reply.headers["X-GoModel-Pro-Tier-Escalated"] == "capability"
    assert scanned == ["openai"]


def test_explain_shows_the_escalation_and_leaves_the_pin_alone(
        sim: SimulatorServer, table: RoutingTable) -> None:
    session = uuid.uuid4().hex
    out = run(explain_call(request(table, "vision", headers={"X-Session-Id": session}, messages=image_message())))
    assert (out["tier"]["verdict_tier"], out["tier"]["tier"]) == ("easy", "hard")
    assert out["tier"]["escalation"] == "capability"
    assert out["tier"]["capability_missing"] == {"easy": ["image"]}
    assert out["target"] == "primary"
    assert pin(session, "vision") is None
    with pytest.raises(GatewayError) as caught:
        run(explain_call(request(table, "blind", messages=image_message())))
    assert (caught.value.status, caught.value.code) == (400, "unsupported_capability")

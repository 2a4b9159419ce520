"""Smart tier routing in process: the verdict headers, the escalate-only session pin and the overrides.

The tier route ``normal`` sends easy requests to ``primary`` and hard ones to the ``pair`` pool.
"""

from __future__ import annotations

import uuid
from typing import Any

from routing.core.table import RoutingTable, SettingsInForce
from routing.gateway.state import GatewayState
from routing.gateway.tiers import TIER_PIN_NAMESPACE
from routing.simulator import SimulatorServer
from tests.gateway import support
from tests.gateway.support import Reply, answer, request, routing_table, run

simulator, sim, table, fresh_state = support.simulator, support.sim, support.table, support.fresh_state

HARD = "Think step by step about why the build fails"


def ask(table: RoutingTable, text: str, *, session: str | None = None, **headers: str) -> Reply:
    all_headers = {name.replace("_", "-"): value for name, value in headers.items()}
    if session:
        all_headers["X-Session-Id"] = session
    reply = run(answer(request(table, "normal", text, headers=all_headers)))
    assert reply.status == 200, reply.body
    return reply


def tier(reply: Reply) -> tuple[str, str, int]:
    headers = reply.headers
    return headers["X-GoModel-Pro-Tier"], headers["X-GoModel-Pro-Tier-Target"], int(headers["X-GoModel-Pro-Tier-Score"])


def test_a_short_chat_is_easy_and_an_effort_keyword_is_hard(
        sim: SimulatorServer, table: RoutingTable, audit_events: list[dict[str, Any]]) -> None:
    easy = ask(table, "hi there")
    assert tier(easy) == ("easy", "primary", 0)
    assert easy.headers["X-GoModel-Target"] == "primary"
    hard = ask(table, HARD)
    assert tier(hard) == ("hard", "pair", 4)
    assert hard.headers["X-GoModel-Target"] == "primary"  # the pool's failover pick
    signals = audit_events[1]["tier"]["signals"]
    assert [(s["name"], s["points"]) for s in signals] == [("keywords", 4)]


def test_the_session_pin_only_escalates(sim: SimulatorServer, table: RoutingTable,
                                        audit_events: list[dict[str, Any]]) -> None:
    session = uuid.uuid4().hex
    assert tier(ask(table, "hello", session=session))[0] == "easy"
    assert tier(ask(table, HARD, session=session))[0] == "hard"
    thanks = ask(table, "thanks!", session=session)
    assert tier(thanks) == ("hard", "pair", 0)  # pinned: a follow-up never drops to the cheap tier
    recorded = [(e["tier"]["tier"], e["tier"]["pin_before"], e["tier"]["escalated"], e["tier"]["pinned"])
                for e in audit_events]
    assert recorded[1][:3] == ("hard", "easy", True)
    assert recorded[2][:2] == ("hard", "hard")
    assert recorded[2][3]
    # Another session is not affected by this one's pin.
    assert tier(ask(table, "thanks!", session=uuid.uuid4().hex))[0] == "easy"


def test_a_forced_tier_leaves_the_pin_alone(sim: SimulatorServer, table: RoutingTable,
                                            fresh_state: GatewayState) -> None:
    session = uuid.uuid4().hex
    ask(table, HARD, session=session)
    forced = ask(table, "thanks", session=session, X_GoModel_Tier="easy")
    assert tier(forced)[:2] == ("easy", "primary")
    assert tier(ask(table, "thanks", session=session))[0] == "hard"  # the forced request changed nothing


def test_smart_routing_off_uses_the_pin_or_the_easy_tier_without_classifying(
        sim: SimulatorServer, table: RoutingTable, fresh_state: GatewayState) -> None:
    assert tier(ask(table, HARD, session="never-pinned", X_GoModel_Smart_Routing="off"))[0] == "easy"
    session = uuid.uuid4().hex
    ask(table, HARD, session=session)
    assert tier(ask(table, "hi", session=session, X_GoModel_Smart_Routing="off"))[0] == "hard"
    never = request(table, "normal", headers={"X-Session-Id": "never-pinned"}).session.value
    assert run(fresh_state.pins.get(TIER_PIN_NAMESPACE, f"normal|{never}")) is None  # bypassing writes no pin
    pinned = request(table, "normal", headers={"X-Session-Id": session}).session.value
    assert run(fresh_state.pins.get(TIER_PIN_NAMESPACE, f"normal|{pinned}")) == "hard"


def test_a_bad_tier_header_is_400_without_an_upstream_call(sim: SimulatorServer, table: RoutingTable) -> None:
    reply = run(answer(request(table, "normal", "x", headers={"X-GoModel-Tier": "medium"})))
    assert reply.status == 400
    assert reply.error["param"] == "X-GoModel-Tier"
    assert sim.received() == []


def test_with_smart_routing_disabled_every_request_goes_to_the_easy_target(sim: SimulatorServer) -> None:
    disabled = routing_table(sim.base_url, settings=SettingsInForce(smart_routing_enabled=False))
    assert tier(ask(disabled, HARD))[:2] == ("easy", "primary")


def test_an_operator_threshold_decides_what_is_hard(sim: SimulatorServer) -> None:
    strict = routing_table(sim.base_url, settings=SettingsInForce(smart_routing_threshold=10))
    assert tier(ask(strict, HARD)) == ("easy", "primary", 4)

"""The attempt loop in process: retries, fallbacks, cooldowns, the deadline and validation, against the simulator.

Each fault is scripted on the simulator, so the gateway meets real 429s, 5xx, held connections, refused
connections and bad answers on a real socket; what it decided is read from the reply, the audit event and
the per-process health state.
"""

from __future__ import annotations

import dataclasses
import json
import time
import urllib.parse
from typing import Any

import pytest

from routing.clients import upstream
from routing.core.table import RoutingTable, SettingsInForce
from routing.gateway.state import GatewayState
from routing.simulator import SimulatorServer, unused_loopback_url
from tests.gateway import support
from tests.gateway.support import SCHEMA_FORMAT, answer, attempts_of, counted, request, routing_table, run

simulator, sim, table, fresh_state = support.simulator, support.sim, support.table, support.fresh_state


def test_it_falls_back_on_a_429_and_cools_the_target_for_its_retry_after(
        sim: SimulatorServer, table: RoutingTable, fresh_state: GatewayState,
        audit_events: list[dict[str, Any]]) -> None:
    sim.set_fault("primary", {"kind": "rate_limit", "retry_after": 40, "times": 1})
    cooldowns_before = counted("gomodel_pro_routing_cooldowns_total", target="primary", reason="rate_limited")

    reply = run(answer(request(table, "pair")))

    assert reply.status == 200
    assert (reply.headers["X-GoModel-Target"], reply.headers["X-GoModel-Attempts"]) == ("secondary", "2")
    [event] = audit_events
    assert attempts_of(event) == [("primary", "rate_limited", "fallback", "not_run"),
                                  ("secondary", "ok", "accepted", "accepted")]
    cooled = event["attempts"][0]["health"]
    assert cooled["status"] == "cooling"
    assert cooled["cooldown_until"] > time.time() + 30  # the provider's 40 s, longer than the 30 s base
    assert fresh_state.health.get("primary").status(time.monotonic()) == "cooling"
    assert counted("gomodel_pro_routing_cooldowns_total", target="primary",
                   reason="rate_limited") == cooldowns_before + 1

    # The fault is gone, but the cooldown holds: the next request does not try the primary.
    again = run(answer(request(table, "pair", "and again")))
    assert (again.headers["X-GoModel-Target"], again.headers["X-GoModel-Attempts"]) == ("secondary", "1")
    assert len(sim.received("primary")) == 1


def test_a_cooled_target_gets_traffic_again_once_its_cooldown_is_over(
        sim: SimulatorServer, fresh_state: GatewayState) -> None:
    short = routing_table(sim.base_url, settings=SettingsInForce(cooldown_base_s=0.2, cooldown_max_s=1.0))
    sim.set_fault("primary", {"kind": "rate_limit", "retry_after": None, "times": 1})

    async def scenario() -> None:
        assert (await support.answer(request(short, "pair"))).headers["X-GoModel-Target"] == "secondary"
        health = fresh_state.health.get("primary")
        await support.eventually(lambda: health.status(time.monotonic()) != "cooling", what="the cooldown's end")
        back = await support.answer(request(short, "pair", "later"))
        assert (back.headers["X-GoModel-Target"], back.headers["X-GoModel-Attempts"]) == ("primary", "1")
        assert health.status(time.monotonic()) == "healthy"  # the probe succeeded and closed the breaker

    run(scenario())


@pytest.mark.parametrize(("status", "reason"), [(500, "server_error"), (503, "overloaded")])
def test_it_falls_back_on_a_5xx_and_cools_the_target_after_three_in_a_row(
        sim: SimulatorServer, table: RoutingTable, fresh_state: GatewayState,
        audit_events: list[dict[str, Any]], status: int, reason: str) -> None:
    sim.set_fault("primary", {"kind": "status", "status": status})
    for turn in range(3):
        reply = run(answer(request(table, "pair", f"turn {turn}")))
        assert (reply.status, reply.headers["X-GoModel-Target"]) == (200, "secondary")
        assert attempts_of(audit_events[turn])[0] == ("primary", reason, "fallback", "not_run")
    health_after = [event["attempts"][0]["health"]["status"] for event in audit_events]
    assert health_after == ["healthy", "healthy", "cooling"]  # one 5xx is a blip; three in a row are not
    assert fresh_state.health.get("primary").consecutive_failures == 3


def _refuse_the_first_connection(monkeypatch: pytest.MonkeyPatch) -> list[str]:
    """Send the first upstream request to a port nobody listens on (a real ECONNREFUSED), the rest as built."""
    real_send = upstream.send
    refused = urllib.parse.urlsplit(unused_loopback_url()).netloc
    sent: list[str] = []

    async def send(request: upstream.UpstreamRequest) -> Any:
        sent.append(request.url)
        if len(sent) == 1:
            request = dataclasses.replace(request, url=urllib.parse.urlsplit(request.url)._replace(
                netloc=refused).geturl())
        return await real_send(request)

    monkeypatch.setattr(upstream, "send", send)
    return sent


def test_an_early_connect_failure_is_retried_on_the_same_target(
        sim: SimulatorServer, table: RoutingTable, monkeypatch: pytest.MonkeyPatch,
        audit_events: list[dict[str, Any]]) -> None:
    sent = _refuse_the_first_connection(monkeypatch)
    retries_before = counted("gomodel_retries_total", reason="connect_error")

    reply = run(answer(request(table, "pair")))

    assert (reply.status, reply.headers["X-GoModel-Target"], reply.headers["X-GoModel-Attempts"]) == (
        200, "primary", "2")
    assert len(sent) == 2
    assert len(sim.received("primary")) == 1
    assert attempts_of(audit_events[0]) == [("primary", "connect_error", "retry_same", "not_run"),
                                            ("primary", "ok", "accepted", "accepted")]
    assert counted("gomodel_retries_total", reason="connect_error") == retries_before + 1


def test_a_target_that_refuses_every_connection_is_retried_once_then_left(
        sim: SimulatorServer, table: RoutingTable, audit_events: list[dict[str, Any]]) -> None:
    reply = run(answer(request(table, "dead-pair")))
    assert (reply.status, reply.headers["X-GoModel-Target"]) == (200, "secondary")
    assert attempts_of(audit_events[0]) == [("unreachable", "connect_error", "retry_same", "not_run"),
                                            ("unreachable", "connect_error", "fallback", "not_run"),
                                            ("secondary", "ok", "accepted", "accepted")]


def test_a_deadline_that_runs_out_is_504_without_a_fallback_that_could_not_finish(
        sim: SimulatorServer, table: RoutingTable, audit_events: list[dict[str, Any]]) -> None:
    sim.set_fault("primary", {"kind": "timeout", "seconds": 30})
    exhausted_before = counted("gomodel_deadline_exhausted_total")

    reply = run(answer(request(table, "pair", headers={"X-GoModel-Deadline-Ms": "600"})))

    assert reply.status == 504
    assert reply.error["code"] == "timeout"
    assert "deadline ran out" in reply.error["message"]
    assert sim.received("secondary") == []  # a cold fallback needs more than what was left
    [event] = audit_events
    assert event["deadline_ms"] == 600
    assert event["status"] == 504
    assert attempts_of(event) == [("primary", "timeout", "gave_up", "not_run")]
    assert counted("gomodel_deadline_exhausted_total") == exhausted_before + 1
    sim.wait_until_idle()  # the gateway hung up at its deadline instead of waiting out the 30 s hold
    assert sim.received("primary")[0]["outcome"] == "disconnected"


def test_every_target_cooling_is_503_with_retry_after_and_no_upstream_call(
        sim: SimulatorServer, table: RoutingTable, audit_events: list[dict[str, Any]]) -> None:
    for name in ("primary", "secondary"):
        sim.set_fault(name, {"kind": "rate_limit", "retry_after": 30})

    first = run(answer(request(table, "pair")))
    assert first.status == 503
    assert first.headers["Retry-After"] == "30"
    assert first.error["code"] == "rate_limited"
    assert attempts_of(audit_events[0]) == [("primary", "rate_limited", "fallback", "not_run"),
                                            ("secondary", "rate_limited", "gave_up", "not_run")]

    for model in ("pair", "primary"):  # through a virtual model's plan, and a concrete model's breaker
        cooling = run(answer(request(table, model, "once more")))
        assert cooling.status == 503, model
        assert cooling.error["code"] == "all_targets_cooling"
        assert 1 <= int(cooling.headers["Retry-After"]) <= 30
    assert len(sim.received()) == 2  # only the first request reached the provider
    assert [e["attempts"] for e in audit_events[1:]] == [[], []]


def test_an_answer_that_breaks_the_requested_schema_is_refused_and_the_fallback_answers(
        sim: SimulatorServer, table: RoutingTable, audit_events: list[dict[str, Any]]) -> None:
    sim.set_fault("primary", {"kind": "schema_violation"})
    rejections_before = counted("gomodel_validation_rejections_total", reason="schema")

    reply = run(answer(request(table, "pair", "Grace Hopper", response_format=SCHEMA_FORMAT)))

    assert (reply.status, reply.headers["X-GoModel-Target"]) == (200, "secondary")
    assert "name" in json.loads(reply.json()["choices"][0]["message"]["content"])
    assert attempts_of(audit_events[0]) == [("primary", "schema", "fallback", "rejected:schema"),
                                            ("secondary", "ok", "accepted", "accepted")]
    assert audit_events[0]["attempts"][0]["error_class"] == "invalid_response"
    assert counted("gomodel_validation_rejections_total", reason="schema") == rejections_before + 1


def test_a_malformed_answer_is_refused_and_the_fallback_answers(
        sim: SimulatorServer, table: RoutingTable, audit_events: list[dict[str, Any]]) -> None:
    sim.set_fault("primary", {"kind": "malformed_json", "times": 1})
    reply = run(answer(request(table, "pair")))
    assert (reply.status, reply.headers["X-GoModel-Target"]) == (200, "secondary")
    assert attempts_of(audit_events[0])[0] == ("primary", "malformed", "fallback", "rejected:malformed")


def test_a_context_overflow_falls_back_without_cooling_the_target(
        sim: SimulatorServer, table: RoutingTable, fresh_state: GatewayState,
        audit_events: list[dict[str, Any]]) -> None:
    sim.set_fault("primary", {"kind": "context_overflow", "times": 1})
    reply = run(answer(request(table, "pair")))
    assert (reply.status, reply.headers["X-GoModel-Target"]) == (200, "secondary")
    assert audit_events[0]["attempts"][0]["error_class"] == "incompatible"
    health = fresh_state.health.get("primary")
    assert health.status(time.monotonic()) == "healthy"
    assert health.consecutive_failures == 0


def test_one_fallback_at_most_by_default(
        sim: SimulatorServer, table: RoutingTable, audit_events: list[dict[str, Any]]) -> None:
    for name in ("primary", "secondary"):
        sim.set_fault(name, {"kind": "status", "status": 500})
    reply = run(answer(request(table, "nested")))  # pair (primary, secondary), then third
    assert reply.status == 502
    assert reply.error["code"] == "server_error"
    assert [a[0] for a in attempts_of(audit_events[0])] == ["primary", "secondary"]
    assert sim.received("third") == []

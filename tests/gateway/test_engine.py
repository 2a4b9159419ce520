"""The engine end to end in process: resolve, plan, attempt, respond, with the simulator as the upstream.

The retry and fallback decisions of the attempt loop are in test_attempt_loop.py; tiers, streams and
explanations have their own files.
"""

from __future__ import annotations

import asyncio
import json
import threading
import uuid
from typing import Any

import pytest

from routing.core.table import RoutingTable
from routing.gateway import engine
from routing.schema import engine as schema_engine
from routing.simulator import SimulatorServer
from tests.gateway import support
from tests.gateway.support import LIMITED_KEY, SCHEMA_FORMAT, answer, attempts_of, eventually, request, run

simulator, sim, table, fresh_state = support.simulator, support.sim, support.table, support.fresh_state


def test_it_answers_a_concrete_model_with_the_decision_headers(
        sim: SimulatorServer, table: RoutingTable, audit_events: list[dict[str, Any]]) -> None:
    call = request(table, "primary", "what is the capital of France?")
    reply = run(answer(call))

    assert reply.status == 200
    assert reply.headers["X-GoModel-Target"] == "primary"
    assert reply.headers["X-GoModel-Attempts"] == "1"
    assert reply.headers["X-Request-Id"] == call.request_id
    assert "X-GoModel-Pro-Tier" not in reply.headers  # not a tier alias
    content = reply.json()["choices"][0]["message"]["content"]
    assert "what is the capital of France?" in content  # the simulator's echo came through
    assert reply.json()["model"] == "primary"  # the public name, not the upstream's

    [received] = sim.received("primary")
    usage = received["usage"]
    cost = (usage["input_tokens"] * 1.0 + usage["output_tokens"] * 2.0) / 1_000_000
    assert float(reply.headers["X-GoModel-Cost-Usd"]) == round(cost, 8)

    [event] = audit_events
    assert event["request_id"] == call.request_id
    assert event["status"] == 200
    assert event["target"] == "primary"
    assert attempts_of(event) == [("primary", "ok", "accepted", "accepted")]
    assert event["usage"]["input_tokens"] == usage["input_tokens"]
    assert event["usage"]["output_tokens"] == usage["output_tokens"]
    assert event["selection"] is None  # a concrete model involves no choice
    assert event["session_hash"] is None  # ... and no session detection


def test_it_translates_an_anthropic_client_to_an_openai_provider(sim: SimulatorServer, table: RoutingTable) -> None:
    reply = run(answer(request(table, "primary", "bonjour", inbound="anthropic")))
    assert reply.status == 200
    message = reply.json()
    assert message["type"] == "message"
    assert message["role"] == "assistant"
    assert "bonjour" in message["content"][0]["text"]
    assert sim.received("primary")[0]["wire"] == "openai"


def test_it_answers_a_virtual_model_through_its_strategy(
        sim: SimulatorServer, table: RoutingTable, audit_events: list[dict[str, Any]]) -> None:
    reply = run(answer(request(table, "pair")))
    assert reply.status == 200
    assert reply.headers["X-GoModel-Target"] == "primary"
    selection = audit_events[0]["selection"]
    assert selection["virtual_model"] == "pair"
    assert selection["strategy"] == "failover"
    assert selection["winner"] == "primary"
    assert audit_events[0]["session_hash"] is not None  # a choice to make: the session was detected
    assert sim.received("secondary") == []


def test_an_unknown_model_is_404_without_an_upstream_call(
        sim: SimulatorServer, table: RoutingTable, audit_events: list[dict[str, Any]]) -> None:
    reply = run(answer(request(table, "no-such-model")))
    assert reply.status == 404
    assert reply.error["code"] == "model_not_found"
    assert reply.error["param"] == "model"
    assert sim.received() == []
    assert audit_events[0]["status"] == 404
    assert audit_events[0]["attempts"] == []


def test_a_key_limited_to_some_models_gets_403_for_another(sim: SimulatorServer, table: RoutingTable) -> None:
    refused = run(answer(request(table, "secondary", key=LIMITED_KEY)))
    assert refused.status == 403
    assert refused.error["code"] == "model_not_allowed"
    allowed = run(answer(request(table, "primary", key=LIMITED_KEY)))
    assert allowed.status == 200
    assert [r["model"] for r in sim.received()] == ["primary"]


def test_an_unknown_workload_is_400_in_the_anthropic_envelope(sim: SimulatorServer, table: RoutingTable) -> None:
    reply = run(answer(request(table, "pair", inbound="anthropic", headers={"X-GoModel-Workload": "nope"})))
    assert reply.status == 400
    assert reply.json()["type"] == "error"
    assert "X-GoModel-Workload" in reply.error["message"]
    assert sim.received() == []


def test_a_malformed_deadline_header_is_400(sim: SimulatorServer, table: RoutingTable) -> None:
    for value in ("soon", "50", "-1"):
        reply = run(answer(request(table, "primary", headers={"X-GoModel-Deadline-Ms": value})))
        assert reply.status == 400, value
        assert reply.error["param"] == "X-GoModel-Deadline-Ms"
    assert sim.received() == []


def test_an_invalid_response_schema_is_400_before_any_attempt(sim: SimulatorServer, table: RoutingTable) -> None:
    bad_format = {"type": "json_schema", "json_schema": {"name": "p", "schema": {"type": "no-such-type"}}}
    reply = run(answer(request(table, "primary", response_format=bad_format)))
    assert reply.status == 400
    assert reply.error["param"] == "response_format"
    assert sim.received() == []


def test_a_request_no_model_can_serve_is_400_naming_why(sim: SimulatorServer, table: RoutingTable) -> None:
    image = [{"type": "text", "text": "what is this?"},
             {"type": "image_url", "image_url": {"url": "data:image/png;base64,iVBORw0KGgo="}}]
    reply = run(answer(request(table, "text-only", messages=[{"role": "user", "content": image}])))
    assert reply.status == 400
    assert reply.error["code"] == "unsupported_capability"
    assert "image" in reply.error["message"]
    assert sim.received() == []


def test_the_workload_contract_sets_the_deadline_and_is_recorded(
        sim: SimulatorServer, table: RoutingTable, audit_events: list[dict[str, Any]]) -> None:
    call = request(table, "pair", "Ada Lovelace", headers={"X-GoModel-Workload": "extract"},
                   response_format=SCHEMA_FORMAT)
    reply = run(answer(call))
    assert reply.status == 200
    assert "name" in json.loads(reply.json()["choices"][0]["message"]["content"])
    [event] = audit_events
    assert event["workload"] == "extract"
    assert event["deadline_ms"] == 5000


def test_a_plain_text_answer_cannot_meet_a_structured_output_contract(
        sim: SimulatorServer, table: RoutingTable, audit_events: list[dict[str, Any]]) -> None:
    reply = run(answer(request(table, "pair", headers={"X-GoModel-Workload": "extract"})))
    assert reply.status == 502
    assert [(a[0], a[3]) for a in attempts_of(audit_events[0])] == [
        ("primary", "rejected:schema"), ("secondary", "rejected:schema")]


def test_the_client_s_own_mistake_is_relayed_with_the_provider_s_message(
        sim: SimulatorServer, table: RoutingTable, audit_events: list[dict[str, Any]]) -> None:
    sim.set_fault("primary", {"kind": "status", "status": 400, "message": "temperature must be at most 2"})
    reply = run(answer(request(table, "pair", temperature=7)))
    assert reply.status == 400
    assert "temperature must be at most 2" in reply.error["message"]
    assert sim.received("secondary") == []  # a permanent error is not retried elsewhere
    assert attempts_of(audit_events[0]) == [("primary", "bad_request", "returned_to_client", "not_run")]


def test_a_request_whose_client_hangs_up_is_still_audited(
        sim: SimulatorServer, table: RoutingTable, audit_events: list[dict[str, Any]]) -> None:
    sim.set_fault("primary", {"kind": "timeout", "seconds": 30})
    call = request(table, "primary")

    async def hang_up() -> None:
        task = asyncio.ensure_future(engine.handle(call))
        await eventually(lambda: bool(sim.received("primary")), what="the attempt's arrival upstream")
        task.cancel()
        with pytest.raises(asyncio.CancelledError):
            await task

    run(hang_up())
    [event] = audit_events
    assert (event["request_id"], event["status"], event["error_class"]) == (call.request_id, 499, "ambiguous")
    assert [a["target"] for a in event["attempts"]] == ["primary"]


def test_a_new_response_schema_is_checked_off_the_event_loop(
        sim: SimulatorServer, table: RoutingTable, monkeypatch: pytest.MonkeyPatch) -> None:
    compiled_in: list[str] = []
    original = schema_engine._compile

    def recording_compile(schema: Any) -> Any:
        compiled_in.append(threading.current_thread().name)
        return original(schema)

    monkeypatch.setattr(schema_engine, "_compile", recording_compile)
    # A schema no other test uses (its content is its cache key), so the first request must compile it.
    fields = {f"field_{n}_{uuid.uuid4().hex[:6]}": {"type": "string"} for n in range(40)}
    schema_format = {"type": "json_schema", "json_schema": {"name": "wide", "schema": {
        "type": "object", "properties": fields}}}

    async def twice() -> tuple[int, int, str]:
        loop_thread = threading.current_thread().name
        first = await answer(request(table, "primary", response_format=schema_format))
        second = await answer(request(table, "primary", response_format=schema_format))
        return first.status, second.status, loop_thread

    first, second, loop_thread = run(twice())
    assert (first, second) == (200, 200)
    assert len(compiled_in) == 1, compiled_in  # the second request found it compiled
    assert compiled_in[0] != loop_thread  # ... and the first compiled it in a worker thread

"""Answering the client (routing.gateway.client_answer): relayed streams, their usage and outcome, JSON extras.

A stream is committed to once its first frames exist; what it cost, how it ended and whether it passed
validation are booked when it ends, fails or the client goes away. Each case reads the frames as the relay
handler does and checks what the audit event recorded.
"""

from __future__ import annotations

import json
import time
import uuid
from typing import Any

from routing.core.table import RoutingTable
from routing.gateway import engine
from routing.gateway.client_answer import RelayStream
from routing.gateway.state import GatewayState
from routing.simulator import SimulatorServer
from tests.gateway import support
from tests.gateway.support import SCHEMA_FORMAT, answer, attempts_of, request, run

simulator, sim, table, fresh_state = support.simulator, support.sim, support.table, support.fresh_state

TOOL = {"type": "function", "function": {"name": "lookup", "parameters": {
    "type": "object", "properties": {"q": {"type": "string"}}, "required": ["q"]}}}


def test_a_stream_is_relayed_to_its_end_and_its_usage_recorded(
        sim: SimulatorServer, table: RoutingTable, audit_events: list[dict[str, Any]]) -> None:
    call = request(table, "primary", "tell me a story", stream=True, stream_options={"include_usage": True})
    reply = run(answer(call))

    assert reply.status == 200
    assert reply.headers["Content-Type"] == "text/event-stream"
    assert reply.headers["Cache-Control"] == "no-cache"
    assert reply.headers["X-GoModel-Target"] == "primary"
    assert reply.headers["X-Request-Id"] == call.request_id
    assert reply.events[-1] == "[DONE]"
    chunks = [json.loads(event) for event in reply.events[:-1]]
    text = "".join(c["choices"][0]["delta"].get("content") or "" for c in chunks if c["choices"])
    assert "tell me a story" in text
    streamed_usage = chunks[-1]["usage"]

    [received] = sim.received("primary")
    assert received["stream"]
    assert received["outcome"] == "completed"
    [event] = audit_events
    assert event["stream"]
    assert event["status"] == 200
    assert event["output_text"] == text
    assert event["usage"]["input_tokens"] == received["usage"]["input_tokens"] == streamed_usage["prompt_tokens"]
    assert event["usage"]["output_tokens"] == received["usage"]["output_tokens"] == streamed_usage[
        "completion_tokens"]
    assert event["cost_usd"] > 0
    assert event["ttfb_ms"] is not None
    assert attempts_of(event) == [("primary", "ok", "accepted", "accepted")]


def test_an_anthropic_client_gets_anthropic_events_from_an_openai_provider(
        sim: SimulatorServer, table: RoutingTable, audit_events: list[dict[str, Any]]) -> None:
    reply = run(answer(request(table, "primary", "hola", inbound="anthropic", stream=True)))
    kinds = [json.loads(event)["type"] for event in reply.events]
    assert kinds[0] == "message_start"
    assert kinds[-1] == "message_stop"
    assert "content_block_delta" in kinds
    received = sim.received("primary")[0]
    assert received["wire"] == "openai"
    assert audit_events[0]["usage"]["output_tokens"] == received["usage"]["output_tokens"]


def test_a_stream_cut_before_its_first_byte_is_replaced_by_the_fallback(
        sim: SimulatorServer, table: RoutingTable, audit_events: list[dict[str, Any]]) -> None:
    sim.set_fault("primary", {"kind": "stream_cut", "after_chunks": 0, "times": 1})
    reply = run(answer(request(table, "pair", stream=True)))
    assert (reply.status, reply.headers["X-GoModel-Target"]) == (200, "secondary")
    assert reply.events[-1] == "[DONE]"
    assert [a[:3] for a in attempts_of(audit_events[0])] == [("primary", "stream_cut", "fallback"),
                                                             ("secondary", "ok", "accepted")]


def test_a_stream_cut_after_its_first_bytes_ends_with_an_error_event_and_no_fallback(
        sim: SimulatorServer, table: RoutingTable, audit_events: list[dict[str, Any]]) -> None:
    sim.set_fault("primary", {"kind": "stream_cut", "after_chunks": 2, "times": 1})
    reply = run(answer(request(table, "pair", stream=True)))
    assert (reply.status, reply.headers["X-GoModel-Target"]) == (200, "primary")
    assert "error" in json.loads(reply.events[-1])  # a well-formed error event in OpenAI's stream format
    assert sim.received("secondary") == []  # bytes reached the client: nothing may replace them
    [event] = audit_events
    assert event["error_class"] == "ambiguous"
    assert attempts_of(event) == [("primary", "stream_cut", "gave_up", "not_run")]


def test_a_client_that_goes_away_mid_stream_stops_the_upstream_and_frees_the_target(
        sim: SimulatorServer, table: RoutingTable, fresh_state: GatewayState,
        audit_events: list[dict[str, Any]]) -> None:
    async def scenario() -> None:
        response = await engine.handle(request(table, "slow-stream", stream=True))
        assert isinstance(response, RelayStream)
        frames = response.source
        assert await frames.__anext__()
        await frames.aclose()  # what the relay handler does when the client disconnects

    run(scenario())
    [event] = audit_events
    assert attempts_of(event) == [("slow-stream", "client_disconnected", "gave_up", "not_run")]
    assert fresh_state.health.get("slow-stream").in_flight == 0
    assert fresh_state.health.get("slow-stream").consecutive_failures == 0  # the client's leaving is no fault
    sim.wait_until_idle()
    assert sim.received("slow-stream")[0]["outcome"] == "disconnected"


def test_a_streamed_answer_that_breaks_the_schema_is_recorded_as_rejected(
        sim: SimulatorServer, table: RoutingTable, audit_events: list[dict[str, Any]]) -> None:
    sim.set_fault("primary", {"kind": "schema_violation"})
    reply = run(answer(request(table, "primary", stream=True, response_format=SCHEMA_FORMAT)))
    assert reply.status == 200
    assert reply.events[-1] == "[DONE]"
    assert audit_events[0]["validation"] == "rejected:schema"


def test_a_tool_call_answer_carries_its_execution_keys(sim: SimulatorServer, table: RoutingTable) -> None:
    reply = run(answer(request(table, "primary", "look it up", tools=[TOOL], tool_choice="required")))
    [call] = reply.json()["choices"][0]["message"]["tool_calls"]
    [key] = json.loads(reply.headers["X-GoModel-Execution-Keys"])
    assert (key["tool_call_id"], key["name"]) == (call["id"], "lookup")
    assert key["execution_key"].count(":") >= 2


def test_a_success_through_a_virtual_model_warms_the_session(
        sim: SimulatorServer, table: RoutingTable, fresh_state: GatewayState) -> None:
    call = request(table, "pair", headers={"X-Session-Id": uuid.uuid4().hex})
    assert run(answer(call)).status == 200
    assert fresh_state.warm.get(call.session.value, time.monotonic()) == "primary"

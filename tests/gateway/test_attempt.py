"""One upstream attempt against the simulator: send, read, classify, validate (routing.gateway.attempt).

The attempt loop decides what happens next (test_attempt_loop.py); here each outcome is checked as the
single attempt reports it, for JSON and for a stream up to its first client frames.
"""

from __future__ import annotations

import json
from typing import Any

import pytest

from routing.core.contracts import effective_contract
from routing.core.features import extract_features
from routing.core.outcome import ErrorClass
from routing.core.requirements import requirements_from_features
from routing.core.table import RoutingTable
from routing.gateway.attempt import AttemptResult, AttemptSpec, LiveStream, run_json_attempt, start_stream_attempt
from routing.gateway.attempt_loop import validation_rules
from routing.providers.errors import Inbound
from routing.simulator import SimulatorServer
from tests.gateway import support
from tests.gateway.support import SCHEMA_FORMAT, run

simulator, sim, table, fresh_state = support.simulator, support.sim, support.table, support.fresh_state


def spec(table: RoutingTable, model: str, *, stream: bool = False, timeout_s: float = 10.0,
         inbound: Inbound = "openai", **extra: Any) -> AttemptSpec:
    body: dict[str, Any] = {"model": model, "messages": [{"role": "user", "content": "hello there"}], **extra}
    if stream:
        body["stream"] = True
    features = extract_features(body, inbound)
    model_spec = table.models[model]
    provider = table.providers[model_spec.provider]
    key = provider.api_keys[0].reveal() if provider.api_keys else ""
    return AttemptSpec(provider=provider, model=model_spec, body=body, inbound=inbound, stream=stream, api_key=key,
                       timeout_s=timeout_s, rules=validation_rules(effective_contract(
                           requirements_from_features(features), None)), client_wants_usage=True)


def json_attempt(attempt: AttemptSpec) -> AttemptResult:
    return run(run_json_attempt(attempt))


def test_a_good_answer_is_a_success_with_its_usage(sim: SimulatorServer, table: RoutingTable) -> None:
    result = json_attempt(spec(table, "primary"))
    assert result.outcome.ok
    assert result.outcome.status == 200
    assert result.verdict is not None
    assert result.verdict.ok
    assert result.client_body is not None
    assert result.client_body["model"] == "primary"
    [received] = sim.received("primary")
    assert result.usage is not None
    assert (result.usage.input_tokens, result.usage.output_tokens) == (
        received["usage"]["input_tokens"], received["usage"]["output_tokens"])
    assert result.ttfb_s is not None


def test_the_provider_key_is_sent_and_never_recorded(sim: SimulatorServer, table: RoutingTable) -> None:
    result = json_attempt(spec(table, "claude"))
    assert result.outcome.ok
    [received] = sim.received("claude-sim")
    assert received["wire"] == "anthropic"
    assert received["auth"]["present"]
    assert "sk-simulated" not in json.dumps(received)


@pytest.mark.parametrize(("fault", "error_class", "reason", "status"), [
    ({"kind": "rate_limit", "retry_after": 7}, ErrorClass.TRANSIENT, "rate_limited", 429),
    ({"kind": "status", "status": 500}, ErrorClass.TRANSIENT, "server_error", 500),
    ({"kind": "status", "status": 401}, ErrorClass.INCOMPATIBLE, "auth", 401),
    ({"kind": "context_overflow"}, ErrorClass.INCOMPATIBLE, "context_overflow", 400),
    ({"kind": "status", "status": 400}, ErrorClass.PERMANENT, "bad_request", 400),
])
def test_an_error_answer_is_classified(sim: SimulatorServer, table: RoutingTable, fault: dict[str, Any],
                                       error_class: ErrorClass, reason: str, status: int) -> None:
    sim.set_fault("primary", fault)
    result = json_attempt(spec(table, "primary"))
    assert (result.outcome.error_class, result.outcome.reason, result.outcome.status) == (error_class, reason, status)
    assert result.error_body  # kept for relaying the client's own mistake
    if fault["kind"] == "rate_limit":
        assert result.outcome.retry_after_s == 7


def test_a_bad_answer_is_an_invalid_response(sim: SimulatorServer, table: RoutingTable) -> None:
    sim.set_fault("primary", {"kind": "malformed_json"})
    malformed = json_attempt(spec(table, "primary"))
    assert (malformed.outcome.error_class, malformed.outcome.reason) == (ErrorClass.INVALID_RESPONSE, "malformed")

    sim.set_fault("primary", {"kind": "schema_violation"})
    violating = json_attempt(spec(table, "primary", response_format=SCHEMA_FORMAT))
    assert violating.outcome.error_class is ErrorClass.INVALID_RESPONSE
    assert violating.verdict is not None
    assert violating.verdict.reason == "schema"
    assert violating.client_body is not None  # parsed, then refused by validation


def test_transport_failures_say_where_they_happened(sim: SimulatorServer, table: RoutingTable) -> None:
    refused = json_attempt(spec(table, "unreachable"))
    assert (refused.outcome.error_class, refused.outcome.reason) == (ErrorClass.TRANSIENT, "connect_error")

    sim.set_fault("primary", {"kind": "timeout", "seconds": 30})
    held = json_attempt(spec(table, "primary", timeout_s=0.3))
    assert held.outcome.reason == "timeout"
    assert held.ttfb_s is None

    sim.set_fault("primary", {"kind": "connect_refused"})
    dropped = json_attempt(spec(table, "primary"))
    assert dropped.outcome.error_class is ErrorClass.AMBIGUOUS  # the request reached the provider


def test_a_stream_is_live_once_its_first_content_frames_exist(sim: SimulatorServer, table: RoutingTable) -> None:
    async def scenario() -> tuple[LiveStream, list[bytes]]:
        live = await start_stream_attempt(spec(table, "slow-stream", stream=True))  # chunks 40 ms apart
        assert isinstance(live, LiveStream)
        rest = [chunk async for chunk in live.chunks]
        await live.response.aclose()
        return live, rest

    live, rest = run(scenario())
    first = b"".join(live.first_frames).decode()
    assert '"content"' in first  # held back until a frame carries content
    assert b"[DONE]" not in live.first_frames[-1]
    assert b"[DONE]" in b"".join(rest)
    assert live.ttfb_s > 0


@pytest.mark.parametrize("fault", [
    {"kind": "stream_cut", "after_chunks": 0},
    {"kind": "stream_error", "after_chunks": 0, "status": 529},
    {"kind": "rate_limit"},
])
def test_a_stream_that_fails_before_any_content_is_a_failed_attempt(
        sim: SimulatorServer, table: RoutingTable, fault: dict[str, Any]) -> None:
    sim.set_fault("primary", fault)
    result = run(start_stream_attempt(spec(table, "primary", stream=True)))
    assert isinstance(result, AttemptResult)  # nothing reached the client: another attempt may replace it
    assert not result.outcome.ok
    assert result.outcome.error_class is ErrorClass.TRANSIENT

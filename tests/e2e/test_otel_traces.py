"""OpenTelemetry traces from a running gateway to an OTLP receiver on loopback (which decodes the protobuf): one
trace per request with the GenAI attributes and the routing decision, one child span per upstream attempt, the
client's traceparent continued, and a receiver that cannot keep up costing counted drops, never a slower request.
"""

from __future__ import annotations

import re
import time
from collections.abc import Iterator
from dataclasses import dataclass
from pathlib import Path
from typing import Any

import httpx2
import openai
import pytest
import yaml
from opentelemetry.proto.trace.v1.trace_pb2 import Span, Status

from routing.simulator.server import SimulatorServer
from tests.e2e.conftest import SIM_KEY, fresh_database
from tests.gateway_process import Gateway, run_gateway
from tests.otlp_receiver import Receiver, attributes, otlp_receiver

pytestmark = pytest.mark.services

TRACE = "4bf92f3577b34da6a3ce929d0e0e4736"
PARENT = "00f067aa0ba902b7"


def _config(sim_url: str) -> dict[str, Any]:
    return {
        "providers": [
            {"name": "sim", "kind": "openai", "base_url": f"{sim_url}/v1", "api_key": "${E2E_SIM_KEY}"},
            {"name": "claude", "kind": "anthropic", "base_url": sim_url, "api_key": "${E2E_SIM_KEY}"},
        ],
        "models": [
            {"provider": "sim", "upstream": "tr-a", "name": "tr-a", "input_price": 1.0, "output_price": 2.0},
            {"provider": "claude", "upstream": "tr-b", "name": "tr-b", "input_price": 1.0, "output_price": 2.0},
        ],
        "virtual_models": [{"source": "tr-pool", "strategy": "failover", "targets": ["tr-a", "tr-b"]}],
        "tier_routes": {"traced": {"easy": "tr-pool", "hard": "tr-b"}},
    }


@dataclass
class Setup:
    gateway: Gateway
    receiver: Receiver
    sim: SimulatorServer
    tmp: Path
    database_url: str

    def client(self) -> openai.OpenAI:
        return openai.OpenAI(base_url=f"{self.gateway.base_url}/v1", api_key="unused-on-loopback", max_retries=0)


def _env(database_url: str, config: Path, **extra: str) -> dict[str, str]:
    return {"DATABASE_URL": database_url, "GOMODEL_CONFIG": str(config), "E2E_SIM_KEY": SIM_KEY,
            "GOMODEL_MASTER_KEY": "", "GOMODEL_AUTH": "open", "CELERY_BROKER_URL": "",
            "OTEL_BSP_SCHEDULE_DELAY": "50", **extra}


@pytest.fixture(scope="module")
def setup(tmp_path_factory: pytest.TempPathFactory) -> Iterator[Setup]:
    tmp = Path(tmp_path_factory.mktemp("otel"))
    with (SimulatorServer(config={"models": {"tr-a": {"latency_ms": 5}, "tr-b": {"latency_ms": 5}}}) as sim,
          otlp_receiver() as receiver, fresh_database("otel") as url):
        config = tmp / "config.yaml"
        config.write_text(yaml.safe_dump(_config(sim.base_url)))
        env = _env(url, config, OTEL_EXPORTER_OTLP_ENDPOINT=receiver.url, OTEL_SERVICE_NAME="gomodel-e2e",
                   OTEL_RESOURCE_ATTRIBUTES="deployment.environment=test",
                   OTEL_EXPORTER_OTLP_HEADERS="authorization=Bearer%20collector-token")
        with run_gateway(tmp, env) as gateway:
            yield Setup(gateway, receiver, sim, tmp, url)


@pytest.fixture
def traced(setup: Setup) -> Iterator[Setup]:
    setup.sim.clear_faults()
    yield setup
    setup.sim.clear_faults()


def _spans_of(receiver: Receiver, request_id: str, count: int) -> tuple[Span, list[Span]]:
    """The request's span (found by its gomodel.request.id) and the spans of its attempts, in order."""
    def root_of(spans: list[Span]) -> Span | None:
        return next((s for s in spans if attributes(s).get("gomodel.request.id") == request_id), None)

    spans = receiver.wait_until(lambda got: (r := root_of(got)) is not None
                                and sum(s.trace_id == r.trace_id for s in got) >= count)
    root = root_of(spans)
    assert root is not None, f"no span for request {request_id}"
    children = [s for s in spans if s.trace_id == root.trace_id and s.span_id != root.span_id]
    assert len(children) == count - 1
    return root, sorted(children, key=lambda s: attributes(s)["gomodel.attempt.seq"])


def test_a_tier_request_is_one_trace_with_the_decision_and_a_span_for_its_attempt(traced: Setup) -> None:
    with traced.client() as client:
        raw = client.chat.completions.with_raw_response.create(
            model="traced", messages=[{"role": "user", "content": "Hello there"}], max_tokens=50)
    request_id = raw.headers["x-request-id"]
    root, (attempt,) = _spans_of(traced.receiver, request_id, 2)

    assert root.name == "chat traced"
    assert root.kind == Span.SPAN_KIND_SERVER
    assert root.parent_span_id == b""
    assert root.status.code == Status.STATUS_CODE_UNSET
    fields = attributes(root)
    assert {key: fields[key] for key in (
        "gen_ai.operation.name", "gen_ai.request.model", "gen_ai.response.model", "gen_ai.provider.name",
        "gen_ai.request.max_tokens", "http.response.status_code", "gomodel.request.endpoint",
        "gomodel.request.stream", "gomodel.tier.alias", "gomodel.tier.name", "gomodel.tier.target",
        "gomodel.routing.virtual_model", "gomodel.routing.strategy", "gomodel.target", "gomodel.attempts")} == {
        "gen_ai.operation.name": "chat", "gen_ai.request.model": "traced", "gen_ai.response.model": "tr-a",
        "gen_ai.provider.name": "openai", "gen_ai.request.max_tokens": 50, "http.response.status_code": 200,
        "gomodel.request.endpoint": "openai", "gomodel.request.stream": False, "gomodel.tier.alias": "traced",
        "gomodel.tier.name": "easy", "gomodel.tier.target": "tr-pool", "gomodel.routing.virtual_model": "tr-pool",
        "gomodel.routing.strategy": "failover", "gomodel.target": "tr-a", "gomodel.attempts": 1,
    }
    assert fields["gomodel.tier.score"] == int(raw.headers["x-gomodel-pro-tier-score"])
    assert fields["gen_ai.usage.input_tokens"] > 0
    assert fields["gen_ai.usage.output_tokens"] > 0
    assert fields["gen_ai.response.finish_reasons"] == ["stop"]
    assert fields["gomodel.cost_usd"] == pytest.approx(float(raw.headers["x-gomodel-cost-usd"]), abs=1e-8)
    assert "error.type" not in fields

    assert attempt.kind == Span.SPAN_KIND_CLIENT
    assert attempt.parent_span_id == root.span_id
    assert attempt.name == "chat tr-a"
    assert root.start_time_unix_nano <= attempt.start_time_unix_nano <= attempt.end_time_unix_nano
    assert attempt.end_time_unix_nano <= root.end_time_unix_nano
    step = attributes(attempt)
    sim_port = int(traced.sim.base_url.rsplit(":", 1)[1])
    assert {key: step[key] for key in (
        "gen_ai.operation.name", "gen_ai.provider.name", "gen_ai.request.model", "gen_ai.response.model",
        "server.address", "server.port", "http.response.status_code", "gomodel.target", "gomodel.provider",
        "gomodel.attempt.seq", "gomodel.attempt.action", "gomodel.attempt.outcome",
        "gen_ai.response.finish_reasons")} == {
        "gen_ai.operation.name": "chat", "gen_ai.provider.name": "openai", "gen_ai.request.model": "tr-a",
        "gen_ai.response.model": "tr-a", "server.address": "127.0.0.1", "server.port": sim_port,
        "http.response.status_code": 200, "gomodel.target": "tr-a", "gomodel.provider": "sim",
        "gomodel.attempt.seq": 1, "gomodel.attempt.action": "accepted", "gomodel.attempt.outcome": "ok",
        "gen_ai.response.finish_reasons": ["stop"],
    }
    assert step["gen_ai.usage.input_tokens"] == fields["gen_ai.usage.input_tokens"]

    export = next(e for e in traced.receiver.exports
                  if any(s.span_id == root.span_id for s in e.request.resource_spans[0].scope_spans[0].spans))
    assert export.path == "/v1/traces"
    assert export.headers["authorization"] == "Bearer collector-token"
    assert export.resource == {"service.name": "gomodel-e2e", "deployment.environment": "test"}
    scope = export.request.resource_spans[0].scope_spans[0]
    assert scope.scope.name == "gomodel"
    assert scope.schema_url == "https://opentelemetry.io/schemas/1.37.0"


def test_a_fallback_is_a_span_per_attempt_and_its_reason_is_on_the_request(traced: Setup) -> None:
    traced.sim.set_fault("tr-a", {"kind": "status", "status": 503, "times": 1})
    response = httpx2.post(f"{traced.gateway.base_url}/v1/chat/completions", timeout=30, json={
        "model": "tr-pool", "messages": [{"role": "user", "content": "fall back please"}]})
    assert response.status_code == 200
    assert response.headers["x-gomodel-attempts"] == "2"
    root, (first, second) = _spans_of(traced.receiver, response.headers["x-request-id"], 3)

    failed, answered = attributes(first), attributes(second)
    assert (failed["gomodel.target"], failed["gomodel.attempt.action"], failed["http.response.status_code"]) == (
        "tr-a", "fallback", 503)
    assert failed["error.type"] == failed["gomodel.attempt.outcome"] == "overloaded"
    assert failed["gomodel.attempt.error_class"] == "transient"
    assert first.status.code == Status.STATUS_CODE_ERROR
    assert (answered["gomodel.target"], answered["gen_ai.provider.name"], answered["gomodel.attempt.action"]) == (
        "tr-b", "anthropic", "accepted")
    assert second.status.code == Status.STATUS_CODE_UNSET
    assert first.parent_span_id == second.parent_span_id == root.span_id
    assert first.end_time_unix_nano <= second.start_time_unix_nano
    fields = attributes(root)
    assert fields["gomodel.fallback.reason"] == "overloaded"
    assert (fields["gomodel.target"], fields["gomodel.attempts"], fields["gen_ai.provider.name"]) == (
        "tr-b", 2, "anthropic")


def test_a_stream_is_traced_when_it_ends(traced: Setup) -> None:
    with traced.client() as client:
        stream = client.chat.completions.with_raw_response.create(
            model="tr-a", stream=True, stream_options={"include_usage": True},
            messages=[{"role": "user", "content": "stream it"}])
        chunks = list(stream.parse())
    assert chunks
    root, (attempt,) = _spans_of(traced.receiver, stream.headers["x-request-id"], 2)
    fields = attributes(root)
    assert fields["gomodel.request.stream"] is True
    assert fields["gen_ai.usage.output_tokens"] > 0
    assert attributes(attempt)["gomodel.attempt.outcome"] == "ok"


def test_a_client_traceparent_is_continued_with_its_tracestate(traced: Setup) -> None:
    response = httpx2.post(f"{traced.gateway.base_url}/v1/chat/completions", timeout=30, headers={
        "traceparent": f"00-{TRACE}-{PARENT}-01", "tracestate": "vendor=abc"},
        json={"model": "tr-a", "messages": [{"role": "user", "content": "continue my trace"}]})
    assert response.status_code == 200
    root, (attempt,) = _spans_of(traced.receiver, response.headers["x-request-id"], 2)
    assert root.trace_id.hex() == TRACE
    assert root.parent_span_id.hex() == PARENT
    assert root.trace_state == "vendor=abc"
    assert root.flags & 0x300 == 0x300  # the parent is remote
    assert attempt.trace_id.hex() == TRACE
    assert attempt.parent_span_id == root.span_id


@pytest.mark.parametrize("header", [
    f"00-{TRACE.upper()}-{PARENT}-01", f"00-{'0' * 32}-{PARENT}-01", f"00-{TRACE}-{PARENT}-01-extra", "nonsense",
])
def test_a_malformed_traceparent_starts_a_new_trace_and_never_fails_the_request(traced: Setup, header: str) -> None:
    response = httpx2.post(f"{traced.gateway.base_url}/v1/chat/completions", timeout=30,
                           headers={"traceparent": header, "tracestate": "vendor=abc"},
                           json={"model": "tr-a", "messages": [{"role": "user", "content": "bad parent"}]})
    assert response.status_code == 200
    root, _ = _spans_of(traced.receiver, response.headers["x-request-id"], 2)
    assert root.parent_span_id == b""
    assert root.trace_id.hex() not in (TRACE, TRACE.lower(), "0" * 32)
    assert root.trace_state == ""


def test_an_unsampled_parent_is_not_traced(traced: Setup) -> None:
    unsampled = httpx2.post(f"{traced.gateway.base_url}/v1/chat/completions", timeout=30,
                            headers={"traceparent": f"00-{'1' * 32}-{PARENT}-00"},
                            json={"model": "tr-a", "messages": [{"role": "user", "content": "not sampled"}]})
    sampled = httpx2.post(f"{traced.gateway.base_url}/v1/chat/completions", timeout=30,
                          json={"model": "tr-a", "messages": [{"role": "user", "content": "sampled"}]})
    _spans_of(traced.receiver, sampled.headers["x-request-id"], 2)  # exported in order: the first would be here
    ids = {attributes(s).get("gomodel.request.id") for s in traced.receiver.spans}
    assert unsampled.headers["x-request-id"] not in ids
    assert not any(s.trace_id == bytes.fromhex("1" * 32) for s in traced.receiver.spans)


def test_a_refused_request_is_traced_with_its_error_and_no_attempt(traced: Setup) -> None:
    response = httpx2.post(f"{traced.gateway.base_url}/v1/chat/completions", timeout=30,
                           json={"model": "no-such-model", "messages": [{"role": "user", "content": "hi"}]})
    assert response.status_code == 404
    root, children = _spans_of(traced.receiver, response.headers["x-request-id"], 1)
    fields = attributes(root)
    assert root.name == "chat"  # an unknown name never becomes a span name
    assert fields["gen_ai.request.model"] == "no-such-model"
    assert fields["http.response.status_code"] == 404
    assert fields["error.type"]
    assert root.status.code == Status.STATUS_CODE_UNSET  # the client's mistake, not the server's error
    assert children == []


def _dropped(gateway: Gateway, reason: str) -> float:
    text = httpx2.get(f"{gateway.base_url}/metrics", timeout=10).text
    found = re.search(rf'^gomodel_otel_spans_dropped_total\{{reason="{reason}"\}} (\S+)$', text, re.M)
    return float(found.group(1)) if found else 0.0


def test_a_receiver_that_cannot_keep_up_costs_counted_drops_never_a_slower_request(setup: Setup) -> None:
    with otlp_receiver(delay_s=3.0) as slow:
        config = setup.tmp / "slow.yaml"
        config.write_text(yaml.safe_dump(_config(setup.sim.base_url)))
        env = _env(setup.database_url, config, OTEL_EXPORTER_OTLP_ENDPOINT=slow.url, OTEL_BSP_MAX_QUEUE_SIZE="4",
                   OTEL_BSP_MAX_EXPORT_BATCH_SIZE="2", OTEL_EXPORTER_OTLP_TIMEOUT="10000")
        with run_gateway(setup.tmp, env) as gateway, httpx2.Client(timeout=30) as client:
            body = {"model": "tr-a", "messages": [{"role": "user", "content": "quick"}]}
            client.post(f"{gateway.base_url}/v1/chat/completions", json=body)  # connections warm
            durations = []
            for _ in range(40):
                began = time.perf_counter()
                assert client.post(f"{gateway.base_url}/v1/chat/completions", json=body).status_code == 200
                durations.append(time.perf_counter() - began)
            # The simulator answers in ~5 ms; a request that waited for the 3-second receiver would show it.
            assert max(durations) < 0.5, durations
            assert _dropped(gateway, "queue_full") >= 60  # 41 requests of two spans, a queue of 4


def test_two_traceparent_headers_start_a_new_trace(traced: Setup) -> None:
    header = f"00-{TRACE}-{PARENT}-01"
    response = httpx2.post(f"{traced.gateway.base_url}/v1/chat/completions", timeout=30,
                           headers=[("traceparent", header), ("traceparent", header)],
                           json={"model": "tr-a", "messages": [{"role": "user", "content": "two parents"}]})
    assert response.status_code == 200
    root, _ = _spans_of(traced.receiver, response.headers["x-request-id"], 2)
    assert root.parent_span_id == b""
    assert root.trace_id.hex() != TRACE

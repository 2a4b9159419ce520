"""The request path's side of tracing: off by default with nothing running, sampling before any span is built, a
span-building bug never reaching the request, and the spans of a request reaching a real OTLP receiver."""

from __future__ import annotations

import logging
import threading
from collections.abc import Iterator

import pytest
from django.conf import settings

from routing.config.otel_settings import TracingConfig, tracing_config
from routing.core.answer import Answer, Usage
from routing.core.features import extract_features
from routing.core.outcome import AttemptOutcome
from routing.core.table import ModelSpec, ProviderSpec, RoutingTable
from routing.gateway import tracing
from routing.gateway.records import AttemptRecord, Call, Journey
from tests.otlp_receiver import Receiver, attributes, otlp_receiver

BODY = {"model": "sim/m", "messages": [{"role": "user", "content": "hi"}]}
PARENT = "00-4bf92f3577b34da6a3ce929d0e0e4736-00f067aa0ba902b7-01"


def _request(headers: dict[str, str] | None = None) -> tuple[Call, Journey]:
    table = RoutingTable.build(version=1, providers=[ProviderSpec("sim", "openai", "http://127.0.0.1:9/v1")],
                               models=[ModelSpec("sim/m", "sim", "m")])
    call = Call(request_id="req-1", inbound="openai", key=None, body=BODY, features=extract_features(BODY, "openai"),
                headers=headers or {}, table=table)
    journey = Journey(requested_model="sim/m", endpoint="openai", usage=Usage(3, 4), answer=Answer("hello", "stop"),
                      answered_by=table.models["sim/m"])
    record = AttemptRecord(seq=1, target="sim/m", provider="sim", started=call.started)
    record.outcome = AttemptOutcome.success(0.01)
    journey.attempts.append(record)
    return call, journey


def _config(receiver: Receiver, **env: str) -> TracingConfig:
    values = {"OTEL_EXPORTER_OTLP_ENDPOINT": receiver.url, "OTEL_BSP_SCHEDULE_DELAY": "20", **env}
    config = tracing_config(lambda name: values.get(name, ""))
    assert config is not None
    return config


@pytest.fixture
def receiver() -> Iterator[Receiver]:
    with otlp_receiver() as running:
        yield running
    tracing.shutdown(5.0)


def test_it_is_off_by_default_with_no_thread_running() -> None:
    assert settings.OTEL_TRACING is None
    tracing.start()
    assert tracing.active is False
    assert not any(thread.name == "gomodel-otlp-exporter" for thread in threading.enumerate())
    call, journey = _request()
    tracing.emit(call, journey, 0.02)  # nothing to do, and nothing fails


def test_a_request_s_spans_reach_the_receiver(receiver: Receiver) -> None:
    tracing.start(_config(receiver))
    assert tracing.active is True
    call, journey = _request()
    tracing.emit(call, journey, 0.02)
    spans = receiver.wait_until(lambda got: len(got) >= 2)
    root, attempt = sorted(spans, key=lambda s: len(s.parent_span_id))
    assert attributes(root)["gomodel.request.id"] == "req-1"
    assert attempt.parent_span_id == root.span_id
    assert attributes(attempt)["server.port"] == 9


def test_an_unsampled_request_builds_nothing_and_a_sampled_parent_wins(receiver: Receiver) -> None:
    tracing.start(_config(receiver, OTEL_TRACES_SAMPLER="parentbased_traceidratio", OTEL_TRACES_SAMPLER_ARG="0"))
    exporter = tracing._exporter
    assert exporter is not None
    call, journey = _request()
    tracing.emit(call, journey, 0.02)
    assert exporter.queued == 0
    parented, journey = _request({"traceparent": PARENT})
    tracing.emit(parented, journey, 0.02)
    spans = receiver.wait_until(lambda got: len(got) >= 2)
    assert {s.trace_id.hex() for s in spans} == {PARENT.split("-")[1]}


def test_a_span_building_bug_is_logged_and_never_reaches_the_request(receiver: Receiver,
                                                                     caplog: pytest.LogCaptureFixture) -> None:
    tracing.start(_config(receiver))
    call, journey = _request()
    journey.attempts[0].started = "not a time"  # type: ignore[assignment]
    with caplog.at_level(logging.ERROR, logger="gomodel.tracing"):
        tracing.emit(call, journey, 0.02)
    assert "could not build the spans of request req-1" in caplog.text

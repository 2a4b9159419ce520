"""The span exporter against a real OTLP receiver on loopback: batches arrive decoded, a slow or missing receiver
costs counted drops and never a blocked submit, refusals are retried or dropped as OTLP says."""

from __future__ import annotations

import collections
import socket
import time

import pytest

from routing.clients import otlp_exporter
from routing.clients.otlp_exporter import SpanExporter
from routing.core.otlp_proto import KIND_SERVER, SpanData, encode_export_request
from tests.otlp_receiver import otlp_receiver


def _span(n: int) -> SpanData:
    return SpanData(trace_id=n.to_bytes(16, "big"), span_id=n.to_bytes(8, "big"), parent_span_id=b"",
                    name=f"chat {n}", kind=KIND_SERVER, start_ns=n, end_ns=n + 1, attributes=[("n", n)])


def _encode(spans: list[SpanData]) -> bytes:
    return encode_export_request(spans, resource=[("service.name", "test")], scope_name="gomodel",
                                 scope_version="", schema_url="")


class Counts:
    def __init__(self) -> None:
        self.exported = 0
        self.dropped: collections.Counter[str] = collections.Counter()

    def on_exported(self, count: int) -> None:
        self.exported += count

    def on_dropped(self, reason: str, count: int) -> None:
        self.dropped[reason] += count


def _exporter(url: str, counts: Counts, **overrides: object) -> SpanExporter:
    options: dict[str, object] = {
        "url": f"{url}/v1/traces", "origin": url, "headers": (("x-tenant", "t1"),), "compression": "none",
        "timeout_s": 2.0, "max_queue_spans": 64, "max_batch_spans": 16, "schedule_delay_s": 0.05,
        "encode": _encode, "on_exported": counts.on_exported, "on_dropped": counts.on_dropped,
    }
    options.update(overrides)
    exporter = SpanExporter(**options)  # type: ignore[arg-type]
    exporter.start()
    return exporter


@pytest.fixture
def quick_retries(monkeypatch: pytest.MonkeyPatch) -> None:
    monkeypatch.setattr(otlp_exporter, "RETRY_WAIT_S", 0.05)


def _wait(condition: object, timeout: float = 10.0) -> None:
    deadline = time.monotonic() + timeout
    while time.monotonic() < deadline and not condition():  # type: ignore[operator]
        time.sleep(0.01)


def test_it_posts_batches_the_receiver_decodes_with_its_headers() -> None:
    counts = Counts()
    with otlp_receiver() as receiver:
        exporter = _exporter(receiver.url, counts)
        for n in range(1, 41):
            exporter.submit([_span(n)])
        spans = receiver.wait_until(lambda got: len(got) >= 40)
        assert exporter.shutdown(5.0)
    assert sorted(s.name for s in spans) == sorted(f"chat {n}" for n in range(1, 41))
    assert all(len(export.request.resource_spans[0].scope_spans[0].spans) <= 16 for export in receiver.exports)
    first = receiver.exports[0]
    assert first.path == "/v1/traces"
    assert first.headers["x-tenant"] == "t1"
    assert first.headers["content-type"] == "application/x-protobuf"
    assert first.resource == {"service.name": "test"}
    assert counts.exported == 40
    assert not counts.dropped


def test_it_compresses_with_gzip_when_asked() -> None:
    counts = Counts()
    with otlp_receiver() as receiver:
        exporter = _exporter(receiver.url, counts, compression="gzip")
        exporter.submit([_span(1), _span(2)])
        spans = receiver.wait_until(lambda got: len(got) >= 2)
        exporter.shutdown(5.0)
    assert receiver.exports[0].headers["content-encoding"] == "gzip"
    assert [s.name for s in spans] == ["chat 1", "chat 2"]


def test_a_slow_receiver_fills_the_queue_drops_are_counted_and_submit_never_waits() -> None:
    counts = Counts()
    with otlp_receiver(delay_s=1.0) as receiver:
        exporter = _exporter(receiver.url, counts, max_queue_spans=8, max_batch_spans=4)
        slowest = 0.0
        for n in range(1, 101):  # two spans per request, as a request with one attempt has
            began = time.perf_counter()
            exporter.submit([_span(2 * n), _span(2 * n + 1)])
            slowest = max(slowest, time.perf_counter() - began)
        assert slowest < 0.005  # a queue operation, never a wait for the receiver
        assert counts.dropped["queue_full"] >= 180  # the queue holds 8 spans; the receiver takes ~4 a second
        assert counts.dropped["queue_full"] % 2 == 0  # a request's spans are dropped together, never half a trace
        exporter.shutdown(10.0)
    assert counts.exported + sum(counts.dropped.values()) == 200  # every span accounted for


def test_a_receiver_that_is_down_costs_counted_drops(quick_retries: None) -> None:
    with socket.socket() as sock:  # a port nobody listens on
        sock.bind(("127.0.0.1", 0))
        port = sock.getsockname()[1]
    counts = Counts()
    exporter = _exporter(f"http://127.0.0.1:{port}", counts)
    began = time.perf_counter()
    exporter.submit([_span(1), _span(2)])
    assert time.perf_counter() - began < 0.005
    _wait(lambda: counts.dropped["export_failed"] == 2)
    exporter.shutdown(5.0)
    assert counts.dropped == {"export_failed": 2}
    assert counts.exported == 0


def test_a_retryable_refusal_is_retried_and_then_delivered(quick_retries: None) -> None:
    counts = Counts()
    with otlp_receiver([503, 429]) as receiver:
        exporter = _exporter(receiver.url, counts)
        exporter.submit([_span(1)])
        spans = receiver.wait_until(lambda got: len(got) >= 1)
        exporter.shutdown(5.0)
    assert [s.name for s in spans] == ["chat 1"]
    assert counts.exported == 1
    assert not counts.dropped


def test_a_bad_request_answer_drops_the_batch_without_retrying(quick_retries: None) -> None:
    counts = Counts()
    with otlp_receiver([400]) as receiver:
        exporter = _exporter(receiver.url, counts)
        exporter.submit([_span(1), _span(2)])
        _wait(lambda: counts.dropped["rejected"] == 2)
        exporter.submit([_span(3)])  # the next batch goes through: only the refused one was lost
        spans = receiver.wait_until(lambda got: len(got) >= 1)
        exporter.shutdown(5.0)
    assert [s.name for s in spans] == ["chat 3"]
    assert counts.dropped == {"rejected": 2}


def test_shutdown_sends_what_is_queued_and_later_spans_are_counted() -> None:
    counts = Counts()
    with otlp_receiver() as receiver:
        exporter = _exporter(receiver.url, counts, schedule_delay_s=60.0)  # nothing would go out on its own
        exporter.submit([_span(1), _span(2), _span(3)])
        assert exporter.shutdown(5.0)
        assert len(receiver.spans) == 3
        exporter.submit([_span(4)])
    assert counts.exported == 3
    assert counts.dropped == {"shutdown": 1}

"""The hand-written OTLP encoder, decoded by the official generated protobuf classes."""

from __future__ import annotations

from opentelemetry.proto.collector.trace.v1.trace_service_pb2 import ExportTraceServiceRequest
from opentelemetry.proto.trace.v1.trace_pb2 import Span, Status

from routing.core.otlp_proto import KIND_CLIENT, KIND_SERVER, STATUS_ERROR, SpanData, encode_export_request
from tests.otlp_receiver import attributes

SCHEMA = "https://opentelemetry.io/schemas/1.37.0"


def _decode(spans: list[SpanData]) -> ExportTraceServiceRequest:
    raw = encode_export_request(spans, resource=[("service.name", "gw"), ("deployment.environment", "test")],
                                scope_name="gomodel", scope_version="1.2.3", schema_url=SCHEMA)
    return ExportTraceServiceRequest.FromString(raw)


def test_it_encodes_every_field_the_gateway_sets() -> None:
    span = SpanData(trace_id=bytes(range(16)), span_id=bytes(range(8)), parent_span_id=b"\x09" * 8,
                    name="chat normal", kind=KIND_SERVER, start_ns=1_700_000_000_123_456_789,
                    end_ns=1_700_000_000_623_456_789,
                    attributes=[("s", "text é"), ("yes", True), ("no", False), ("neg", -5), ("big", 2**62),
                                ("zero", 0), ("f", 0.25), ("list", ("stop", "length"))],
                    status_code=STATUS_ERROR, status_message="upstream failed", trace_state="rojo=1",
                    trace_flags=1, remote_parent=True)
    request = _decode([span])
    resource_spans = request.resource_spans[0]
    assert {kv.key: kv.value.string_value for kv in resource_spans.resource.attributes} == {
        "service.name": "gw", "deployment.environment": "test"}
    scope_spans = resource_spans.scope_spans[0]
    assert (scope_spans.scope.name, scope_spans.scope.version, scope_spans.schema_url) == ("gomodel", "1.2.3", SCHEMA)
    got = scope_spans.spans[0]
    assert got.trace_id == bytes(range(16))
    assert got.span_id == bytes(range(8))
    assert got.parent_span_id == b"\x09" * 8
    assert (got.name, got.kind, got.trace_state) == ("chat normal", Span.SPAN_KIND_SERVER, "rojo=1")
    assert (got.start_time_unix_nano, got.end_time_unix_nano) == (1_700_000_000_123_456_789, 1_700_000_000_623_456_789)
    assert attributes(got) == {"s": "text é", "yes": True, "no": False, "neg": -5, "big": 2**62, "zero": 0,
                               "f": 0.25, "list": ["stop", "length"]}
    assert (got.status.code, got.status.message) == (Status.STATUS_CODE_ERROR, "upstream failed")
    assert got.flags == 0x301  # sampled, and the parent is known to be remote


def test_a_root_span_has_no_parent_and_an_unset_status() -> None:
    span = SpanData(trace_id=b"\x01" * 16, span_id=b"\x02" * 8, parent_span_id=b"", name="chat", kind=KIND_CLIENT,
                    start_ns=1, end_ns=2)
    got = _decode([span]).resource_spans[0].scope_spans[0].spans[0]
    assert got.parent_span_id == b""
    assert got.kind == Span.SPAN_KIND_CLIENT
    assert got.status.code == Status.STATUS_CODE_UNSET
    assert not got.HasField("status")
    assert got.flags == 0x101  # sampled, the parent (none) is not remote


def test_many_spans_go_in_one_request_in_order() -> None:
    spans = [SpanData(trace_id=b"\x01" * 16, span_id=i.to_bytes(8, "big"), parent_span_id=b"", name=f"s{i}",
                      kind=KIND_CLIENT, start_ns=i, end_ns=i + 1) for i in range(1, 300)]
    got = _decode(spans).resource_spans[0].scope_spans[0].spans
    assert [s.name for s in got] == [f"s{i}" for i in range(1, 300)]


def test_a_lone_surrogate_is_replaced_rather_than_failing_the_batch() -> None:
    span = SpanData(trace_id=b"\x01" * 16, span_id=b"\x02" * 8, parent_span_id=b"", name="chat \ud800",
                    kind=KIND_SERVER, start_ns=1, end_ns=2, attributes=[("model", "x\udfff")])
    got = _decode([span]).resource_spans[0].scope_spans[0].spans[0]
    assert got.name == "chat ?"
    assert attributes(got) == {"model": "x?"}


def test_the_attribute_cache_stays_right_past_its_bound_and_across_types() -> None:
    spans = [SpanData(trace_id=b"\x01" * 16, span_id=(i + 1).to_bytes(8, "big"), parent_span_id=b"", name="s",
                      kind=KIND_SERVER, start_ns=1, end_ns=2,
                      attributes=[("model", f"m{i}"), ("flag", i % 2 == 0), ("count", i % 3), ("cost", i / 7),
                                  ("gen_ai.usage.input_tokens", i)])
             for i in range(10_000)]  # more distinct values than the cache keeps
    for _ in range(2):  # the second pass reads what the first one cached
        got = _decode(spans).resource_spans[0].scope_spans[0].spans
        assert [attributes(s) for s in got] == [
            {"model": f"m{i}", "flag": i % 2 == 0, "count": i % 3, "cost": i / 7, "gen_ai.usage.input_tokens": i}
            for i in range(10_000)]

"""OpenTelemetry traces of the requests (docs/observability.md): on with an OTLP endpoint, off by default.

``active`` is what the request path reads at its end (``routing.gateway.client_answer.finish``): while tracing is off
that one branch is its whole cost. When on, ``emit`` continues the client's ``traceparent`` (a malformed one starts a
new trace), asks the sampler, builds the spans from the records the request already holds and hands them to the
exporter's queue; the protobuf encoding and the post happen in the exporter's thread.
"""

from __future__ import annotations

import importlib.metadata
import logging
import random

from django.conf import settings

from routing.clients.otlp_exporter import SpanExporter
from routing.config.otel_settings import TracingConfig
from routing.core.otlp_proto import SpanData, encode_export_request
from routing.core.trace_context import new_span_id, new_trace_id, parse_traceparent, parse_tracestate
from routing.core.trace_sampler import Sampler
from routing.gateway.records import Call, Journey
from routing.gateway.trace_spans import SCHEMA_URL, request_spans
from routing.ops import metrics

log = logging.getLogger("gomodel.tracing")

active = False
_exporter: SpanExporter | None = None
_sampler = Sampler("parentbased_always_on")
# The system's randomness, not a seeded generator: a worker forked from another must never repeat its ids.
_rng = random.SystemRandom()


def _version() -> str:
    try:
        return importlib.metadata.version("gomodel-gateway")
    except importlib.metadata.PackageNotFoundError:
        return ""


def start(config: TracingConfig | None = None) -> None:
    """Start exporting with ``config`` (the settings' by default); nothing when tracing is not configured."""
    global active, _exporter, _sampler
    config = config if config is not None else settings.OTEL_TRACING
    if config is None or _exporter is not None:
        return
    resource = list(config.resource)
    scope_version = _version()

    def encode(spans: list[SpanData]) -> bytes:
        return encode_export_request(spans, resource=resource, scope_name="gomodel", scope_version=scope_version,
                                     schema_url=SCHEMA_URL)

    _sampler = config.sampler
    _exporter = SpanExporter(url=config.url, origin=config.origin, headers=config.headers,
                             compression=config.compression, timeout_s=config.timeout_s,
                             max_queue_spans=config.max_queue_spans, max_batch_spans=config.max_batch_spans,
                             schedule_delay_s=config.schedule_delay_s, encode=encode,
                             on_exported=metrics.TRACE_SPANS_EXPORTED.inc,
                             on_dropped=lambda reason, count: metrics.TRACE_SPANS_DROPPED.labels(reason).inc(count))
    _exporter.start()
    active = True
    log.info("tracing: exporting spans to %s (sampler %s)", config.origin, config.sampler.name)


def shutdown(timeout_s: float) -> bool:
    """Stop tracing and send what is queued within ``timeout_s``; True when nothing was left behind."""
    global active, _exporter
    exporter, _exporter, active = _exporter, None, False
    return exporter.shutdown(timeout_s) if exporter is not None else True


def emit(call: Call, journey: Journey, elapsed_s: float) -> None:
    """Queue the spans of a finished request, if its trace is sampled; never raises, never blocks."""
    exporter = _exporter
    if exporter is None:
        return
    try:
        parent = parse_traceparent(call.headers.get("traceparent"))
        trace_id = parent.trace_id if parent is not None else new_trace_id(_rng)
        if not _sampler.sampled(trace_id, parent):
            return
        trace_state = parse_tracestate(call.headers.get("tracestate")) if parent is not None else ""
        spans = request_spans(call, journey, elapsed_s, trace_id=trace_id, parent=parent, trace_state=trace_state,
                              new_span_id=lambda: new_span_id(_rng))
    except Exception:  # tracing must never fail a request; the bug is logged, the spans are lost
        log.exception("could not build the spans of request %s", call.request_id)
        return
    exporter.submit(spans)

"""An OTLP/HTTP trace receiver for the tests: a real HTTP server on loopback that decodes every export with the
official protobuf classes (opentelemetry-proto) and keeps the spans. It can be made slow (each answer waits) or
refusing (answers the statuses it is given in turn, then 200)."""

from __future__ import annotations

import gzip
import threading
from collections.abc import Callable, Iterator
from contextlib import contextmanager
from dataclasses import dataclass, field
from http.server import BaseHTTPRequestHandler, ThreadingHTTPServer
from typing import Any

from opentelemetry.proto.collector.trace.v1.trace_service_pb2 import (
    ExportTraceServiceRequest,
    ExportTraceServiceResponse,
)
from opentelemetry.proto.common.v1.common_pb2 import AnyValue
from opentelemetry.proto.trace.v1.trace_pb2 import Span


def value_of(value: AnyValue) -> Any:
    """An attribute's value as Python: str, bool, int, float or a list of them."""
    which = value.WhichOneof("value")
    if which == "array_value":
        return [value_of(item) for item in value.array_value.values]
    return getattr(value, which) if which else None


def attributes(span: Span) -> dict[str, Any]:
    return {kv.key: value_of(kv.value) for kv in span.attributes}


@dataclass
class Export:
    path: str
    headers: dict[str, str]
    request: ExportTraceServiceRequest

    @property
    def resource(self) -> dict[str, Any]:
        return {kv.key: value_of(kv.value) for kv in self.request.resource_spans[0].resource.attributes}


@dataclass
class Receiver:
    url: str  # the base URL, as OTEL_EXPORTER_OTLP_ENDPOINT takes it
    statuses: list[int] = field(default_factory=list)
    delay_s: float = 0.0
    exports: list[Export] = field(default_factory=list)
    arrived: threading.Condition = field(default_factory=threading.Condition)

    @property
    def spans(self) -> list[Span]:
        with self.arrived:
            return self._spans()

    def wait_until(self, done: Callable[[list[Span]], bool], timeout: float = 20.0) -> list[Span]:
        """The spans once ``done`` holds of them (or what came by ``timeout``, for the test to fail on)."""
        with self.arrived:
            self.arrived.wait_for(lambda: done(self._spans()), timeout)
            return self._spans()

    def _spans(self) -> list[Span]:
        return [span for export in self.exports for rs in export.request.resource_spans
                for ss in rs.scope_spans for span in ss.spans]

    def trace(self, trace_id: bytes, count: int, timeout: float = 20.0) -> list[Span]:
        """The spans of one trace once ``count`` of them have arrived."""
        spans = self.wait_until(lambda got: sum(s.trace_id == trace_id for s in got) >= count, timeout)
        return [span for span in spans if span.trace_id == trace_id]


@contextmanager
def otlp_receiver(statuses: list[int] | None = None, *, delay_s: float = 0.0) -> Iterator[Receiver]:
    receiver: Receiver

    class Handler(BaseHTTPRequestHandler):
        protocol_version = "HTTP/1.1"  # keep-alive, as collectors answer

        def do_POST(self) -> None:
            body = self.rfile.read(int(self.headers.get("Content-Length") or 0))
            if receiver.delay_s:
                threading.Event().wait(receiver.delay_s)
            status = receiver.statuses.pop(0) if receiver.statuses else 200
            if status == 200:
                if self.headers.get("Content-Encoding") == "gzip":
                    body = gzip.decompress(body)
                request = ExportTraceServiceRequest.FromString(body)  # a bad body fails the test's thread loudly
                with receiver.arrived:
                    receiver.exports.append(Export(self.path, {k.lower(): v for k, v in self.headers.items()},
                                                   request))
                    receiver.arrived.notify_all()
            answer = ExportTraceServiceResponse().SerializeToString()
            self.send_response(status)
            self.send_header("Content-Type", "application/x-protobuf")
            self.send_header("Content-Length", str(len(answer)))
            self.end_headers()
            self.wfile.write(answer)

        def log_message(self, format: str, *args: object) -> None:
            return None

    server = ThreadingHTTPServer(("127.0.0.1", 0), Handler)
    server.daemon_threads = True
    receiver = Receiver(f"http://127.0.0.1:{server.server_address[1]}", list(statuses or []), delay_s)
    thread = threading.Thread(target=server.serve_forever, daemon=True)
    thread.start()
    try:
        yield receiver
    finally:
        server.shutdown()
        server.server_close()

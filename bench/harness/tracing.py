"""The tracing rows: the gateway's CPU per request with OpenTelemetry export off and on (docs/observability.md).

Two gateways are started alike, one of them with ``OTEL_EXPORTER_OTLP_ENDPOINT`` (an OTLP sink in this process that
decodes and counts the spans), and serve the same JSON requests: the concrete model and the tier alias (two spans a
request: the request and its attempt). Their rows alternate, off, on, off, on, off, on, so that a drift of the
machine's load falls on both; each figure is the median of its three runs. The sink's count of spans and
the traced gateway's ``gomodel_otel_spans_dropped_total`` say that the export kept up.
"""

from __future__ import annotations

import re
import statistics
import threading
import time
import urllib.request
from collections.abc import Iterator
from contextlib import contextmanager
from http.server import BaseHTTPRequestHandler, ThreadingHTTPServer
from typing import Any

from harness import services
from harness.configs import PROFILES, chat_json, model_for
from harness.meter import Meter
from harness.wrk import fixed_body_script, run_wrk

ROUTES = ("concrete", "alias")


class Sink:
    def __init__(self, url: str) -> None:
        self.url = url
        self.spans = 0
        self.exports = 0
        self.lock = threading.Lock()


@contextmanager
def otlp_sink() -> Iterator[Sink]:
    """An OTLP/HTTP receiver on loopback that decodes every export and counts its spans."""
    from opentelemetry.proto.collector.trace.v1.trace_service_pb2 import ExportTraceServiceRequest

    sink: Sink

    class Handler(BaseHTTPRequestHandler):
        protocol_version = "HTTP/1.1"

        def do_POST(self) -> None:
            request = ExportTraceServiceRequest.FromString(self.rfile.read(int(self.headers["Content-Length"])))
            count = sum(len(ss.spans) for rs in request.resource_spans for ss in rs.scope_spans)
            with sink.lock:
                sink.spans += count
                sink.exports += 1
            self.send_response(200)
            self.send_header("Content-Type", "application/x-protobuf")
            self.send_header("Content-Length", "0")
            self.end_headers()

        def log_message(self, format: str, *args: object) -> None:
            return None

    server = ThreadingHTTPServer(("127.0.0.1", 0), Handler)
    server.daemon_threads = True
    sink = Sink(f"http://127.0.0.1:{server.server_address[1]}")
    threading.Thread(target=server.serve_forever, daemon=True).start()
    try:
        yield sink
    finally:
        server.shutdown()
        server.server_close()


def _dropped(gateway_url: str) -> float:
    with urllib.request.urlopen(f"{gateway_url}/metrics", timeout=10) as response:
        text = response.read().decode()
    return sum(float(v) for v in re.findall(r"^gomodel_otel_spans_dropped_total\{[^}]*\} (\S+)$", text, re.M))


def run_tracing(bench: Any, *, progress: Any = print) -> dict[str, Any]:
    """The off/on rows of two fresh gateways alike but for tracing; the figures and the sink's counts."""
    args = bench.args
    with otlp_sink() as sink:
        env = {**bench.gateway_env, "OTEL_EXPORTER_OTLP_ENDPOINT": sink.url, "OTEL_SERVICE_NAME": "gomodel-bench"}
        rows: list[dict[str, Any]] = []
        requests_on = 0
        gateways: dict[str, tuple[services.Service, str]] = {}
        try:
            for label, environment in (("off", bench.gateway_env), ("on", env)):
                port = services.free_port()
                service = services.start_gateway(port, environment, app=args.gateway_app, workers=args.workers,
                                                 extra_args=args.gateway_arg, log_dir=bench.work_dir,
                                                 name=f"gateway-tracing-{label}")
                gateways[label] = (service, f"http://127.0.0.1:{port}")
            for route in ROUTES:
                script = fixed_body_script(chat_json(model_for(PROFILES[0], route), stream=False))
                for _service, url in gateways.values():
                    run_wrk(f"{url}/v1/chat/completions", script, connections=20, seconds=2.0)  # warm
                for concurrency in args.concurrencies:
                    cpu: dict[str, list[float]] = {"off": [], "on": []}
                    rps: dict[str, list[float]] = {"off": [], "on": []}
                    for label in ("off", "on") * 3:
                        service, url = gateways[label]
                        meter = Meter({"gateway": service.children})
                        running = meter.start()
                        result = run_wrk(f"{url}/v1/chat/completions", script, connections=concurrency,
                                         seconds=args.seconds)
                        usage = running.stop()
                        if label == "on":
                            requests_on += result.requests
                        cpu[label].append(usage.cpu_s["gateway"] / max(1, result.requests) * 1000)
                        rps[label].append(result.rps)
                        time.sleep(0.5)
                    off, on = statistics.median(cpu["off"]), statistics.median(cpu["on"])
                    row = {"route": route, "concurrency": concurrency, "cpu_ms_off": round(off, 3),
                           "cpu_ms_on": round(on, 3), "cpu_ms_added": round(on - off, 3),
                           "rps_off": round(statistics.median(rps["off"]), 1),
                           "rps_on": round(statistics.median(rps["on"]), 1),
                           "runs_cpu_ms": {k: [round(v, 3) for v in vs] for k, vs in cpu.items()}}
                    rows.append(row)
                    progress(f"  tracing {route:<9} c={concurrency:<3} gw CPU off {off:6.3f} on {on:6.3f} ms/req "
                             f"({on - off:+.3f})  req/s off {row['rps_off']:8.1f} on {row['rps_on']:8.1f}")
            time.sleep(_export_delay_s(env))  # the exporter's schedule delay: its last spans reach the sink
            dropped = _dropped(gateways["on"][1])
        finally:
            for service, _url in gateways.values():
                service.stop()
    progress(f"  spans received {sink.spans} in {sink.exports} exports for {requests_on} traced requests "
             f"(+ warm-up); dropped {dropped:g}")
    return {"rows": rows, "spans_received": sink.spans, "exports": sink.exports, "traced_requests": requests_on,
            "spans_dropped": dropped}


def _export_delay_s(env: dict[str, str]) -> float:
    """How long the exporter may hold spans before sending them (OTEL_BSP_SCHEDULE_DELAY, 5 s by default), plus 1 s."""
    return int(env.get("OTEL_BSP_SCHEDULE_DELAY") or 5000) / 1000 + 1.0

"""The embeddings rows: ``POST /v1/embeddings`` direct to the simulator and through the gateway, metered.

One batch of 16 texts per request, 256 floats a vector: about 100 KB of JSON numbers each way, which the
gateway reads, checks (every vector complete and finite, of the configured size) and writes back. The rows
are kept apart from the chat load rows (their own ``embeddings`` entry in the results).
"""

from __future__ import annotations

import time
from typing import Any

from harness.configs import EMBED_MODEL, embeddings_json
from harness.loadruns import MIB, Endpoints
from harness.meter import Meter
from harness.wrk import fixed_body_script, run_wrk


def run_embeddings(meter: Meter, endpoints: Endpoints, *, concurrencies: list[int], seconds: float,
                   progress: Any = print) -> list[dict[str, Any]]:
    rows = []
    for concurrency in concurrencies:
        for route in ("direct", "gateway"):
            base, model = ((endpoints.simulator_url, EMBED_MODEL) if route == "direct"
                           else (endpoints.gateway_url, f"sim/{EMBED_MODEL}"))
            running = meter.start()
            result = run_wrk(f"{base}/v1/embeddings", fixed_body_script(embeddings_json(model)),
                             connections=concurrency, seconds=seconds)
            usage = running.stop()
            done = max(1, result.requests)
            cpu = {name: round(value / done * 1000, 3) for name, value in usage.cpu_s.items()}
            rss = {name: round(sum(values) / MIB, 1) for name, values in usage.rss_bytes.items()}
            rows.append({"route": route, "concurrency": concurrency, "wrk": result.as_dict(),
                         "cpu_ms_per_request": cpu, "rss_mib": rss})
            progress(f"  embeddings c={concurrency:<3} {route:<8} {result.rps:8.1f} req/s  "
                     f"p50 {result.p50_ms:7.2f} ms  p99 {result.p99_ms:7.2f} ms  "
                     f"gw CPU {cpu.get('gateway', 0):6.3f} ms/req  sim CPU {cpu.get('simulator', 0):6.3f} ms/req  "
                     f"errors {result.error_count}")
            time.sleep(0.5)
    return rows

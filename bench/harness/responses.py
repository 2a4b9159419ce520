"""The Responses rows: ``POST /v1/responses`` direct to the simulator and through the gateway, metered.

Three routes, JSON and stream each: ``direct`` (the simulator's own Responses API), ``gateway`` to an OpenAI-kind
provider (the request goes upstream as a Responses call) and ``gateway translated`` to an Anthropic-kind provider
(the gateway turns the Responses request into a Messages request and the answer, or its events, back). The
request is the chat rows' short question, with ``store: false``: these rows measure the endpoint's relaying and
translation, not the conversation store (a stored response is one more database write, done off the event loop).
Kept apart from the chat load rows (their own ``responses`` entry in the results).
"""

from __future__ import annotations

import json
import time
from typing import Any

from harness.configs import QUESTION, SYSTEM_PROMPT, TRANSLATED_PROVIDER
from harness.loadruns import MIB, Endpoints
from harness.meter import Meter
from harness.wrk import fixed_body_script, run_wrk

# route -> (which server, which model name)
_ROUTES = {"direct": ("simulator", "instant"), "gateway": ("gateway", "sim/instant"),
           "gateway translated": ("gateway", f"{TRANSLATED_PROVIDER}/instant")}


def responses_json(model: str, *, stream: bool) -> str:
    body: dict[str, Any] = {"model": model, "instructions": SYSTEM_PROMPT, "input": QUESTION,
                            "max_output_tokens": 256, "store": False}
    if stream:
        body["stream"] = True
    return json.dumps(body, separators=(",", ":"))


def run_responses(meter: Meter, endpoints: Endpoints, *, concurrencies: list[int], seconds: float,
                  progress: Any = print) -> list[dict[str, Any]]:
    rows = []
    for concurrency in concurrencies:
        for stream in (False, True):
            for route, (server, model) in _ROUTES.items():
                base = endpoints.simulator_url if server == "simulator" else endpoints.gateway_url
                running = meter.start()
                result = run_wrk(f"{base}/v1/responses", fixed_body_script(responses_json(model, stream=stream)),
                                 connections=concurrency, seconds=seconds)
                usage = running.stop()
                done = max(1, result.requests)
                cpu = {name: round(value / done * 1000, 3) for name, value in usage.cpu_s.items()}
                rss = {name: round(sum(values) / MIB, 1) for name, values in usage.rss_bytes.items()}
                rows.append({"route": route, "stream": stream, "concurrency": concurrency, "wrk": result.as_dict(),
                             "cpu_ms_per_request": cpu, "rss_mib": rss})
                progress(f"  responses c={concurrency:<3} {'stream' if stream else 'json':<6} {route:<18} "
                         f"{result.rps:8.1f} req/s  p50 {result.p50_ms:7.2f} ms  p99 {result.p99_ms:7.2f} ms  "
                         f"gw CPU {cpu.get('gateway', 0):6.3f} ms/req  errors {result.error_count}")
                time.sleep(0.5)
    return rows

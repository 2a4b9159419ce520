"""The reference phase's other gateways under load: TensorZero and Portkey, measured as the bare relay is.

Each is installed when missing, started alone (nothing else but the simulator runs meanwhile), checked with
one JSON and one streamed request, warmed up (longer than the relays, for Node's JIT), then driven by wrk with
the relay rows' request (the instant profile, JSON and stream, at every concurrency of the run). Its CPU per
request is the CPU time of all its processes (TensorZero: the Python process whose native module runs the
gateway; Portkey: the Node process) over the requests answered, as for the gateway's workers. A reference that
cannot be installed, started or checked has no rows and a reason, which the report prints.
"""

from __future__ import annotations

import json
import os
import urllib.error
import urllib.request
from collections.abc import Callable, Mapping
from dataclasses import dataclass, field
from pathlib import Path
from typing import Any

from harness import reference_gateways as gateways
from harness import services
from harness.configs import PROFILES, SIM_KEY_VARIABLE, chat_json
from harness.loadruns import LoadRow, run_script
from harness.meter import Meter
from harness.wrk import fixed_body_script, run_wrk

SETUP = "reference"
# Longer than the relays' 2 s: Portkey's CPU per request fell from 2.8 to 1.4 ms over its first ~6 s of load at
# concurrency 50 (V8 compiling its hot paths), then held; TensorZero's held from the first second. Both get it.
WARM_UP_S = 8.0
# Route name -> (what the report calls it, the pinned version).
REFERENCE_GATEWAYS = {
    "tensorzero": ("TensorZero", gateways.TENSORZERO_VERSION),
    "portkey": ("Portkey", f"{gateways.PORTKEY_VERSION} (@hono/node-server {gateways.HONO_NODE_SERVER_VERSION})"),
}


@dataclass
class ReferenceOutcome:
    route: str
    name: str
    version: str
    rows: list[LoadRow] = field(default_factory=list)
    missing: str | None = None  # why there are no rows

    def as_dict(self) -> dict[str, Any]:
        return {"route": self.route, "name": self.name, "version": self.version, "rows": len(self.rows),
                "missing": self.missing}


def run_reference_gateways(*, simulator: services.Service, simulator_url: str, simulator_key: str,
                           work_dir: Path, concurrencies: list[int], seconds: float,
                           progress: Callable[[str], None] = print) -> list[ReferenceOutcome]:
    outcomes = []
    for route, (name, version) in REFERENCE_GATEWAYS.items():
        outcome = ReferenceOutcome(route, name, version)
        progress(f"\n== reference: {name} {version}, {seconds:g}s each")
        try:
            outcome.rows = _measure(route, simulator=simulator, simulator_url=simulator_url,
                                    simulator_key=simulator_key, work_dir=work_dir, concurrencies=concurrencies,
                                    seconds=seconds, progress=progress)
        except (gateways.ReferenceUnavailable, RuntimeError) as exc:  # RuntimeError: wrk failed against it
            outcome.missing = " ".join(str(exc).split())[:500]  # one line in the report
            progress(f"  no {name} rows in this run: {exc}")
        outcomes.append(outcome)
    return outcomes


def _measure(route: str, *, simulator: services.Service, simulator_url: str, simulator_key: str, work_dir: Path,
             concurrencies: list[int], seconds: float, progress: Callable[[str], None]) -> list[LoadRow]:
    env = {**os.environ, SIM_KEY_VARIABLE: simulator_key}
    model = PROFILES[0].direct_model
    service, target = _start(route, env, simulator_url=simulator_url, simulator_key=simulator_key,
                             work_dir=work_dir, model=model, progress=progress)
    try:
        progress(f"  {route} (pid {service.pid}) on {target.url}")
        for stream in (False, True):
            check_answer(target, stream=stream)
        scripts = {stream: fixed_body_script(chat_json(target.model, stream=stream), target.headers)
                   for stream in (False, True)}
        for script in scripts.values():  # as the relays: the first row must not pay for the cold start
            run_wrk(target.url, script, connections=20, seconds=WARM_UP_S)
        meter = Meter({"gateway": service.all_pids, "simulator": simulator.all_pids})
        rows = []
        for stream in (False, True):
            for concurrency in concurrencies:
                row = run_script(meter, target.url, scripts[stream], profile=PROFILES[0], route=route,
                                 stream=stream, concurrency=concurrency, seconds=seconds, setup=SETUP)
                rows.append(row)
                progress(f"  {PROFILES[0].name:<8} {'stream' if stream else 'json':<6} c={concurrency:<3} "
                         f"{route:<12} {row.wrk.rps:8.1f} req/s  p50 {row.wrk.p50_ms:7.2f} ms  "
                         f"p99 {row.wrk.p99_ms:7.2f} ms  gw CPU {row.cpu_ms_per_request['gateway']:6.3f} "
                         f"ms/req  errors {row.wrk.error_count}")
        return rows
    finally:
        service.stop()


def _start(route: str, env: Mapping[str, str], *, simulator_url: str, simulator_key: str, work_dir: Path,
           model: str, progress: Callable[[str], None]) -> tuple[services.Service, gateways.Target]:
    if route == "tensorzero":
        python = gateways.tensorzero_python(progress=progress)
        return gateways.start_tensorzero(python, simulator_url, env, work_dir=work_dir,
                                         key_variable=SIM_KEY_VARIABLE, model=model)
    folder = gateways.portkey_folder(progress=progress)
    return gateways.start_portkey(folder, simulator_url, env, work_dir=work_dir, api_key=simulator_key,
                                  model=model)


def check_answer(target: gateways.Target, *, stream: bool) -> None:
    """One request as the load will send it: a 200 with the simulator's answer (a stream to its ``[DONE]``),
    so that a misconfigured reference gives a reason instead of rows of fast errors."""
    request = urllib.request.Request(target.url, data=chat_json(target.model, stream=stream).encode(),
                                     headers={"Content-Type": "application/json", **target.headers}, method="POST")
    kind = "streamed" if stream else "JSON"
    try:
        with urllib.request.urlopen(request, timeout=30) as response:
            body = response.read().decode(errors="replace")
    except urllib.error.HTTPError as exc:
        detail = exc.read().decode(errors="replace")[:300]
        raise gateways.ReferenceUnavailable(f"a {kind} request answered {exc.code}: {detail}") from exc
    except OSError as exc:
        raise gateways.ReferenceUnavailable(f"a {kind} request failed: {exc}") from exc
    try:
        if stream:
            answered = "data: [DONE]" in body and "Simulated answer" in "".join(_stream_texts(body))
        else:
            answered = "Simulated answer" in str(json.loads(body)["choices"][0]["message"]["content"])
    except (ValueError, LookupError, TypeError, AttributeError):
        answered = False
    if not answered:
        raise gateways.ReferenceUnavailable(f"a {kind} request did not carry the simulator's answer: {body[:300]}")


def _stream_texts(body: str) -> list[str]:
    texts = []
    for line in body.splitlines():
        if line.startswith("data: {"):
            for choice in json.loads(line[6:]).get("choices") or []:
                texts.append((choice.get("delta") or {}).get("content") or "")
    return texts

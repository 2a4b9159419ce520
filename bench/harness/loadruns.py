"""Load runs: one (profile, route, stream, concurrency) combination driven by wrk and metered, as a row."""

from __future__ import annotations

import time
from dataclasses import asdict, dataclass, field
from typing import Any

from harness import procfs
from harness.configs import PROFILES, ROUTES, Profile, chat_json, model_for
from harness.meter import Meter
from harness.wrk import WrkResult, fixed_body_script, run_wrk

MIB = 1024 * 1024


@dataclass
class Endpoints:
    simulator_url: str
    gateway_url: str

    def url_for(self, route: str) -> str:
        base = self.simulator_url if route == "direct" else self.gateway_url  # the relay stands in for it
        return f"{base}/v1/chat/completions"


@dataclass
class LoadRow:
    setup: str  # "in-process audit" or "broker + worker"
    profile: str
    route: str
    stream: bool
    concurrency: int
    wrk: WrkResult
    cpu_ms_per_request: dict[str, float]
    rss_mib: dict[str, float]
    others_cpu_cores: float  # CPU used by other programs on the machine during the run, in cores
    load_average: tuple[float, float, float]
    pids_changed: list[str] = field(default_factory=list)

    def as_dict(self) -> dict[str, Any]:
        data = asdict(self)
        data["wrk"] = self.wrk.as_dict()
        return data


def run_one(meter: Meter, endpoints: Endpoints, profile: Profile, route: str, *, stream: bool, concurrency: int,
            seconds: float, setup: str) -> LoadRow:
    """Drive one combination for ``seconds`` and meter every group while it runs."""
    script = fixed_body_script(chat_json(model_for(profile, route), stream=stream))
    return run_script(meter, endpoints.url_for(route), script, profile=profile, route=route, stream=stream,
                      concurrency=concurrency, seconds=seconds, setup=setup)


def run_script(meter: Meter, url: str, script: str, *, profile: Profile, route: str, stream: bool,
               concurrency: int, seconds: float, setup: str) -> LoadRow:
    """Drive ``url`` with the wrk ``script`` for ``seconds`` and meter every group while it runs, as a row."""
    load = procfs.load_average()
    running = meter.start()
    result = run_wrk(url, script, connections=concurrency, seconds=seconds)
    usage = running.stop()
    per_request = {}
    done = max(1, result.requests)
    for name, cpu in usage.cpu_s.items():
        per_request[name] = round(cpu / done * 1000, 3)
    per_request["generator"] = round(result.generator_cpu_s / done * 1000, 3)
    rss = {name: round(sum(values) / MIB, 1) for name, values in usage.rss_bytes.items()}
    others = usage.others_cpu_s(result.generator_cpu_s) / usage.wall_s if usage.wall_s else 0.0
    return LoadRow(setup=setup, profile=profile.name, route=route, stream=stream, concurrency=concurrency,
                   wrk=result, cpu_ms_per_request=per_request, rss_mib=rss, others_cpu_cores=round(others, 2),
                   load_average=load, pids_changed=usage.pids_changed)


def warm_up(endpoints: Endpoints, seconds: float) -> int:
    """Send every kind of request through the gateway under load, so the first measured run does not pay
    for imports, connection pools and the first health estimates; returns the number of requests sent."""
    sent = 0
    for profile in PROFILES:
        for route in ROUTES[1:]:
            for stream in (False, True):
                script = fixed_body_script(chat_json(model_for(profile, route), stream=stream))
                sent += run_wrk(endpoints.url_for(route), script, connections=20, seconds=seconds).requests
    return sent


def run_matrix(meter: Meter, endpoints: Endpoints, *, concurrencies: list[int], streams: list[bool],
               profiles: list[Profile], routes: list[str], seconds: float, setup: str,
               progress: Any = print) -> list[LoadRow]:
    rows = []
    for profile in profiles:
        for stream in streams:
            for concurrency in concurrencies:
                for route in routes:
                    row = run_one(meter, endpoints, profile, route, stream=stream, concurrency=concurrency,
                                  seconds=seconds, setup=setup)
                    rows.append(row)
                    progress(f"  {profile.name:<8} {'stream' if stream else 'json':<6} c={concurrency:<3} "
                             f"{route:<12} {row.wrk.rps:8.1f} req/s  p50 {row.wrk.p50_ms:7.2f} ms  "
                             f"p99 {row.wrk.p99_ms:7.2f} ms  gw CPU {row.cpu_ms_per_request.get('gateway', 0):6.3f} "
                             f"ms/req  errors {row.wrk.error_count}")
                    time.sleep(0.5)  # let connections close before the next run
    return rows

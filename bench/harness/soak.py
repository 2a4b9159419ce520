"""Memory growth over many requests: RSS of the gateway's workers against the number of requests served.

The requests rotate over the tier alias and a concrete model, JSON and streams, and over a pool of 1,000
sessions (the body's ``user`` field), like a steady population of clients. The per-session stores (tier
pins, warm-cache entries: bounded at 100,000 entries per worker) fill within the warm-up, so what grows
after it grows per request: an audit buffer, a metric label set or a cache that is never trimmed.
The load runs in segments of a few seconds; after each one the workers' RSS is read, which gives RSS as a
function of the requests served. The slope is a least-squares fit over the samples after the warm-up (the
first fifth of the requests), in KiB per 10,000 requests.
"""

from __future__ import annotations

import json
import time
from collections.abc import Callable
from dataclasses import dataclass, field
from typing import Any

from harness import procfs
from harness.configs import PROFILES, chat_body
from harness.wrk import rotating_script, run_wrk

KIB = 1024


SESSIONS = 1000


def _templates() -> list[str]:
    """JSON bodies with one ``%d`` placeholder: the session number in the ``user`` field."""
    profile = PROFILES[0]
    out = []
    for model in (profile.alias, profile.concrete_model):
        for stream in (False, True):
            body = {**chat_body(model, stream=stream), "user": "soak-client-QQQ"}
            out.append(json.dumps(body, separators=(",", ":")).replace("%", "%%").replace("QQQ", "%d"))
    return out


@dataclass
class SoakSample:
    requests: int
    seconds: float
    rss_kib: list[int]

    @property
    def total_kib(self) -> int:
        return sum(self.rss_kib)


@dataclass
class SoakReport:
    requested: int
    served: int
    seconds: float
    errors: dict[str, int]
    samples: list[SoakSample]
    warmup_requests: int
    slope_kib_per_10k: float | None  # all workers together
    growth_after_warmup_kib: int | None  # last sample minus the first sample after warm-up
    capped_by_time: bool
    worker_restarts: bool = False
    notes: list[str] = field(default_factory=list)

    def as_dict(self) -> dict[str, Any]:
        return {
            "requested": self.requested, "served": self.served, "seconds": self.seconds, "errors": self.errors,
            "warmup_requests": self.warmup_requests, "slope_kib_per_10k": self.slope_kib_per_10k,
            "growth_after_warmup_kib": self.growth_after_warmup_kib, "capped_by_time": self.capped_by_time,
            "worker_restarts": self.worker_restarts,
            "samples": [{"requests": s.requests, "seconds": s.seconds, "rss_kib": s.rss_kib} for s in self.samples],
        }


def least_squares_slope(xs: list[float], ys: list[float]) -> float | None:
    if len(xs) < 2:
        return None
    mean_x = sum(xs) / len(xs)
    mean_y = sum(ys) / len(ys)
    var = sum((x - mean_x) ** 2 for x in xs)
    if var == 0:
        return None
    return sum((x - mean_x) * (y - mean_y) for x, y in zip(xs, ys, strict=True)) / var


def run_soak(gateway_url: str, worker_pids: Callable[[], list[int]], *, total: int, cap_seconds: float,
             concurrency: int, progress: Callable[[str], None] = print) -> SoakReport:
    """Serve ``total`` requests, or as many as ``cap_seconds`` allows, in segments of ``cap_seconds / 40``
    seconds (2 at least); the last segment is shortened to what the previous rate says is left."""
    templates = _templates()
    segment_s = max(2.0, cap_seconds / 40)
    last_report = 0.0
    rate = 0.0
    start_pids = set(worker_pids())
    started = time.monotonic()
    served = 0
    errors: dict[str, int] = {}
    samples = [SoakSample(0, 0.0, [procfs.rss_bytes(p) // KIB for p in sorted(start_pids)])]
    capped = False
    while served < total:
        remaining_time = cap_seconds - (time.monotonic() - started)
        if remaining_time < 2:
            capped = True
            break
        seconds = min(segment_s, remaining_time)
        if rate > 0:
            seconds = min(seconds, max(1.0, (total - served) / rate))
        script = rotating_script("/v1/chat/completions", templates, first=served, modulo=SESSIONS)
        result = run_wrk(f"{gateway_url}/v1/chat/completions", script, connections=concurrency, seconds=seconds)
        served += result.requests
        rate = result.rps
        for kind, count in result.errors.items():
            errors[kind] = errors.get(kind, 0) + count
        pids = sorted(worker_pids())
        samples.append(SoakSample(served, round(time.monotonic() - started, 1), [procfs.rss_bytes(p) // KIB
                                                                                  for p in pids]))
        if time.monotonic() - last_report > 20 or served >= total:
            last_report = time.monotonic()
            progress(f"  soak: {served:>7,} requests, {result.rps:7.1f} req/s, workers RSS "
                     f"{' + '.join(f'{k / 1024:.1f}' for k in samples[-1].rss_kib)} MiB")
    warmup = served // 5
    after = [s for s in samples if s.requests >= warmup and s.requests > 0]
    slope = least_squares_slope([s.requests for s in after], [s.total_kib for s in after])
    return SoakReport(
        requested=total, served=served, seconds=round(time.monotonic() - started, 1), errors=errors,
        samples=samples, warmup_requests=warmup,
        slope_kib_per_10k=None if slope is None else round(slope * 10_000, 1),
        growth_after_warmup_kib=(after[-1].total_kib - after[0].total_kib) if len(after) >= 2 else None,
        capped_by_time=capped, worker_restarts=set(worker_pids()) != start_pids,
    )

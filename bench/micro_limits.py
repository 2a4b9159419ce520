"""Micro-benchmark: the gateway's CPU per request for per-key and per-team limits, in process and with Redis.

    python bench/micro_limits.py                    # Redis at redis://127.0.0.1:6379/15
    python bench/micro_limits.py --redis-url URL --requests 20000 --repeat 5

One request's limit work is what the engine does for a limited key (``routing/gateway/governance.py``): the
admission (every limit of the key and of its team checked, the request counted), the ``x-ratelimit-*``
headers, and the settlement when the answer ends (slot released, tokens and spend counted). The key and its
team each carry all four limits (rpm, tpm, concurrency, budget), set high enough that nothing is refused, so
every request does the whole work.

Rows: the in-process store (the embedded default); the Redis store with one request at a time (two round
trips each, nothing to pipeline); the Redis store with 50 requests in flight (their scripts share the one
pipelined connection, as under load). Figures are CPU time of the benchmark's thread (``time.thread_time``)
per request: the median of ``--repeat`` runs, the minimum beside it. With Redis, the Redis server's own CPU
per request (``INFO cpu``) is shown apart: it is spent in another process, on another core. The keys are
written under a fresh prefix and deleted afterwards.
"""

from __future__ import annotations

import argparse
import asyncio
import os
import statistics
import sys
import time
import uuid
from collections.abc import Awaitable, Callable
from dataclasses import dataclass, field
from pathlib import Path

sys.path.insert(0, str(Path(__file__).resolve().parents[1]))

from routing.clients.limit_store import LimitStore, ProcessLimitStore, RedisLimitStore
from routing.clients.redis_client import RespClient
from routing.core.limits import Limits, LimitScope, rate_limit_headers

HIGH = Limits(rpm=10**9, tpm=10**12, max_concurrency=10**6, budget_usd=10**6, budget_period="month")
SCOPES = (LimitScope("key", "bench-key", "key:1", HIGH), LimitScope("team", "bench-team", "team:bench", HIGH))


async def one_request(store: LimitStore, request_id: str) -> None:
    admission = await store.admit(SCOPES, request_id)
    verdict = admission.verdict
    if not verdict.admitted:
        raise RuntimeError("the benchmark's limits are meant never to refuse")
    rate_limit_headers(verdict.requests, verdict.tokens)
    await store.settle(admission, tokens=600, spend_nanos=4_500)


Work = Callable[[str], Awaitable[None]]


async def run_sequential(work: Work, count: int) -> float:
    """CPU seconds per request, one request at a time."""
    start = time.thread_time()
    for i in range(count):
        await work(f"r{i}")
    return (time.thread_time() - start) / count


async def run_concurrent(work: Work, count: int, in_flight: int = 50) -> float:
    """CPU seconds per request with ``in_flight`` requests at a time."""
    start = time.thread_time()
    for first in range(0, count, in_flight):
        await asyncio.gather(*[work(f"c{i}") for i in range(first, min(count, first + in_flight))])
    return (time.thread_time() - start) / count


async def redis_cpu_seconds(url: str) -> float:
    client = RespClient(url, timeout=2.0)
    try:
        info = await client.execute("INFO", "cpu")
    finally:
        await client.aclose()
    fields = dict(line.split(":", 1) for line in str(info).splitlines() if ":" in line)
    return float(fields["used_cpu_sys"]) + float(fields["used_cpu_user"])


async def delete_prefix(url: str, prefix: str) -> None:
    client = RespClient(url, timeout=5.0)
    try:
        cursor = "0"
        while True:
            cursor, keys = await client.execute("SCAN", cursor, "MATCH", f"{prefix}*", "COUNT", 1000)
            if keys:
                await client.execute("DEL", *keys)
            if cursor == "0":
                break
    finally:
        await client.aclose()


@dataclass
class Row:
    label: str
    gateway: list[float] = field(default_factory=list)  # CPU seconds per request, one per run
    server: list[float] = field(default_factory=list)  # Redis's CPU seconds per request, one per run


async def limit_run(redis_url: str | None, runner: str, count: int) -> tuple[float, float]:
    """One run of ``count`` requests through a fresh store (Redis when ``redis_url`` is given)."""
    prefix = f"gomodel:bench:limits:{uuid.uuid4().hex[:8]}:"
    store: LimitStore = RedisLimitStore(redis_url, prefix=prefix) if redis_url else ProcessLimitStore()

    async def work(request_id: str) -> None:
        await one_request(store, request_id)

    try:
        await work("warm-up")  # connect and load the scripts outside the measurement
        before = await redis_cpu_seconds(redis_url) if redis_url else 0.0
        per = await (run_sequential(work, count) if runner == "sequential" else run_concurrent(work, count))
        after = await redis_cpu_seconds(redis_url) if redis_url else 0.0
    finally:
        await store.aclose()
        if redis_url:
            await delete_prefix(redis_url, prefix)
    return per, (after - before) / count


async def ping_run(redis_url: str, runner: str, count: int) -> tuple[float, float]:
    """Two PINGs per request on the gateway's Redis client: what any two round trips cost on this machine."""
    client = RespClient(redis_url, timeout=2.0)

    async def work(request_id: str) -> None:
        await client.execute("PING")
        await client.execute("PING")

    try:
        await work("warm-up")
        before = await redis_cpu_seconds(redis_url)
        per = await (run_sequential(work, count) if runner == "sequential" else run_concurrent(work, count))
        after = await redis_cpu_seconds(redis_url)
    finally:
        await client.aclose()
    return per, (after - before) / count


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__, formatter_class=argparse.RawDescriptionHelpFormatter)
    parser.add_argument("--redis-url", default=os.environ.get("BENCH_REDIS_URL", "redis://127.0.0.1:6379/15"))
    parser.add_argument("--requests", type=int, default=20_000)
    parser.add_argument("--repeat", type=int, default=5)
    args = parser.parse_args()
    url, count = args.redis_url, args.requests
    plans: list[tuple[str, Callable[[], Awaitable[tuple[float, float]]]]] = [
        ("in process (embedded default)", lambda: limit_run(None, "sequential", count)),
        ("Redis, one request at a time", lambda: limit_run(url, "sequential", count)),
        ("  floor: 2 PINGs, one at a time", lambda: ping_run(url, "sequential", count)),
        ("Redis, 50 requests in flight", lambda: limit_run(url, "concurrent", count)),
        ("  floor: 2 PINGs, 50 in flight", lambda: ping_run(url, "concurrent", count)),
    ]
    rows = [Row(label) for label, _ in plans]
    for _ in range(args.repeat):  # interleaved, so that a busy spell of the machine touches every row alike
        for row, (_, plan) in zip(rows, plans, strict=True):
            gateway, server = asyncio.run(plan())
            row.gateway.append(gateway)
            row.server.append(server)
    print(f"Limit check per request (admit + headers + settle; a key and its team, 4 limits each), {count} requests"
          f" x {args.repeat} runs; CPU of the gateway's thread, and Redis's own CPU apart:")
    print(f"{'':<34} {'median us':>10} {'min us':>8} {'Redis server us':>16}")
    for row in rows:
        on_server = f"{statistics.median(row.server) * 1e6:.1f}" if any(row.server) else "-"
        print(f"{row.label:<34} {statistics.median(row.gateway) * 1e6:>10.1f} {min(row.gateway) * 1e6:>8.1f} "
              f"{on_server:>16}")
    in_process = statistics.median(rows[0].gateway)
    for limited, floor in ((rows[1], rows[2]), (rows[3], rows[4])):
        total = statistics.median(limited.gateway)
        print(f"{limited.label}: {total * 1e6:.1f} us per request (target: under 100 us with Redis); "
              f"{(total - in_process) * 1e6:+.1f} us over the in-process store, of which the two round trips "
              f"themselves cost {statistics.median(floor.gateway) * 1e6:.1f} us here")


if __name__ == "__main__":
    main()

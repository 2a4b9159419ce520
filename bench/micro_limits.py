"""Micro-benchmark: the gateway's CPU per request for per-key and per-team limits, in process and with Redis.

    python bench/micro_limits.py                    # Redis at redis://127.0.0.1:6379/15
    python bench/micro_limits.py --redis-url URL --requests 20000 --repeat 5 --loop uvloop
    git archive <commit> routing | tar -x -C /tmp/before      # an earlier version's code, to compare with:
    python bench/micro_limits.py --before /tmp/before

One request's limit work is what the engine does for a limited key (``routing/gateway/governance.py``): the
admission (every limit of the key and of its team checked, the request counted), the ``x-ratelimit-*``
headers, and the settlement when the answer ends (slot released, tokens and spend counted). The key and its
team each carry all four limits (rpm, tpm, concurrency, budget), set high enough that nothing is refused, so
every request does the whole work. Each request holds a reservation (700 tokens, 4,500 nano-dollars) from its
admission to its settlement, as a request with ``max_tokens`` does; the rows marked "no reservation" leave it out,
so the difference is what reserving costs. With Redis that is one round trip (the admission) and one write that
is not waited for (the settlement).

The history rows measure a refused tokens-per-minute admission in Redis with 1k, 10k and 100k answers counted in
the window: the token window is one-second buckets, so the script's work (Redis's CPU, shown per admission) must
stay flat whatever the history.

Rows: the in-process store (the embedded default); the Redis store with one request at a time (nothing to
pipeline); the Redis store with 50 requests in flight (their scripts share the one pipelined connection, as
under load); beside each Redis row, the same I/O with bare commands on the same client (a PING waited for, then
one sent and not waited for), the least a check counted in Redis can cost. Figures are CPU time of the
benchmark's thread (``time.thread_time``) per request: the median of ``--repeat`` runs, the minimum beside it.
With Redis, the Redis server's own CPU per request (``INFO cpu``) is shown apart: it is spent in another
process, on another core. The keys are written under a fresh prefix and deleted afterwards.

``--before DIR`` measures the ``routing`` package found in DIR as well (each of its runs in a child process
importing it), interleaved with this checkout's runs, so that a busy spell of the machine touches both alike.
"""

from __future__ import annotations

import argparse
import asyncio
import functools
import inspect
import json
import os
import statistics
import subprocess
import sys
import time
import uuid
from collections.abc import Awaitable, Callable, Coroutine
from dataclasses import dataclass, field
from pathlib import Path
from typing import Any

HERE = Path(__file__).resolve()
sys.path.insert(0, os.environ.get("GOMODEL_BENCH_TREE") or str(HERE.parents[1]))  # the code measured

from routing.clients.limit_store import LimitStore, ProcessLimitStore, RedisLimitStore  # noqa: E402
from routing.clients.redis_client import RespClient  # noqa: E402
from routing.core.limits import Limits, LimitScope, rate_limit_headers  # noqa: E402

try:  # reservations exist from this version on; an earlier tree (--before) measures without them
    from routing.core.limits import NO_RESERVATION, Reservation
    RESERVED: Any = Reservation(700, 4_500)
except ImportError:
    RESERVED = NO_RESERVATION = None

HIGH = Limits(rpm=10**9, tpm=10**12, max_concurrency=10**6, budget_usd=10**6, budget_period="month")
SCOPES = (LimitScope("key", "bench-key", "key:1", HIGH), LimitScope("team", "bench-team", "team:bench", HIGH))
IN_FLIGHT = 50


async def one_request(store: LimitStore, request_id: str, reservation: Any = None) -> None:
    admission = await (store.admit(SCOPES, request_id) if reservation is None
                       else store.admit(SCOPES, request_id, reservation))
    verdict = admission.verdict
    if not verdict.admitted:
        raise RuntimeError("the benchmark's limits are meant never to refuse")
    rate_limit_headers(verdict.requests, verdict.tokens)
    settled: Any = store.settle(admission, tokens=600, spend_nanos=4_500)
    if inspect.isawaitable(settled):  # code from before settlements stopped being awaited (--before)
        await settled
    elif settled:  # queued: as routing.gateway.governance.settle_limits, it goes out before the answer
        await asyncio.sleep(0)


Work = Callable[[str], Awaitable[None]]


async def run_sequential(work: Work, count: int) -> float:
    """CPU seconds per request, one request at a time."""
    start = time.thread_time()
    for i in range(count):
        await work(f"r{i}")
    return (time.thread_time() - start) / count


async def run_concurrent(work: Work, count: int, in_flight: int = IN_FLIGHT) -> float:
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


def _limit_store(redis_url: str | None, prefix: str) -> LimitStore:
    """The store as the gateway makes it: budget alerts at the default thresholds (never crossed here, as on most
    settlements), where the code measured has them (not before them, with --before)."""
    kind: Any = RedisLimitStore if redis_url else ProcessLimitStore
    extra: dict[str, Any] = {}
    if "alert_thresholds" in inspect.signature(kind).parameters:
        extra = {"alert_thresholds": (50, 80, 100), "on_crossing": lambda crossing: None}
    return kind(redis_url, prefix=prefix, **extra) if redis_url else kind(**extra)


async def limit_run(redis_url: str | None, runner: str, count: int, reserve: bool = True) -> tuple[float, float]:
    """One run of ``count`` requests through a fresh store (Redis when ``redis_url`` is given)."""
    prefix = f"gomodel:bench:limits:{uuid.uuid4().hex[:8]}:"
    store = _limit_store(redis_url, prefix)
    reservation = RESERVED if reserve else None

    async def work(request_id: str) -> None:
        await one_request(store, request_id, reservation)

    try:
        await work("warm-up")  # connect and load the scripts outside the measurement
        await work("warm-up-2")  # the settlement script is loaded by the first settlement
        before = await redis_cpu_seconds(redis_url) if redis_url else 0.0
        per = await (run_sequential(work, count) if runner == "sequential" else run_concurrent(work, count))
        after = await redis_cpu_seconds(redis_url) if redis_url else 0.0
    finally:
        await store.aclose()
        if redis_url:
            await delete_prefix(redis_url, prefix)
    return per, (after - before) / count


async def ping_run(redis_url: str, runner: str, count: int) -> tuple[float, float]:
    """The I/O of a check alone, on the gateway's Redis client: one PING waited for (the admission's round
    trip), then one sent but not waited for (the settlement; a yield when it was queued behind others)."""
    from routing.clients.redis_client import Sent  # here: only this checkout's rows measure the floor

    client = RespClient(redis_url, timeout=2.0)
    ping = b"*1\r\n$4\r\nPING\r\n"

    async def work(request_id: str) -> None:
        await client.execute("PING")
        if client.send_unawaited(ping, _ignore) is Sent.QUEUED:
            await asyncio.sleep(0)

    try:
        await work("warm-up")
        before = await redis_cpu_seconds(redis_url)
        per = await (run_sequential(work, count) if runner == "sequential" else run_concurrent(work, count))
        after = await redis_cpu_seconds(redis_url)
    finally:
        await client.aclose()
    return per, (after - before) / count


def _ignore(reply: object) -> None:
    return None


HISTORY_ADMISSIONS = 2_000  # refused admissions measured per history size


async def history_run(redis_url: str, history: int) -> tuple[float, float]:
    """CPU per refused tokens-per-minute admission (the gateway's thread, then Redis's) with ``history`` answers
    counted in the window, settled as fast as the store sends them (a busy key's minute)."""
    prefix = f"gomodel:bench:history:{uuid.uuid4().hex[:8]}:"
    store = RedisLimitStore(redis_url, prefix=prefix)
    counting = (LimitScope("key", "busy", "key:busy", Limits(tpm=10**12)),)
    refusing = (LimitScope("key", "busy", "key:busy", Limits(tpm=1)),)  # the same keys, a limit already reached
    try:
        admission = await store.admit(counting, "history")
        for start in range(0, history, 1000):
            for _ in range(min(1000, history - start)):
                store.settle(admission, tokens=1, spend_nanos=0)
            await store.admit(counting, f"sync-{start}")  # waits behind the settlements just sent
        before = await redis_cpu_seconds(redis_url)
        started = time.thread_time()
        for i in range(HISTORY_ADMISSIONS):
            if (await store.admit(refusing, f"refused-{i}")).verdict.admitted:
                raise RuntimeError("the history run's admissions are meant to be refused")
        per = (time.thread_time() - started) / HISTORY_ADMISSIONS
        after = await redis_cpu_seconds(redis_url)
    finally:
        await store.aclose()
        await delete_prefix(redis_url, prefix)
    return per, (after - before) / HISTORY_ADMISSIONS


# Each row: its label, and how to measure it (store or PING, Redis or not, one at a time or 50 in flight).
ROWS: dict[str, tuple[str, str, str]] = {
    "in-process": ("in process (embedded default)", "limits-local", "sequential"),
    "in-process-plain": ("  in process, no reservation", "limits-local-plain", "sequential"),
    "redis-sequential": ("Redis, one request at a time", "limits", "sequential"),
    "ping-sequential": ("  floor: its I/O alone, one at a time", "ping", "sequential"),
    "redis-concurrent": (f"Redis, {IN_FLIGHT} requests in flight", "limits", "concurrent"),
    "redis-concurrent-plain": (f"  {IN_FLIGHT} in flight, no reservation", "limits-plain", "concurrent"),
    "ping-concurrent": (f"  floor: its I/O alone, {IN_FLIGHT} in flight", "ping", "concurrent"),
    "history-1k": ("Redis, a refused tpm admission, 1k answers in the window", "history:1000", ""),
    "history-10k": ("  10k answers in the window", "history:10000", ""),
    "history-100k": ("  100k answers in the window", "history:100000", ""),
}
COMPARED = ("in-process", "redis-sequential", "redis-concurrent")  # the rows measured with --before too


def measure(row: str, url: str, count: int) -> Coroutine[Any, Any, tuple[float, float]]:
    _, what, runner = ROWS[row]
    if what == "ping":
        return ping_run(url, runner, count)
    if what.startswith("history:"):
        return history_run(url, int(what.split(":", 1)[1]))
    local = what.startswith("limits-local")
    return limit_run(None if local else url, runner, count, reserve=not what.endswith("-plain"))


def run_loop(work: Coroutine[Any, Any, tuple[float, float]], loop: str) -> tuple[float, float]:
    if loop == "uvloop":
        import uvloop

        return uvloop.run(work)
    return asyncio.run(work)


def run_here(row: str, args: argparse.Namespace) -> tuple[float, float]:
    return run_loop(measure(row, args.redis_url, args.requests), args.loop)


def run_before(tree: str, row: str, args: argparse.Namespace) -> tuple[float, float]:
    """One run of ``row`` in a child process importing the ``routing`` package of ``tree``."""
    done = subprocess.run(
        [sys.executable, str(HERE), "--worker", row, "--redis-url", args.redis_url, "--requests", str(args.requests),
         "--loop", args.loop],
        env={**os.environ, "GOMODEL_BENCH_TREE": str(Path(tree).resolve())}, capture_output=True, text=True,
        check=False, timeout=600)
    if done.returncode != 0:
        raise RuntimeError(f"the run of {row} in {tree} failed:\n{done.stderr[-3000:]}")
    gateway, server = json.loads(done.stdout)
    return gateway, server


@dataclass
class Row:
    label: str
    gateway: list[float] = field(default_factory=list)  # CPU seconds per request, one per run
    server: list[float] = field(default_factory=list)  # Redis's CPU seconds per request, one per run


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__, formatter_class=argparse.RawDescriptionHelpFormatter)
    parser.add_argument("--redis-url", default=os.environ.get("BENCH_REDIS_URL", "redis://127.0.0.1:6379/15"))
    parser.add_argument("--requests", type=int, default=20_000)
    parser.add_argument("--repeat", type=int, default=5)
    parser.add_argument("--loop", choices=("asyncio", "uvloop"), default="asyncio",
                        help="the event loop (the gateway runs on either; granian and uvicorn pick uvloop)")
    parser.add_argument("--before", metavar="DIR", help="also measure the routing package in DIR (see above)")
    parser.add_argument("--worker", choices=tuple(ROWS), help=argparse.SUPPRESS)  # one run, as JSON (--before)
    args = parser.parse_args()
    count = args.requests
    if args.worker:
        print(json.dumps(run_here(args.worker, args)))
        return
    plans: list[tuple[str, Callable[[], tuple[float, float]]]] = []
    for name, (label, _, _) in ROWS.items():
        plans.append((label, functools.partial(run_here, name, args)))
        if args.before and name in COMPARED:
            plans.append((f"{label} (before)", functools.partial(run_before, args.before, name, args)))
    rows = [Row(label) for label, _ in plans]
    for _ in range(args.repeat):  # interleaved, so that a busy spell of the machine touches every row alike
        for row, (_, plan) in zip(rows, plans, strict=True):
            gateway, server = plan()
            row.gateway.append(gateway)
            row.server.append(server)
    width = max(len(row.label) for row in rows) + 2
    print(f"Limit check per request (admit + headers + settle; a key and its team, 4 limits each), {count} requests"
          f" x {args.repeat} runs on {args.loop}; CPU of the gateway's thread, and Redis's own CPU apart:")
    print(f"{'':<{width}} {'median us':>10} {'min us':>8} {'Redis server us':>16}")
    for row in rows:
        on_server = f"{statistics.median(row.server) * 1e6:.1f}" if any(row.server) else "-"
        print(f"{row.label:<{width}} {statistics.median(row.gateway) * 1e6:>10.1f} {min(row.gateway) * 1e6:>8.1f} "
              f"{on_server:>16}")
    by_label = {row.label: statistics.median(row.gateway) for row in rows}
    in_process = by_label[ROWS["in-process"][0]]
    for limited, floor in (("redis-sequential", "ping-sequential"), ("redis-concurrent", "ping-concurrent")):
        label = ROWS[limited][0]
        total = by_label[label]
        print(f"{label}: {total * 1e6:.1f} us per request (target: under 100 us with Redis); "
              f"{(total - in_process) * 1e6:+.1f} us over the in-process store, of which its I/O alone (one PING "
              f"waited for, one not) costs {by_label[ROWS[floor][0]] * 1e6:.1f} us here")
    for with_it, without in (("in-process", "in-process-plain"), ("redis-concurrent", "redis-concurrent-plain")):
        print(f"{ROWS[with_it][0]}: holding the reservation costs "
              f"{(by_label[ROWS[with_it][0]] - by_label[ROWS[without][0]]) * 1e6:+.1f} us per request")
    servers = {row.label: statistics.median(row.server) for row in rows}
    flat = [servers[ROWS[name][0]] * 1e6 for name in ("history-1k", "history-10k", "history-100k")]
    print(f"A refused tpm admission costs Redis {flat[0]:.1f} / {flat[1]:.1f} / {flat[2]:.1f} us with 1k / 10k / 100k "
          f"answers in the window (flat: the window is at most 61 one-second buckets)")


if __name__ == "__main__":
    main()

"""Micro-benchmark: the provider HTTP client alone, the gateway's own (``routing.clients.http1``) against aiohttp.

    python bench/micro_provider_client.py              # 3 interleaved rounds, 2 s per row
    python bench/micro_provider_client.py --rounds 5 --seconds 3

One process, one event loop (uvloop), 50 concurrent requests against the provider simulator started on a free
loopback port: a JSON answer (read whole) and a 20-chunk stream (read piece by piece). The figure is the CPU
time of the benchmark's thread per request (``time.thread_time``): the simulator runs in another process and
other work on the machine does not count, so the client's own cost shows without a server's noise around it.
Rows are interleaved round by round so that a change in the machine's state hits every client alike; the
median over rounds is printed with the minimum beside it.

``aiohttp`` is set up as a gateway would use it: one session with a connector without limits, keep-alive, no
cookie jar, no redirects, no decompression, the URL parsed once, ``iter_any()`` for streams. It is the floor of
any client built on aiohttp; the gateway would add its own slots, size caps and deadlines on top.
"""

from __future__ import annotations

import argparse
import asyncio
import json
import socket
import statistics
import subprocess
import sys
import time
import urllib.request
from collections.abc import Awaitable, Callable
from pathlib import Path

import aiohttp
import uvloop
import yarl

REPO = Path(__file__).resolve().parents[1]
sys.path.insert(0, str(REPO))

from routing.clients.http1 import Pool  # noqa: E402

CONCURRENCY = 50
HEADERS = {"content-type": "application/json", "authorization": "Bearer sk-bench"}
MESSAGES = [{"role": "user", "content": "hi"}]


def body(stream: bool) -> bytes:
    return json.dumps({"model": "sim/instant", "messages": MESSAGES, "stream": stream}).encode()


def free_port() -> int:
    with socket.socket() as probe:
        probe.bind(("127.0.0.1", 0))
        return int(probe.getsockname()[1])


def start_simulator(port: int) -> subprocess.Popen[bytes]:
    process = subprocess.Popen([sys.executable, "-m", "routing.simulator", "--port", str(port)], cwd=REPO,
                               stdout=subprocess.DEVNULL, stderr=subprocess.DEVNULL)
    deadline = time.monotonic() + 30
    while time.monotonic() < deadline:
        try:
            with urllib.request.urlopen(f"http://127.0.0.1:{port}/v1/models", timeout=1):
                return process
        except OSError:
            time.sleep(0.1)
    process.kill()
    raise SystemExit("the simulator did not start")


Send = Callable[[bool], Awaitable[None]]


async def measure(send: Send, stream: bool, seconds: float) -> float:
    """CPU milliseconds of this thread per request, after a 0.5 s warm-up."""
    count = 0

    async def worker(stop: float) -> None:
        nonlocal count
        while time.perf_counter() < stop:
            await send(stream)
            count += 1

    await asyncio.gather(*(worker(time.perf_counter() + 0.5) for _ in range(CONCURRENCY)))
    count = 0
    cpu = time.thread_time()
    await asyncio.gather(*(worker(time.perf_counter() + seconds) for _ in range(CONCURRENCY)))
    return (time.thread_time() - cpu) / count * 1000


async def http1_sender(url: str) -> tuple[Send, Callable[[], Awaitable[None]]]:
    pool = Pool(max_connections=1000, max_idle_per_origin=1000, keepalive_expiry=30.0)

    async def send(stream: bool) -> None:
        response = await pool.request("POST", url, HEADERS, body(stream), timeout=30.0, connect_timeout=5.0,
                                      idle_timeout=300.0 if stream else None)
        if stream:
            async for _ in response.aiter_raw():
                pass
        else:
            await response.aread()

    async def close() -> None:
        pool.close()

    return send, close


async def aiohttp_sender(url: str) -> tuple[Send, Callable[[], Awaitable[None]]]:
    session = aiohttp.ClientSession(connector=aiohttp.TCPConnector(limit=0, keepalive_timeout=30.0),
                                    cookie_jar=aiohttp.DummyCookieJar(), auto_decompress=False,
                                    timeout=aiohttp.ClientTimeout(total=30.0))
    target = yarl.URL(url)

    async def send(stream: bool) -> None:
        response = await session.post(target, data=body(stream), headers=HEADERS, allow_redirects=False)
        if stream:
            async for _ in response.content.iter_any():
                pass
        else:
            await response.read()
        response.release()

    return send, session.close


async def run(url: str, rounds: int, seconds: float) -> dict[tuple[str, str], list[float]]:
    results: dict[tuple[str, str], list[float]] = {}
    for _ in range(rounds):
        for name, factory in (("http1", http1_sender), ("aiohttp", aiohttp_sender)):
            send, close = await factory(url)
            for stream in (False, True):
                results.setdefault((name, "stream" if stream else "json"), []).append(
                    await measure(send, stream, seconds))
            await close()
    return results


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    parser.add_argument("--rounds", type=int, default=3)
    parser.add_argument("--seconds", type=float, default=2.0)
    args = parser.parse_args()
    port = free_port()
    simulator = start_simulator(port)
    try:
        results = uvloop.run(run(f"http://127.0.0.1:{port}/v1/chat/completions", args.rounds, args.seconds))
    finally:
        simulator.terminate()
        simulator.wait(10)
    print(f"{'client':10} {'answer':8} {'median ms':>10} {'min ms':>8}")
    for (name, kind), values in results.items():
        print(f"{name:10} {kind:8} {statistics.median(values):10.4f} {min(values):8.4f}")
    for kind in ("json", "stream"):
        difference = statistics.median(results[("aiohttp", kind)]) - statistics.median(results[("http1", kind)])
        print(f"aiohttp - http1, {kind}: {difference:+.4f} ms per request")


if __name__ == "__main__":
    main()

"""cProfile of the gateway's request path in one process, without an HTTP server in front.

    python bench/harness/inprocess.py --body JSON [--requests 2000] [--concurrency 10]

Run by ``bench/run.py`` as a child process with the gateway's environment (database, routing config).
It imports ``gomodel_site.asgi``, calls the ASGI application directly with an in-memory ``receive`` and
``send`` (``--concurrency`` requests in flight on one event loop), and profiles the measured requests with
cProfile: the figures are CPU per request of the Python code the gateway runs, call counts included, so a
function called many times per request stands out. The upstream is the real simulator over HTTP.
Prints a JSON object on the last line.
"""

from __future__ import annotations

import argparse
import asyncio
import cProfile
import json
import pstats
import sys
import time
from pathlib import Path
from typing import Any

REPO = Path(__file__).resolve().parents[2]
sys.path.insert(0, str(REPO))


async def call_app(app: Any, body: bytes) -> int:
    """One request through the ASGI application; returns the status."""
    scope = {
        "type": "http", "asgi": {"version": "3.0", "spec_version": "2.3"}, "http_version": "1.1",
        "method": "POST", "scheme": "http", "path": "/v1/chat/completions", "raw_path": b"/v1/chat/completions",
        "query_string": b"", "root_path": "",
        "headers": [(b"host", b"127.0.0.1"), (b"content-type", b"application/json"),
                    (b"content-length", str(len(body)).encode())],
        "client": ("127.0.0.1", 40000), "server": ("127.0.0.1", 8000),
    }
    sent_body = False
    done = asyncio.Event()
    status = 0

    async def receive() -> dict[str, Any]:
        nonlocal sent_body
        if not sent_body:
            sent_body = True
            return {"type": "http.request", "body": body, "more_body": False}
        await done.wait()
        return {"type": "http.disconnect"}

    async def send(message: dict[str, Any]) -> None:
        nonlocal status
        if message["type"] == "http.response.start":
            status = message["status"]
        elif message["type"] == "http.response.body" and not message.get("more_body", False):
            done.set()

    await app(scope, receive, send)
    done.set()
    return status


async def drive(app: Any, body: bytes, count: int, concurrency: int) -> list[int]:
    statuses: list[int] = []
    remaining = count

    async def worker() -> None:
        nonlocal remaining
        while remaining > 0:
            remaining -= 1
            statuses.append(await call_app(app, body))

    await asyncio.gather(*(worker() for _ in range(concurrency)))
    return statuses


def _name(key: tuple[str, int, str]) -> str:
    filename, line, function = key
    for marker in ("site-packages/", "python3.11/"):
        if marker in filename:
            filename = filename.split(marker, 1)[1]
            break
    else:
        filename = filename.replace(str(REPO) + "/", "")
    return f"{function} ({filename}:{line})"


def summarise(stats: pstats.Stats, requests: int, top: int) -> dict[str, Any]:
    """Calls per request, and the functions with the most own time and (project code) cumulative time.

    Coroutines count one call per resumption, so their call counts are higher than the requests.
    """
    table = stats.stats  # type: ignore[attr-defined]
    total = sum(row[2] for row in table.values()) or 1.0
    calls = sum(row[1] for row in table.values())
    by_own = sorted(table.items(), key=lambda item: item[1][2], reverse=True)[:top]
    project = [item for item in table.items() if item[0][0].startswith(str(REPO))
               and not any(m in item[0][0] for m in ("site-packages", "/bench/"))]
    by_cumulative = sorted(project, key=lambda item: item[1][3], reverse=True)[:top]
    return {
        "python_calls_per_request": round(calls / requests),
        "own_time": [(_name(k), round(v[1] / requests, 2), round(100 * v[2] / total, 1)) for k, v in by_own],
        "project_cumulative": [(_name(k), round(v[1] / requests, 2), round(100 * v[3] / total, 1))
                               for k, v in by_cumulative],
    }


def main() -> int:
    parser = argparse.ArgumentParser()
    parser.add_argument("--body", required=True, help="JSON request body")
    parser.add_argument("--requests", type=int, default=2000)
    parser.add_argument("--warmup", type=int, default=300)
    parser.add_argument("--concurrency", type=int, default=10)
    parser.add_argument("--top", type=int, default=35)
    parser.add_argument("--stats-file", default=None, help="write the profile here as a pstats file")
    args = parser.parse_args()

    from gomodel_site.asgi import application

    body = args.body.encode()
    loop = asyncio.new_event_loop()
    loop.run_until_complete(drive(application, body, args.warmup, args.concurrency))
    # Unprofiled first: the CPU per request of the whole process (event loop and helper threads) and of
    # the event-loop thread alone, which is what the profile below breaks down.
    process_before, thread_before = time.process_time(), time.thread_time()
    statuses = loop.run_until_complete(drive(application, body, args.requests, args.concurrency))
    process_cpu, thread_cpu = time.process_time() - process_before, time.thread_time() - thread_before
    # thread_time: a lock wait in the event loop's thread must not be charged the CPU of another thread.
    profiler = cProfile.Profile(time.thread_time)
    profiler.enable()
    statuses += loop.run_until_complete(drive(application, body, args.requests, args.concurrency))
    profiler.disable()
    if args.stats_file:
        profiler.dump_stats(args.stats_file)
    bad = sum(1 for status in statuses if status != 200)
    print(json.dumps({"requests": args.requests, "non_200": bad,
                      "process_cpu_ms_per_request": round(process_cpu / args.requests * 1000, 3),
                      "event_loop_thread_cpu_ms_per_request": round(thread_cpu / args.requests * 1000, 3),
                      **summarise(pstats.Stats(profiler), args.requests, args.top)}))
    return 0 if bad == 0 else 1


if __name__ == "__main__":
    sys.exit(main())

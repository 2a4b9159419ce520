"""Hold many slow streams open through the gateway at once and count every way one can go wrong.

The client is plain asyncio sockets speaking HTTP/1.1 (one connection per stream, chunked transfer
decoded by hand), so a thousand streams cost it little and it depends on no HTTP library's pool limits.
A stream counts as good when it answers 200, delivers at least the expected number of ``data:`` events and
ends with ``data: [DONE]`` and the closing zero-length chunk. Gaps between chunks are recorded too: a proxy
that buffers would show one long gap instead of a chunk a second.
"""

from __future__ import annotations

import asyncio
import json
import time
from collections import Counter
from collections.abc import Callable
from dataclasses import dataclass, field
from typing import Any


@dataclass
class StreamOutcome:
    ok: bool
    error: str | None
    status: int | None
    events: int
    ttfb_s: float | None
    duration_s: float
    max_gap_s: float


@dataclass
class StreamState:
    """Live counters shared by the streams, read by the sampler: a stream is open from its response
    headers to its end."""

    open_now: int = 0
    open_max: int = 0
    finished: int = 0

    def opened(self) -> None:
        self.open_now += 1
        self.open_max = max(self.open_max, self.open_now)

    def closed(self) -> None:
        self.open_now -= 1
        self.finished += 1


def _request_bytes(host: str, port: int, path: str, body: dict[str, Any]) -> bytes:
    payload = json.dumps(body, separators=(",", ":")).encode()
    head = (f"POST {path} HTTP/1.1\r\nHost: {host}:{port}\r\nContent-Type: application/json\r\n"
            f"Accept: text/event-stream\r\nContent-Length: {len(payload)}\r\nConnection: close\r\n\r\n")
    return head.encode("latin-1") + payload


async def _read_response(reader: asyncio.StreamReader, started: float,
                         on_headers: Callable[[], None]) -> tuple[int, bytes, float | None, float]:
    """(status, body, time to first body byte, longest gap between two body chunks)."""
    head = await reader.readuntil(b"\r\n\r\n")
    on_headers()
    status = int(head.split(b" ", 2)[1])
    headers = head.lower()
    body = bytearray()
    ttfb: float | None = None
    max_gap = 0.0
    last = time.monotonic()
    if b"transfer-encoding: chunked" in headers:
        while True:
            size_line = await reader.readuntil(b"\r\n")
            size = int(size_line.split(b";")[0].strip(), 16)
            data = await reader.readexactly(size + 2)
            now = time.monotonic()
            if ttfb is None:
                ttfb = now - started
            else:
                max_gap = max(max_gap, now - last)
            last = now
            if size == 0:
                break
            body += data[:-2]
    else:
        length = 0
        for line in headers.split(b"\r\n"):
            if line.startswith(b"content-length:"):
                length = int(line.split(b":", 1)[1])
        body += await reader.readexactly(length)
        ttfb = time.monotonic() - started
    return status, bytes(body), ttfb, max_gap


async def _one_stream(host: str, port: int, request: bytes, expected_events: int, timeout_s: float,
                      state: StreamState) -> StreamOutcome:
    started = time.monotonic()
    writer = None
    counted = False
    try:
        reader, writer = await asyncio.wait_for(asyncio.open_connection(host, port), 10)
        writer.write(request)
        await writer.drain()

        def on_headers() -> None:
            nonlocal counted
            state.opened()
            counted = True

        status, body, ttfb, max_gap = await asyncio.wait_for(_read_response(reader, started, on_headers),
                                                             timeout_s)
        events = body.count(b"data: ")
        if status != 200:
            error = f"status {status}"
        elif b"data: [DONE]" not in body:
            error = "no [DONE]"
        elif events < expected_events:
            error = f"only {events} events"
        else:
            error = None
        return StreamOutcome(error is None, error, status, events, ttfb, time.monotonic() - started, max_gap)
    except TimeoutError:
        return StreamOutcome(False, "timeout", None, 0, None, time.monotonic() - started, 0.0)
    except (OSError, asyncio.IncompleteReadError, asyncio.LimitOverrunError, ValueError) as exc:
        return StreamOutcome(False, type(exc).__name__, None, 0, None, time.monotonic() - started, 0.0)
    finally:
        if counted:
            state.closed()
        if writer is not None:
            writer.close()


@dataclass
class StreamReport:
    streams: int
    ok: int
    errors: dict[str, int]
    open_max: int
    ramp_s: float
    wall_s: float
    ttfb_p50_s: float | None
    ttfb_p99_s: float | None
    ttfb_max_s: float | None
    duration_p50_s: float | None
    duration_max_s: float | None
    max_gap_s: float
    samples: list[dict[str, Any]] = field(default_factory=list)


def _quantile(values: list[float], q: float) -> float | None:
    if not values:
        return None
    ordered = sorted(values)
    return round(ordered[min(len(ordered) - 1, int(q * len(ordered)))], 3)


async def hold_streams(host: str, port: int, body: dict[str, Any], *, count: int, expected_events: int,
                       stream_seconds: float, ramp_seconds: float, sampler: Any = None) -> StreamReport:
    """Open ``count`` streams over ``ramp_seconds``, hold them all, and report; ``sampler(state)`` runs
    once a second meanwhile and its results are kept as ``samples``."""
    request = _request_bytes(host, port, "/v1/chat/completions", body)
    state = StreamState()
    samples: list[dict[str, Any]] = []
    timeout_s = stream_seconds + 60
    started = time.monotonic()

    async def sample_loop() -> None:
        while True:
            if sampler is not None:
                samples.append({"t": round(time.monotonic() - started, 1), "open": state.open_now, **sampler()})
            await asyncio.sleep(1.0)

    sampling = asyncio.create_task(sample_loop())
    tasks = []
    for index in range(count):
        tasks.append(asyncio.create_task(_one_stream(host, port, request, expected_events, timeout_s, state)))
        # Spread the openings evenly over the ramp: a burst of 1,000 SYNs tests the listen backlog, not streaming.
        target = started + ramp_seconds * (index + 1) / count
        delay = target - time.monotonic()
        if delay > 0:
            await asyncio.sleep(delay)
    ramp = time.monotonic() - started
    outcomes = await asyncio.gather(*tasks)
    sampling.cancel()
    wall = time.monotonic() - started
    errors = Counter(o.error for o in outcomes if not o.ok)
    good = [o for o in outcomes if o.ok]
    return StreamReport(
        streams=count, ok=len(good), errors=dict(errors), open_max=state.open_max, ramp_s=round(ramp, 2),
        wall_s=round(wall, 2),
        ttfb_p50_s=_quantile([o.ttfb_s for o in good if o.ttfb_s is not None], 0.5),
        ttfb_p99_s=_quantile([o.ttfb_s for o in good if o.ttfb_s is not None], 0.99),
        ttfb_max_s=_quantile([o.ttfb_s for o in good if o.ttfb_s is not None], 1.0),
        duration_p50_s=_quantile([o.duration_s for o in good], 0.5),
        duration_max_s=_quantile([o.duration_s for o in good], 1.0),
        max_gap_s=round(max((o.max_gap_s for o in good), default=0.0), 3),
        samples=samples,
    )

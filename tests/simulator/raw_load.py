"""A small raw HTTP/1.1 load client (asyncio streams, keep-alive), light enough to drive the simulator
with a thousand connections from one test process."""

from __future__ import annotations

import asyncio
import json
import time
from typing import Any


def request_bytes(path: str, body: dict[str, Any], headers: dict[str, str] | None = None) -> bytes:
    payload = json.dumps(body).encode()
    lines = [f"POST {path} HTTP/1.1", "host: simulator", "content-type: application/json",
             f"content-length: {len(payload)}", *(f"{k}: {v}" for k, v in (headers or {}).items())]
    return ("\r\n".join(lines) + "\r\n\r\n").encode() + payload


async def read_response(reader: asyncio.StreamReader) -> tuple[int, bytes]:
    """(status, body) of one response, with a content-length or a chunked body."""
    head = await reader.readuntil(b"\r\n\r\n")
    status = int(head.split(b" ", 2)[1])
    length = None
    chunked = False
    for line in head.split(b"\r\n")[1:]:
        name, _, value = line.partition(b":")
        if name.lower() == b"content-length":
            length = int(value)
        elif name.lower() == b"transfer-encoding" and b"chunked" in value.lower():
            chunked = True
    if not chunked:
        return status, await reader.readexactly(length or 0)
    parts = []
    while True:
        size = int((await reader.readuntil(b"\r\n")).split(b";")[0], 16)
        data = await reader.readexactly(size + 2)
        if size == 0:
            return status, b"".join(parts)
        parts.append(data[:-2])


async def _one_exchange(host: str, port: int, request: bytes) -> tuple[int, bytes]:
    reader, writer = await asyncio.open_connection(host, port)
    try:
        writer.write(request)
        return await read_response(reader)
    finally:
        writer.close()


def concurrent_exchanges(host: str, port: int, request: bytes, count: int) -> list[tuple[int, bytes] | BaseException]:
    """Send ``request`` on ``count`` connections at once; each connection's (status, body) or error."""
    async def run() -> list[tuple[int, bytes] | BaseException]:
        return await asyncio.gather(*(_one_exchange(host, port, request) for _ in range(count)),
                                    return_exceptions=True)
    return asyncio.run(run())


def throughput(host: str, port: int, request: bytes, connections: int, seconds: float) -> tuple[int, int]:
    """(responses, non-200 responses) over ``seconds`` from ``connections`` keep-alive connections."""
    async def worker(deadline: float) -> tuple[int, int]:
        reader, writer = await asyncio.open_connection(host, port)
        done = failed = 0
        try:
            while time.monotonic() < deadline:
                writer.write(request)
                status, _ = await read_response(reader)
                done += 1
                failed += status != 200
        finally:
            writer.close()
        return done, failed

    async def run() -> tuple[int, int]:
        deadline = time.monotonic() + seconds
        results = await asyncio.gather(*(worker(deadline) for _ in range(connections)))
        return sum(r[0] for r in results), sum(r[1] for r in results)
    return asyncio.run(run())

"""Send a rendered answer on its schedule, and break it on purpose when a fault says so.

Each function returns the outcome recorded for the request: ``completed``, ``disconnected`` (the client
left first), ``cut`` (the connection was dropped mid-answer) or ``stream_error`` (the provider's
in-stream error event ended the stream).
"""

from __future__ import annotations

from dataclasses import dataclass

from routing.simulator.asgi_io import Connection
from routing.simulator.wire.base import Headers, StreamBody

COMPLETED = "completed"
DISCONNECTED = "disconnected"
CUT = "cut"
STREAM_ERROR = "stream_error"


@dataclass(frozen=True, slots=True)
class StreamSchedule:
    ttfb_s: float  # before the headers, the opening events and the first content chunk
    interval_s: float  # between content chunks
    cut_after: int | None = None  # drop the connection after this many content chunks
    error_after: int | None = None  # send ``error_event`` after this many content chunks
    error_event: bytes = b""
    corrupt: bool = False  # break the JSON of the first data line that carries content


async def deliver_json(conn: Connection, status: int, headers: Headers, body: bytes, *, delay_s: float,
                       cut: bool = False, corrupt: bool = False) -> str:
    """A complete JSON response after ``delay_s``; ``cut`` drops the connection halfway through the body,
    ``corrupt`` sends a complete HTTP response whose JSON is cut in half."""
    if not await conn.pause(delay_s):
        return DISCONNECTED
    if cut:
        await conn.start(status, [*headers, (b"content-length", str(len(body)).encode())])
        await conn.write(body[: len(body) // 2])
        conn.chunks_sent = 1
        await conn.abort()
        return CUT
    await conn.respond(status, headers, body[: max(1, len(body) // 2)] if corrupt else body)
    return COMPLETED


async def deliver_stream(conn: Connection, headers: Headers, stream: StreamBody, schedule: StreamSchedule) -> str:
    """A streamed answer, paced: opening and first chunk after ``ttfb_s``, the rest ``interval_s`` apart."""
    opening, paced, closing = stream.opening, list(stream.paced), stream.closing
    if schedule.corrupt:
        if paced:
            paced[0] = broken(paced[0])
        else:
            closing = broken(closing)
    if not await conn.pause(schedule.ttfb_s):
        return DISCONNECTED
    await conn.start(200, headers)
    stop_at = len(paced)
    for limit in (schedule.cut_after, schedule.error_after):
        if limit is not None:
            stop_at = min(stop_at, limit)
    if schedule.interval_s <= 0 and stop_at == len(paced) and schedule.cut_after is None \
            and schedule.error_after is None:
        await conn.write(opening + b"".join(paced) + closing, more=False)  # instant: one write
        conn.chunks_sent = len(paced)
        return COMPLETED
    pending = opening
    for index in range(stop_at):
        if index and not await conn.pause(schedule.interval_s):
            return DISCONNECTED
        await conn.write(pending + paced[index])
        pending = b""
        conn.chunks_sent = index + 1
    if schedule.cut_after is not None:
        if pending:
            await conn.write(pending)
        await conn.abort()
        return CUT
    if schedule.error_after is not None:
        await conn.write(pending + schedule.error_event, more=False)
        return STREAM_ERROR
    await conn.write(pending + closing, more=False)
    return COMPLETED


def broken(data: bytes) -> bytes:
    """``data`` with the JSON of its first ``data:`` line (or the whole JSON body) cut in half."""
    start = data.find(b"data: ")
    if start < 0:
        return data[: max(1, len(data) // 2)]
    start += len(b"data: ")
    end = data.find(b"\n", start)
    if end < 0:
        end = len(data)
    payload = data[start:end].rstrip(b"\r")
    return data[:start] + payload[: max(1, len(payload) // 2)] + data[start + len(payload):]

"""AWS event-stream framing (``application/vnd.amazon.eventstream``), decoded incrementally. Pure, stdlib only.

Bedrock's ConverseStream answers with binary frames, not SSE. One frame::

    total length (uint32 BE) | headers length (uint32 BE) | prelude CRC32 (of the 8 bytes before it)
    headers: name length (uint8), name, value type (uint8), value    (types 0-9, see _read_value)
    payload: total length - headers length - 16 bytes (JSON for Bedrock)
    message CRC32 (of every byte of the frame before it)

``EventStreamParser`` has the ``feed``/``flush`` interface of ``sse.SSEParser`` and hands out the same
``SSEEvent`` tuples, so a stream translator reads Bedrock through the seam every format uses
(``StreamTranslator(parser=...)``): ``event`` is the frame's ``:event-type`` (``messageStart``,
``contentBlockDelta``, ...) for an event, ``exception:<:exception-type>`` for a modelled exception, and
``error:<:error-code>`` for an error frame; ``data`` is the payload as text (an error frame's
``:error-message`` wrapped as ``{"message": ...}``); ``raw`` the frame's bytes.

Frames may be split anywhere across reads. A frame whose CRC does not match, whose lengths contradict each
other, or that is larger than ``max_frame_bytes`` raises MalformedResponse (the stream cannot be trusted
past it); bytes left over at the end of the stream (a truncated frame) do too, from ``flush``.
"""

from __future__ import annotations

import json
import struct
import zlib

from routing.providers.errors import MalformedResponse
from routing.providers.streaming.sse import SSEEvent

PRELUDE_BYTES = 12
MIN_FRAME_BYTES = 16  # prelude + message CRC, no headers, no payload
# Bedrock's own frames hold one delta each (a few hundred bytes); AWS's protocol allows 16 MiB. 1 MiB bounds the
# memory one stream can make the gateway hold while keeping room for any real frame.
MAX_FRAME_BYTES = 1024 * 1024
MAX_HEADERS_BYTES = 128 * 1024  # the protocol's own limit

_UINT32_PAIR = struct.Struct(">II")
_UINT32 = struct.Struct(">I")
# Fixed-size value types: bool true (0) and false (1) carry no bytes; byte, short, integer, long, timestamp, uuid.
_FIXED_SIZES = {2: 1, 3: 2, 4: 4, 5: 8, 8: 8, 9: 16}


def _read_value(kind: int, data: bytes, at: int, end: int) -> tuple[object, int]:
    """A header value of ``kind`` starting at ``at``, and the offset after it."""
    if kind in (0, 1):
        return kind == 0, at
    if kind in _FIXED_SIZES:
        size = _FIXED_SIZES[kind]
        if at + size > end:
            raise MalformedResponse("an event-stream header value runs past its headers")
        raw = data[at:at + size]
        return (raw if kind == 9 else int.from_bytes(raw, "big", signed=True)), at + size
    if kind in (6, 7):  # byte array, string: a uint16 length first
        if at + 2 > end:
            raise MalformedResponse("an event-stream header value runs past its headers")
        size = int.from_bytes(data[at:at + 2], "big")
        at += 2
        if at + size > end:
            raise MalformedResponse("an event-stream header value runs past its headers")
        raw = data[at:at + size]
        if kind == 6:
            return raw, at + size
        try:
            return raw.decode("utf-8"), at + size
        except UnicodeDecodeError as exc:
            raise MalformedResponse("an event-stream header string is not UTF-8") from exc
    raise MalformedResponse(f"an event-stream header has an unknown value type {kind}")


def parse_headers(data: bytes, start: int, end: int) -> dict[str, object]:
    """The headers between ``start`` and ``end`` of a frame."""
    headers: dict[str, object] = {}
    at = start
    while at < end:
        size = data[at]
        at += 1
        if size == 0 or at + size + 1 > end:
            raise MalformedResponse("an event-stream header name is empty or runs past its headers")
        try:
            name = data[at:at + size].decode("utf-8")
        except UnicodeDecodeError as exc:
            raise MalformedResponse("an event-stream header name is not UTF-8") from exc
        at += size
        kind = data[at]
        value, at = _read_value(kind, data, at + 1, end)
        headers[name] = value
    return headers


def decode_frame(frame: bytes) -> tuple[dict[str, object], bytes]:
    """(headers, payload) of one whole frame, its lengths and both CRCs checked."""
    total, headers_length = _UINT32_PAIR.unpack_from(frame, 0)
    if total != len(frame):
        raise MalformedResponse("an event-stream frame's length does not match its prelude")
    if zlib.crc32(frame[:8]) != _UINT32.unpack_from(frame, 8)[0]:
        raise MalformedResponse("an event-stream frame's prelude CRC does not match")
    if zlib.crc32(frame[:-4]) != _UINT32.unpack_from(frame, total - 4)[0]:
        raise MalformedResponse("an event-stream frame's message CRC does not match")
    headers_end = PRELUDE_BYTES + headers_length
    return parse_headers(frame, PRELUDE_BYTES, headers_end), frame[headers_end:-4]


def _event_of(headers: dict[str, object], payload: bytes, raw: bytes) -> SSEEvent:
    message_type = headers.get(":message-type", "event")
    try:
        text = payload.decode("utf-8")
    except UnicodeDecodeError as exc:
        raise MalformedResponse("an event-stream payload is not UTF-8") from exc
    if message_type == "event":
        return SSEEvent(str(headers.get(":event-type", "")), text, raw)
    if message_type == "exception":
        return SSEEvent(f"exception:{headers.get(':exception-type', '')}", text or "{}", raw)
    if message_type == "error":
        message = headers.get(":error-message", "")
        return SSEEvent(f"error:{headers.get(':error-code', '')}", json.dumps({"message": str(message)}), raw)
    raise MalformedResponse(f"an event-stream frame has an unknown message type {message_type!r}")


class EventStreamParser:
    """Whole frames out of a byte stream cut anywhere; ``feed`` chunks in order, then ``flush`` at its end."""

    __slots__ = ("_buf", "_max_frame_bytes")

    def __init__(self, *, max_frame_bytes: int = MAX_FRAME_BYTES) -> None:
        self._buf = bytearray()
        self._max_frame_bytes = max_frame_bytes

    def feed(self, chunk: bytes) -> list[SSEEvent]:
        """The events whose frames ``chunk`` completed (possibly none)."""
        buf = self._buf
        buf += chunk
        events: list[SSEEvent] = []
        start = 0
        while len(buf) - start >= PRELUDE_BYTES:
            total, headers_length = _UINT32_PAIR.unpack_from(buf, start)
            # The prelude CRC is checked before its lengths are believed: a corrupt length must not make the
            # parser wait for (or hold) megabytes that will never come.
            if zlib.crc32(buf[start:start + 8]) != _UINT32.unpack_from(buf, start + 8)[0]:
                raise MalformedResponse("an event-stream frame's prelude CRC does not match")
            if total > self._max_frame_bytes:
                raise MalformedResponse(f"an event-stream frame of {total} bytes is larger than the "
                                        f"{self._max_frame_bytes} allowed")
            if total < MIN_FRAME_BYTES or headers_length > min(MAX_HEADERS_BYTES, total - MIN_FRAME_BYTES):
                raise MalformedResponse("an event-stream frame's lengths contradict each other")
            if len(buf) - start < total:
                break
            frame = bytes(buf[start:start + total])
            start += total
            headers, payload = decode_frame(frame)
            events.append(_event_of(headers, payload, frame))
        if start:
            del buf[:start]
        return events

    def flush(self) -> list[SSEEvent]:
        """At the end of the stream: nothing, or MalformedResponse when a frame was cut short."""
        if self._buf:
            left = len(self._buf)
            self._buf.clear()
            raise MalformedResponse(f"the event stream ended inside a frame ({left} bytes of it received)")
        return []


def encode_frame(headers: dict[str, str], payload: bytes) -> bytes:
    """One frame with string headers: what a test or a stub server sends (the simulator has its own copy)."""
    encoded = b"".join(
        bytes([len(name.encode())]) + name.encode() + b"\x07" + len(value.encode()).to_bytes(2, "big")
        + value.encode()
        for name, value in headers.items()
    )
    total = PRELUDE_BYTES + len(encoded) + len(payload) + 4
    prelude = _UINT32_PAIR.pack(total, len(encoded))
    prelude += _UINT32.pack(zlib.crc32(prelude))
    body = prelude + encoded + payload
    return body + _UINT32.pack(zlib.crc32(body))

"""Incremental Server-Sent Events parsing and frame encoding.

Upstream bytes arrive in arbitrary chunks: an event may be split anywhere, even between the ``\\r`` and the
``\\n`` of one line ending. ``SSEParser.feed`` returns only complete events and keeps the rest. Each event
keeps its exact original bytes (``raw``) so that a pass-through stream can forward them untouched instead of
re-serialising JSON.
"""

from __future__ import annotations

import json
import re
from collections.abc import Callable, Iterator
from functools import partial
from typing import Any, NamedTuple, TypeVar

_LINE_END = re.compile(rb"\r\n|\r|\n")

DONE_FRAME = b"data: [DONE]\n\n"

T = TypeVar("T")


class SSEEvent(NamedTuple):
    """One dispatched block. ``data`` is None for a block without a data field (a comment or keep-alive).

    A tuple rather than a frozen dataclass: one is made per upstream event, and a tuple costs a third."""

    event: str | None
    data: str | None
    raw: bytes


# SSEEvent((event, data, raw)) without the named tuple's own __new__, a Python function: the parser's loops make
# one per event.
_event = partial(tuple.__new__, SSEEvent)


class SSEParser:
    """Turns a byte stream into SSEEvents; feed chunks in order, then ``flush()`` at the end of the stream.

    Streams that end lines with ``\\n`` only (OpenAI, Anthropic) take a fast path that splits whole
    blocks on the blank line; the first ``\\r`` (Gemini ends lines with ``\\r\\n``) switches this
    parser to a line-by-line scan that handles every line ending the SSE specification allows.
    """

    __slots__ = ("_buf", "_pos", "_taken", "_event", "_data", "_has_line", "_line_by_line")

    def __init__(self) -> None:
        self._buf = bytearray()
        self._pos = 0  # offset in _buf of the next line not yet read; _buf starts at the current block
        self._taken = 0  # split on blank lines: bytes at the start of _buf already read, dropped on the next feed
        self._event: str | None = None
        self._data: list[str] | None = None
        self._has_line = False
        self._line_by_line = False

    def feed(self, chunk: bytes) -> list[SSEEvent]:
        """The events completed by ``chunk`` (possibly none)."""
        buf = self._buf
        if self._taken:
            del buf[: self._taken]
            self._taken = 0
        if not self._line_by_line and b"\r" in chunk:
            self._line_by_line = True  # the buffer holds only whole unread lines: the scan can take over
        buf += chunk
        return self._scan_lines() if self._line_by_line else self._split_blocks()

    def events(self, chunk: bytes) -> Iterator[SSEEvent]:
        """The events completed by ``chunk``, one at a time: between two of them the reader may take a run of
        whole events that it reads in bulk (``take_run``). Read it to the end before the next call."""
        buf = self._buf
        if self._taken:
            del buf[: self._taken]
            self._taken = 0
        if not self._line_by_line and b"\r" in chunk:
            self._line_by_line = True
        buf += chunk
        return iter(self._scan_lines()) if self._line_by_line else self._blocks_one_by_one()

    def take_run(self, read_run: Callable[[bytearray, int], tuple[int, list[T]]]) -> list[T]:
        """What ``read_run(buffer, start)`` read of the whole events from the next unread one on, those events
        (up to the end it returns) taken out of the stream; nothing while lines are scanned one by one."""
        if self._line_by_line:
            return []
        end, read = read_run(self._buf, self._taken)
        if read:
            self._taken = end
        return read

    # _split_blocks and _blocks_one_by_one read blocks alike; the first is the list a paced provider's every read
    # goes through, so neither calls a function per event for the common blocks.

    def _split_blocks(self) -> list[SSEEvent]:
        buf = self._buf
        events: list[SSEEvent] = []
        append = events.append
        find = buf.find
        start = 0
        while True:
            # The block ends at the first line end followed by another. Line ends are found with memchr,
            # several times faster than a search for the two bytes; a block is mostly one or two lines.
            end = first = find(b"\n", start)
            while end >= 0 and buf[end + 1 : end + 2] != b"\n":
                end = find(b"\n", end + 1)
            if end < 0:
                break
            raw = bytes(buf[start : end + 2])
            # Nearly every event is one "data: " line (OpenAI), or an "event: " line and a "data: " line
            # (Anthropic): their values are the rest of each line. (Whole blocks only are read here, so no
            # field of an earlier block is pending.)
            line_end = first - start  # offset in raw of the first line's end
            last = end - start  # ...and of the block's final line end
            start = end + 2
            if line_end == last:
                if raw[:6] == b"data: ":
                    append(_event((None, raw[6:-2].decode("utf-8", "replace"), raw)))
                    continue
            elif (raw[:7] == b"event: " and raw[line_end + 1 : line_end + 7] == b"data: "
                  and raw.find(b"\n", line_end + 7) == last):
                append(_event((raw[7:line_end].decode("utf-8", "replace"),
                               raw[line_end + 7 : -2].decode("utf-8", "replace"), raw)))
                continue
            event = self._fields_block(raw)
            if event is not None:
                append(event)
        self._taken = start
        return events

    def _blocks_one_by_one(self) -> Iterator[SSEEvent]:
        buf = self._buf
        find = buf.find
        while True:
            start = self._taken  # read again each time: the reader may have taken a run meanwhile
            end = first = find(b"\n", start)  # as in _split_blocks
            while end >= 0 and buf[end + 1 : end + 2] != b"\n":
                end = find(b"\n", end + 1)
            if end < 0:
                return
            self._taken = end + 2
            raw = bytes(buf[start : end + 2])
            line_end = first - start
            last = end - start
            if line_end == last:
                if raw[:6] == b"data: ":
                    yield _event((None, raw[6:-2].decode("utf-8", "replace"), raw))
                    continue
            elif (raw[:7] == b"event: " and raw[line_end + 1 : line_end + 7] == b"data: "
                  and raw.find(b"\n", line_end + 7) == last):
                yield _event((raw[7:line_end].decode("utf-8", "replace"),
                              raw[line_end + 7 : -2].decode("utf-8", "replace"), raw))
                continue
            event = self._fields_block(raw)
            if event is not None:
                yield event

    def _fields_block(self, raw: bytes) -> SSEEvent | None:
        """Any other whole block, field by field; None if it has no field (a blank line too many)."""
        for line in raw[:-2].split(b"\n"):
            if line:
                self._has_line = True
                self._read_field(line)
        return self._dispatch(raw) if self._has_line else None

    def _scan_lines(self) -> list[SSEEvent]:
        buf = self._buf
        events: list[SSEEvent] = []
        end = len(buf)
        pos = self._pos
        block_start = 0
        while pos < end:
            match = _LINE_END.search(buf, pos)
            if match is None:
                break
            if match.end() == end and buf[match.start()] == 0x0D and match.end() - match.start() == 1:
                break  # a lone trailing "\r" may be the first half of "\r\n": wait for the next byte
            line_start, pos = pos, match.end()
            if match.start() == line_start:
                if self._has_line:
                    events.append(self._dispatch(bytes(buf[block_start:pos])))
                block_start = pos
                continue
            self._has_line = True
            self._read_field(bytes(buf[line_start : match.start()]))
        if block_start:
            del buf[:block_start]
        self._pos = pos - block_start
        return events

    def flush(self) -> list[SSEEvent]:
        """The last block if the stream ended without its blank line (lenient with sloppy servers)."""
        buf = self._buf
        if self._taken == len(buf) and not self._has_line:  # every block was whole: the common end
            buf.clear()
            self._taken = self._pos = 0
            return []
        if self._taken:
            del buf[: self._taken]
            self._taken = 0
        for line in _LINE_END.split(bytes(buf[self._pos :])):
            if line:
                self._has_line = True
                self._read_field(line)
        events = [self._dispatch(bytes(buf))] if self._has_line else []
        buf.clear()
        self._pos = 0
        return events

    def _read_field(self, line: bytes) -> None:
        if line.startswith(b"data"):
            name, value = b"data", line[4:]
        elif line.startswith(b"event"):
            name, value = b"event", line[5:]
        else:
            return  # a comment, id, retry or unknown field: nothing the gateway uses
        if value[:1] == b":":
            value = value[2:] if value[1:2] == b" " else value[1:]
        elif value:
            return  # "datafoo: x" is another field
        text = value.decode("utf-8", errors="replace")
        if name == b"event":
            self._event = text
        elif self._data is None:
            self._data = [text]
        else:
            self._data.append(text)

    def _dispatch(self, raw: bytes) -> SSEEvent:
        data = None if self._data is None else "\n".join(self._data)
        event = SSEEvent(self._event, data, raw)
        self._event = None
        self._data = None
        self._has_line = False
        return event


# One encoder for every frame: json.dumps with options builds a new JSONEncoder on each call.
_compact_encoder = json.JSONEncoder(separators=(",", ":"), ensure_ascii=False)


def compact_json(obj: Any) -> str:
    """JSON text without spaces; non-ASCII kept as UTF-8 (smaller than \\u escapes)."""
    return _compact_encoder.encode(obj)


def data_frame(obj: Any) -> bytes:
    """An unnamed SSE event (OpenAI's stream format)."""
    return b"data: " + compact_json(obj).encode() + b"\n\n"


def event_frame(event: str, obj: Any) -> bytes:
    """A named SSE event (Anthropic's stream format)."""
    return b"event: " + event.encode() + b"\ndata: " + compact_json(obj).encode() + b"\n\n"

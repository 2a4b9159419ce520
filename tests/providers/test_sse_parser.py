"""The incremental SSE parser: events survive any chunk boundary, keep their original bytes."""

from __future__ import annotations

import random

import pytest

from routing.providers.streaming.sse import SSEEvent, SSEParser, data_frame, event_frame

STREAMS = {
    "lf": b'data: {"a":1}\n\nevent: named\ndata: {"b":2}\n\ndata: [DONE]\n\n',
    "crlf": b'data: {"a":1}\r\n\r\nevent: named\r\ndata: {"b":2}\r\n\r\ndata: [DONE]\r\n\r\n',
    "cr": b'data: {"a":1}\r\revent: named\rdata: {"b":2}\r\rdata: [DONE]\r\r',
    "lf then crlf": b'data: {"a":1}\n\nevent: named\r\ndata: {"b":2}\r\n\r\ndata: [DONE]\n\n',
}
EXPECTED = [(None, '{"a":1}'), ("named", '{"b":2}'), (None, "[DONE]")]


def feed_all(data: bytes, cuts: list[int]) -> list[SSEEvent]:
    parser = SSEParser()
    events: list[SSEEvent] = []
    start = 0
    for cut in [*cuts, len(data)]:
        events += parser.feed(data[start:cut])
        start = cut
    return events + parser.flush()


@pytest.mark.parametrize("name", STREAMS)
def test_it_parses_every_line_ending_split_at_every_byte(name: str) -> None:
    data = STREAMS[name]
    for cut in range(len(data) + 1):
        events = feed_all(data, [cut])
        assert [(e.event, e.data) for e in events] == EXPECTED, cut
    events = feed_all(data, list(range(1, len(data))))
    assert [(e.event, e.data) for e in events] == EXPECTED


@pytest.mark.parametrize("name", STREAMS)
def test_it_keeps_the_original_bytes_of_each_event(name: str) -> None:
    data = STREAMS[name]
    rng = random.Random(7)
    for _ in range(50):
        cuts = sorted(rng.sample(range(1, len(data)), 5))
        assert b"".join(e.raw for e in feed_all(data, cuts)) == data


def test_it_waits_for_the_lf_after_a_trailing_cr() -> None:
    parser = SSEParser()
    assert parser.feed(b"data: x\r\n\r") == []
    events = parser.feed(b"\n")
    assert [(e.data, e.raw) for e in events] == [("x", b"data: x\r\n\r\n")]


def test_it_joins_multi_line_data_and_ignores_comments_and_ids() -> None:
    data = b": keep-alive\n\nid: 4\nretry: 10\ndata: line one\ndata:line two\n: note\n\n"
    events = feed_all(data, [])
    assert [(e.event, e.data) for e in events] == [(None, None), (None, "line one\nline two")]


def test_it_dispatches_a_last_event_without_its_blank_line_on_flush() -> None:
    parser = SSEParser()
    assert parser.feed(b'data: {"x":1}\n\ndata: [DONE]') == [SSEEvent(None, '{"x":1}', b'data: {"x":1}\n\n')]
    assert [(e.data, e.raw) for e in parser.flush()] == [("[DONE]", b"data: [DONE]")]
    assert parser.flush() == []


def test_it_decodes_utf8_split_inside_a_character() -> None:
    data = 'data: {"t":"wörld ✓"}\n\n'.encode()
    cut = data.index("ö".encode()) + 1
    assert [e.data for e in feed_all(data, [cut])] == ['{"t":"wörld ✓"}']


def test_frames_are_compact_and_keep_unicode() -> None:
    assert data_frame({"a": "ö", "b": [1]}) == 'data: {"a":"ö","b":[1]}\n\n'.encode()
    assert event_frame("ping", {"type": "ping"}) == b'event: ping\ndata: {"type":"ping"}\n\n'


@pytest.mark.parametrize(
    "block",
    [
        b"data: x", b"data:x", b"data: ", b"data:  two spaces", b"event: e\ndata: x", b"event:e\ndata: x",
        b"event: e\ndata:x", b"event: e", b"event: e\ndata: x\ndata: y", b"event: e\nid: 1\ndata: x",
        b"data: x\nevent: e", b"event: \ndata: x", b"data: \xff\xfe", b"event: \xff\ndata: x",
    ],
)
def test_it_reads_one_and_two_line_blocks_as_the_line_by_line_scan_does(block: bytes) -> None:
    # "\r\n" line endings put the parser on its line-by-line scan, which takes no shortcut.
    fast = SSEParser().feed(block + b"\n\n")
    scanned = SSEParser().feed(block.replace(b"\n", b"\r\n") + b"\r\n\r\n")
    assert [(e.event, e.data) for e in fast] == [(e.event, e.data) for e in scanned]

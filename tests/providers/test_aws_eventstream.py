"""The AWS event-stream decoder: whole frames out of reads cut anywhere, every header type, and a bad CRC, a
truncated frame, contradictory lengths or an oversized frame refused as a malformed stream."""

from __future__ import annotations

import json
import struct
import zlib

import pytest

from routing.providers import MalformedResponse
from routing.providers.bedrock.eventstream import EventStreamParser, decode_frame, encode_frame

EVENT_HEADERS = {":event-type": "contentBlockDelta", ":content-type": "application/json", ":message-type": "event"}


def delta(text: str) -> bytes:
    return encode_frame(EVENT_HEADERS, json.dumps({"contentBlockIndex": 0, "delta": {"text": text}}).encode())


def raw_frame(headers: bytes, payload: bytes) -> bytes:
    """A frame with hand-encoded headers (to cover the value types encode_frame does not write)."""
    total = 12 + len(headers) + len(payload) + 4
    prelude = struct.pack(">II", total, len(headers))
    prelude += struct.pack(">I", zlib.crc32(prelude))
    body = prelude + headers + payload
    return body + struct.pack(">I", zlib.crc32(body))


STREAM = delta("Hel") + delta("lo, ") + delta("wörld")


def test_it_decodes_whole_frames_into_named_events_with_their_bytes() -> None:
    events = EventStreamParser().feed(STREAM)

    assert [event.event for event in events] == ["contentBlockDelta"] * 3
    assert "".join(json.loads(event.data or "")["delta"]["text"] for event in events) == "Hello, wörld"
    assert b"".join(event.raw for event in events) == STREAM


@pytest.mark.parametrize("step", [1, 2, 3, 7, 13, 100])
def test_frames_split_across_reads_come_out_whole_and_in_order(step: int) -> None:
    parser = EventStreamParser()
    events = []
    for start in range(0, len(STREAM), step):
        events += parser.feed(STREAM[start:start + step])
    events += parser.flush()
    assert [json.loads(event.data or "")["delta"]["text"] for event in events] == ["Hel", "lo, ", "wörld"]


def test_exceptions_and_error_frames_are_named_apart_from_events() -> None:
    exception = encode_frame({":exception-type": "throttlingException", ":message-type": "exception"},
                             b'{"message":"slow down"}')
    error = encode_frame({":error-code": "InternalFailure", ":error-message": "boom", ":message-type": "error"}, b"")
    events = EventStreamParser().feed(exception + error)
    assert [(event.event, json.loads(event.data or "")) for event in events] == [
        ("exception:throttlingException", {"message": "slow down"}),
        ("error:InternalFailure", {"message": "boom"}),
    ]


def test_every_header_value_type_is_read() -> None:
    headers = (
        b"\x04true\x00" + b"\x05false\x01" + b"\x04byte\x02\x7f" + b"\x05short\x03\x01\x00"
        + b"\x03int\x04\x00\x00\x01\x00" + b"\x04long\x05" + (1).to_bytes(8, "big")
        + b"\x05bytes\x06\x00\x02ab" + b"\x02ts\x08" + (1700000000000).to_bytes(8, "big")
        + b"\x04uuid\x09" + bytes(range(16)) + b"\x0b:event-type\x07\x00\x08metadata"
    )
    decoded, payload = decode_frame(raw_frame(headers, b"{}"))
    assert decoded == {"true": True, "false": False, "byte": 127, "short": 256, "int": 256, "long": 1,
                       "bytes": b"ab", "ts": 1700000000000, "uuid": bytes(range(16)), ":event-type": "metadata"}
    assert payload == b"{}"


@pytest.mark.parametrize("offset", [0, 9, 30, -1])
def test_a_bad_crc_anywhere_is_a_malformed_stream(offset: int) -> None:
    corrupt = bytearray(delta("Hello"))
    corrupt[offset] ^= 0x01
    with pytest.raises(MalformedResponse, match="CRC|length"):
        EventStreamParser().feed(bytes(corrupt))


def test_a_frame_cut_short_by_the_end_of_the_stream_is_malformed() -> None:
    parser = EventStreamParser()
    assert [e.event for e in parser.feed(STREAM[:-4])] == ["contentBlockDelta"] * 2
    with pytest.raises(MalformedResponse, match="ended inside a frame"):
        parser.flush()


def test_a_frame_larger_than_the_bound_is_refused_before_it_is_buffered() -> None:
    big = encode_frame(EVENT_HEADERS, b'{"p":"' + b"x" * 2000 + b'"}')
    parser = EventStreamParser(max_frame_bytes=1024)
    with pytest.raises(MalformedResponse, match="larger than"):
        parser.feed(big[:12])  # the prelude alone says how large it is


def test_lengths_that_contradict_each_other_are_malformed() -> None:
    prelude = struct.pack(">II", 16, 64)  # 64 bytes of headers cannot fit in a 16-byte frame
    prelude += struct.pack(">I", zlib.crc32(prelude))
    with pytest.raises(MalformedResponse, match="contradict"):
        EventStreamParser().feed(prelude + b"\x00" * 4)


def test_a_header_running_past_its_section_is_malformed() -> None:
    with pytest.raises(MalformedResponse, match="runs past"):
        decode_frame(raw_frame(b"\x01a\x07\x00\x09abc", b""))

"""Spans, and their OTLP protobuf encoding (``ExportTraceServiceRequest``), without a protobuf library.

The gateway sends one message type and reads none, so the few fields it needs are written by hand from
``opentelemetry/proto/trace/v1/trace.proto`` (the tests decode the output with the official generated classes).
Field numbers below are the .proto's. Encoding runs in the exporter's thread, never on a request.
"""

from __future__ import annotations

import struct
from collections.abc import Sequence
from dataclasses import dataclass

# Span.SpanKind
KIND_INTERNAL = 1
KIND_SERVER = 2
KIND_CLIENT = 3
# Status.StatusCode
STATUS_UNSET = 0
STATUS_OK = 1
STATUS_ERROR = 2
# Span.flags (SpanFlags): the W3C trace flags in the low byte, then whether the parent is known to be remote.
_FLAG_HAS_IS_REMOTE = 0x100
_FLAG_IS_REMOTE = 0x200

AttributeValue = str | bool | int | float | Sequence[str]


@dataclass(slots=True)
class SpanData:
    """One finished span, as the exporter encodes it. Times are nanoseconds since the Unix epoch."""

    trace_id: bytes
    span_id: bytes
    parent_span_id: bytes  # b"" for a root span
    name: str
    kind: int
    start_ns: int
    end_ns: int
    attributes: Sequence[tuple[str, AttributeValue]] = ()
    status_code: int = STATUS_UNSET
    status_message: str = ""
    trace_state: str = ""
    trace_flags: int = 1
    remote_parent: bool = False  # the parent is the client's span (its traceparent), not one of the gateway's


_SMALL = [bytes((i,)) for i in range(128)]  # most lengths, tags and counts fit one byte


def _varint(value: int) -> bytes:
    if 0 <= value < 128:
        return _SMALL[value]
    if value < 0:
        value += 1 << 64  # int64 is sent as its two's complement, ten bytes long
    out = bytearray()
    while value > 0x7F:
        out.append((value & 0x7F) | 0x80)
        value >>= 7
    out.append(value)
    return bytes(out)


def _tag(number: int, wire_type: int) -> bytes:
    return _varint((number << 3) | wire_type)


def _length_delimited(number: int, payload: bytes) -> bytes:
    return _tag(number, 2) + _varint(len(payload)) + payload


def _string(number: int, text: str) -> bytes:
    # "replace": a lone surrogate (which no valid UTF-8 holds) must not fail a whole batch
    return _length_delimited(number, text.encode("utf-8", "replace")) if text else b""


def _any_value(value: AttributeValue) -> bytes:
    """An ``AnyValue``: string 1, bool 2, int64 3, double 4, ArrayValue 5 (of AnyValue, field 1)."""
    if isinstance(value, str):
        return _length_delimited(1, value.encode("utf-8", "replace"))
    if isinstance(value, bool):
        return b"\x10\x01" if value else b"\x10\x00"
    if isinstance(value, int):
        return b"\x18" + _varint(value)
    if isinstance(value, float):
        return b"\x21" + struct.pack("<d", value)
    return _length_delimited(5, b"".join(_length_delimited(1, _any_value(item)) for item in value))


# Encoded KeyValues of the attributes that repeat from request to request (operation, models, tier, provider, status
# codes, ...): most of a span's attributes, so caching them makes encoding several times cheaper. Not floats (costs,
# times) nor the attributes that differ on every request (ids, token counts). The cache is emptied when it fills,
# which bounds it whatever the values. Encoding runs in the exporter's one thread, so no lock is needed. (An
# attribute name always carries values of one type, so True and 1 never meet under one key.)
UNCACHED_KEYS = frozenset({"gomodel.request.id", "gen_ai.usage.input_tokens", "gen_ai.usage.output_tokens"})
_KEY_VALUE_CACHE_MAX = 8192
_key_values: dict[tuple[int, str, object], bytes] = {}
_key_prefixes: dict[str, bytes] = {}  # the key (field 1) and the value's tag (field 2) of a KeyValue
_VALUE_TAG = b"\x12"


def _key_value(number: int, key: str, value: AttributeValue) -> bytes:
    """A ``KeyValue`` (key 1, value 2) as field ``number`` of its container."""
    cacheable = not isinstance(value, float | list) and key not in UNCACHED_KEYS
    if cacheable:
        found = _key_values.get((number, key, value))
        if found is not None:
            return found
    prefix = _key_prefixes.get(key)
    if prefix is None:
        prefix = _string(1, key) + _VALUE_TAG
        if len(_key_prefixes) < _KEY_VALUE_CACHE_MAX:
            _key_prefixes[key] = prefix
    encoded_value = _any_value(value)
    inner = prefix + _varint(len(encoded_value)) + encoded_value
    encoded = _tag(number, 2) + _varint(len(inner)) + inner
    if cacheable:
        if len(_key_values) >= _KEY_VALUE_CACHE_MAX:
            _key_values.clear()
        _key_values[(number, key, value)] = encoded
    return encoded


def encode_span(span: SpanData) -> bytes:
    """A ``Span`` message."""
    parts = [
        _length_delimited(1, span.trace_id),
        _length_delimited(2, span.span_id),
        _string(3, span.trace_state),
        _length_delimited(4, span.parent_span_id) if span.parent_span_id else b"",
        _string(5, span.name),
        _tag(6, 0) + _varint(span.kind),
        _tag(7, 1) + struct.pack("<Q", span.start_ns),
        _tag(8, 1) + struct.pack("<Q", span.end_ns),
    ]
    parts.extend(_key_value(9, key, value) for key, value in span.attributes)
    if span.status_code != STATUS_UNSET:
        status = _string(2, span.status_message) + _tag(3, 0) + _varint(span.status_code)
        parts.append(_length_delimited(15, status))
    flags = (span.trace_flags & 0xFF) | _FLAG_HAS_IS_REMOTE | (_FLAG_IS_REMOTE if span.remote_parent else 0)
    parts.append(_tag(16, 5) + struct.pack("<I", flags))
    return b"".join(parts)


def encode_export_request(spans: Sequence[SpanData], *, resource: Sequence[tuple[str, AttributeValue]],
                          scope_name: str, scope_version: str, schema_url: str) -> bytes:
    """An ``ExportTraceServiceRequest`` carrying ``spans`` under one resource and one instrumentation scope."""
    scope = _string(1, scope_name) + _string(2, scope_version)
    scope_spans = (_length_delimited(1, scope)
                   + b"".join(_length_delimited(2, encode_span(span)) for span in spans)
                   + _string(3, schema_url))
    resource_message = b"".join(_key_value(1, key, value) for key, value in resource)
    resource_spans = _length_delimited(1, resource_message) + _length_delimited(2, scope_spans)
    return _length_delimited(1, resource_spans)

"""W3C Trace Context (https://www.w3.org/TR/trace-context/): a client's ``traceparent``, read strictly, and the
ids of new spans.

A header that is not exactly right is not an error the client hears about: the gateway starts a new trace, as
the specification asks of a receiver. Version ``00`` must be exactly 55 characters; a later version is read by
its first four fields when what follows them starts with ``-`` (the forward-compatibility rule); ``ff``, upper-case
hex and all-zero ids are refused. Randomness is a parameter, as everywhere in the core.
"""

from __future__ import annotations

import random
from dataclasses import dataclass

_HEX = frozenset("0123456789abcdef")
_VERSION_00_LENGTH = 55  # "00-" + 32 + "-" + 16 + "-" + 2
_ZERO_TRACE = "0" * 32
_ZERO_SPAN = "0" * 16
MAX_TRACESTATE_CHARS = 512  # the specification's bound: longer ones may be dropped by a receiver
SAMPLED = 0x01


@dataclass(frozen=True, slots=True)
class TraceParent:
    """The client's span the gateway's request span becomes a child of."""

    trace_id: bytes  # 16 bytes
    span_id: bytes  # 8 bytes
    flags: int

    @property
    def sampled(self) -> bool:
        return bool(self.flags & SAMPLED)


def _is_hex(text: str) -> bool:
    return all(c in _HEX for c in text)


def parse_traceparent(value: str | None) -> TraceParent | None:
    """The parent a ``traceparent`` header names, or None for a missing or malformed one (a new trace starts)."""
    if not value:
        return None
    value = value.strip(" \t")  # optional whitespace around a header value is not part of it
    if len(value) < _VERSION_00_LENGTH:
        return None
    version = value[:2]
    if not _is_hex(version) or version == "ff":
        return None
    if version == "00":
        if len(value) != _VERSION_00_LENGTH:
            return None
    elif len(value) > _VERSION_00_LENGTH and value[_VERSION_00_LENGTH] != "-":
        return None
    if value[2] != "-" or value[35] != "-" or value[52] != "-":
        return None
    trace_id, span_id, flags = value[3:35], value[36:52], value[53:55]
    if not (_is_hex(trace_id) and _is_hex(span_id) and _is_hex(flags)):
        return None
    if trace_id == _ZERO_TRACE or span_id == _ZERO_SPAN:
        return None
    return TraceParent(bytes.fromhex(trace_id), bytes.fromhex(span_id), int(flags, 16))


def parse_tracestate(value: str | None) -> str:
    """The client's ``tracestate`` to carry on, or "" when it is missing, too long or not printable ASCII.

    Its list members are the vendors' business: the gateway passes the header on whole or not at all.
    """
    if not value:
        return ""
    value = value.strip(" \t")
    if len(value) > MAX_TRACESTATE_CHARS or not all(" " <= c <= "~" for c in value):
        return ""
    return value


def new_trace_id(rng: random.Random) -> bytes:
    """16 random bytes, never all zero (an invalid trace id)."""
    return (rng.getrandbits(128) or 1).to_bytes(16, "big")


def new_span_id(rng: random.Random) -> bytes:
    """8 random bytes, never all zero (an invalid span id)."""
    return (rng.getrandbits(64) or 1).to_bytes(8, "big")


def format_traceparent(trace_id: bytes, span_id: bytes, flags: int) -> str:
    return f"00-{trace_id.hex()}-{span_id.hex()}-{flags:02x}"

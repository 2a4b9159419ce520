"""W3C traceparent read strictly: a well-formed one is continued, anything else starts a new trace."""

from __future__ import annotations

import random

import pytest

from routing.core.trace_context import (
    format_traceparent,
    new_span_id,
    new_trace_id,
    parse_traceparent,
    parse_tracestate,
)

TRACE = "4bf92f3577b34da6a3ce929d0e0e4736"
SPAN = "00f067aa0ba902b7"


def test_it_reads_a_well_formed_header() -> None:
    parent = parse_traceparent(f"00-{TRACE}-{SPAN}-01")
    assert parent is not None
    assert (parent.trace_id.hex(), parent.span_id.hex(), parent.flags, parent.sampled) == (TRACE, SPAN, 1, True)


def test_it_reads_the_unsampled_flag_and_surrounding_whitespace() -> None:
    parent = parse_traceparent(f" 00-{TRACE}-{SPAN}-00\t")
    assert parent is not None
    assert parent.sampled is False


def test_it_reads_a_later_version_by_its_first_four_fields() -> None:
    parent = parse_traceparent(f"cc-{TRACE}-{SPAN}-01-what-the-future-adds")
    assert parent is not None
    assert parent.trace_id.hex() == TRACE


@pytest.mark.parametrize("value", [
    None,
    "",
    "garbage",
    f"00-{TRACE}-{SPAN}-01-extra",  # version 00 is exactly 55 characters
    f"00-{TRACE}-{SPAN}-1",
    f"ff-{TRACE}-{SPAN}-01",  # ff is forbidden
    f"0g-{TRACE}-{SPAN}-01",
    f"00-{TRACE.upper()}-{SPAN}-01",  # lower-case hex only
    f"00-{'0' * 32}-{SPAN}-01",  # all-zero trace id
    f"00-{TRACE}-{'0' * 16}-01",  # all-zero parent id
    f"00_{TRACE}_{SPAN}_01",
    f"00-{TRACE}-{SPAN}-zz",
    f"cc-{TRACE}-{SPAN}-01x",  # a later version's extra part must start with "-"
    f"00-{TRACE}-{SPAN}-01,00-{TRACE}-{SPAN}-01",  # two headers joined: invalid
    f"00-{TRACE[:-1]}é-{SPAN}-01",
])
def test_it_refuses_a_malformed_header(value: str | None) -> None:
    assert parse_traceparent(value) is None


def test_it_carries_a_printable_tracestate_and_drops_a_bad_one() -> None:
    assert parse_tracestate("rojo=00f067aa0ba902b7,congo=t61rcWkgMzE") == "rojo=00f067aa0ba902b7,congo=t61rcWkgMzE"
    assert parse_tracestate("a=" + "x" * 600) == ""
    assert parse_tracestate("a=b\nc") == ""
    assert parse_tracestate(None) == ""


def test_new_ids_have_their_sizes_and_round_trip_through_the_header() -> None:
    rng = random.Random(7)
    trace_id, span_id = new_trace_id(rng), new_span_id(rng)
    assert len(trace_id) == 16
    assert len(span_id) == 8
    parent = parse_traceparent(format_traceparent(trace_id, span_id, 1))
    assert parent is not None
    assert (parent.trace_id, parent.span_id) == (trace_id, span_id)


def test_a_zero_draw_never_makes_an_invalid_id() -> None:
    class Zero(random.Random):
        def getrandbits(self, k: int) -> int:
            return 0

    assert new_trace_id(Zero()) != bytes(16)
    assert new_span_id(Zero()) != bytes(8)

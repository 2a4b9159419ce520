"""The OTEL_TRACES_SAMPLER samplers: parent-based ones follow the client's flag, ratios keep a stable share."""

from __future__ import annotations

import random

import pytest

from routing.core.trace_context import TraceParent
from routing.core.trace_sampler import Sampler

SAMPLED = TraceParent(b"\x01" * 16, b"\x02" * 8, 1)
UNSAMPLED = TraceParent(b"\x01" * 16, b"\x02" * 8, 0)
TRACE = b"\x05" * 16


@pytest.mark.parametrize(("name", "parent", "expected"), [
    ("always_on", None, True),
    ("always_on", UNSAMPLED, True),
    ("always_off", None, False),
    ("always_off", SAMPLED, False),
    ("parentbased_always_on", None, True),
    ("parentbased_always_on", SAMPLED, True),
    ("parentbased_always_on", UNSAMPLED, False),
    ("parentbased_always_off", None, False),
    ("parentbased_always_off", SAMPLED, True),
])
def test_it_decides_as_the_sampler_says(name: str, parent: TraceParent | None, expected: bool) -> None:
    assert Sampler.parse(name, "").sampled(TRACE, parent) is expected


def test_the_default_is_parent_based_always_on() -> None:
    assert Sampler.parse("", "") == Sampler("parentbased_always_on")


def test_a_ratio_keeps_about_its_share_and_the_same_traces_every_time() -> None:
    sampler = Sampler.parse("traceidratio", "0.25")
    rng = random.Random(11)
    ids = [rng.getrandbits(128).to_bytes(16, "big") for _ in range(20_000)]
    kept = [trace_id for trace_id in ids if sampler.sampled(trace_id, None)]
    assert 0.23 < len(kept) / len(ids) < 0.27
    assert all(sampler.sampled(trace_id, None) for trace_id in kept)  # deterministic by trace id


def test_a_ratio_of_zero_keeps_none_and_one_keeps_all() -> None:
    top = b"\xff" * 16
    assert not Sampler.parse("traceidratio", "0").sampled(top, None)
    assert Sampler.parse("traceidratio", "1").sampled(top, None)
    assert Sampler.parse("traceidratio", "").ratio == 1.0


def test_parent_based_ratio_follows_the_parent_and_uses_the_ratio_without_one() -> None:
    sampler = Sampler.parse("parentbased_traceidratio", "0")
    assert sampler.sampled(TRACE, SAMPLED)
    assert not sampler.sampled(TRACE, None)


@pytest.mark.parametrize(("name", "arg", "message"), [
    ("sometimes", "", "expected one of"),
    ("traceidratio", "half", "expected a ratio"),
    ("traceidratio", "1.5", "expected a ratio"),
    ("traceidratio", "nan", "expected a ratio"),
])
def test_it_refuses_what_it_cannot_use(name: str, arg: str, message: str) -> None:
    with pytest.raises(ValueError, match=message):
        Sampler.parse(name, arg)

"""The shorter write path of routing/ops/metric_kinds.py gives the samples prometheus_client's own would."""

from __future__ import annotations

import math

import prometheus_client
import pytest
from prometheus_client import CollectorRegistry

from routing.ops.metric_kinds import Counter, Gauge, Histogram

BUCKETS = (0.005, 0.01, 0.025, 0.5, 1, 2.5)
AMOUNTS = (0.0, 0.001, 0.005, 0.0050001, 0.01, 0.02, 0.025, 0.3, 0.5, 1, 1.0000001, 2.5, 3, 1e9, math.inf,
           -0.5, -math.inf, math.nan)


def _samples(registry: CollectorRegistry) -> dict[tuple[str, tuple[tuple[str, str], ...]], float]:
    found = {}
    for family in registry.collect():
        for sample in family.samples:
            if sample.name.endswith("_created"):
                continue
            found[sample.name, tuple(sorted(sample.labels.items()))] = sample.value
    return found


def _same(ours: dict, theirs: dict) -> bool:
    if ours.keys() != theirs.keys():
        return False
    return all(ours[k] == theirs[k] or (math.isnan(ours[k]) and math.isnan(theirs[k])) for k in ours)


@pytest.mark.parametrize("amount", AMOUNTS)
def test_a_histogram_puts_each_amount_in_the_bucket_prometheus_client_would(amount: float) -> None:
    ours_registry, theirs_registry = CollectorRegistry(), CollectorRegistry()
    ours = Histogram("h", "h", ["endpoint"], buckets=BUCKETS, registry=ours_registry)
    theirs = prometheus_client.Histogram("h", "h", ["endpoint"], buckets=BUCKETS, registry=theirs_registry)
    ours.labels("chat").observe(amount)
    theirs.labels("chat").observe(amount)
    assert _same(_samples(ours_registry), _samples(theirs_registry))


def test_a_histogram_of_many_amounts_matches_prometheus_client() -> None:
    ours_registry, theirs_registry = CollectorRegistry(), CollectorRegistry()
    ours = Histogram("h", "h", buckets=BUCKETS, registry=ours_registry)
    theirs = prometheus_client.Histogram("h", "h", buckets=BUCKETS, registry=theirs_registry)
    for amount in AMOUNTS[:-1] * 3:
        ours.observe(amount)
        theirs.observe(amount)
    assert _same(_samples(ours_registry), _samples(theirs_registry))


def test_a_counter_counts_as_prometheus_client_does() -> None:
    registry = CollectorRegistry()
    counter = Counter("c", "c", ["outcome"], registry=registry)
    counter.labels("ok").inc()
    counter.labels("ok").inc(2.5)
    counter.labels("error").inc(0)
    assert _samples(registry) == {("c_total", (("outcome", "ok"),)): 3.5, ("c_total", (("outcome", "error"),)): 0.0}


def test_a_gauge_is_set_as_prometheus_client_sets_it() -> None:
    ours_registry, theirs_registry = CollectorRegistry(), CollectorRegistry()
    ours = Gauge("g", "g", ["target"], registry=ours_registry)
    theirs = prometheus_client.Gauge("g", "g", ["target"], registry=theirs_registry)
    for gauge in (ours, theirs):
        gauge.labels("a").set(0.25)
        gauge.labels("b").set(3)
        gauge.labels("a").set(1.5)
        gauge.labels("b").inc(2)
    assert _samples(ours_registry) == _samples(theirs_registry) == {
        ("g", (("target", "a"),)): 1.5, ("g", (("target", "b"),)): 5.0}
    with pytest.raises(ValueError, match="missing label values"):
        ours.set(1)
    unlabelled = Gauge("u", "u", registry=ours_registry)
    unlabelled.set("2.5")  # type: ignore[arg-type]  # a number in a string, as prometheus_client takes it
    assert _samples(ours_registry)[("u", ())] == 2.5


def test_the_uncommon_calls_keep_prometheus_clients_errors_and_exemplars() -> None:
    registry = CollectorRegistry()
    counter = Counter("c", "c", ["outcome"], registry=registry)
    histogram = Histogram("h", "h", ["endpoint"], buckets=BUCKETS, registry=registry)
    with pytest.raises(ValueError, match="missing label values"):
        counter.inc()
    with pytest.raises(ValueError, match="missing label values"):
        histogram.observe(1)
    with pytest.raises(ValueError, match="non-negative"):
        counter.labels("ok").inc(-1)
    counter.labels("ok").inc(1, exemplar={"trace_id": "abc"})
    histogram.labels("chat").observe(0.3, exemplar={"trace_id": "abc"})
    exemplars = [s.exemplar for family in registry.collect() for s in family.samples if s.exemplar]
    assert [e.labels for e in exemplars] == [{"trace_id": "abc"}, {"trace_id": "abc"}]

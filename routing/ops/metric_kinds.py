"""Counter, Gauge (its ``set``) and Histogram with a shorter common case.

prometheus_client's ``Counter.inc`` checks observability through two method calls before it writes, and
``Histogram.observe`` walks its bucket bounds with ``enumerate`` in Python; a request makes about seventeen
such writes. These subclasses write the value directly when the call is the ordinary one (on a child, without
an exemplar, a non-negative increment or an observation that is not NaN) and find the bucket with ``bisect``;
in multiprocess mode a histogram's sum and bucket are written under one taking of the lock.
Anything else (a parent, an exemplar, a negative increment, NaN) goes to prometheus_client's own method, so
errors and exemplars behave exactly as before. Samples, names and files are prometheus_client's: only the write
path is shorter.
"""

from __future__ import annotations

from bisect import bisect_left
from typing import Any

from prometheus_client import Counter as _Counter
from prometheus_client import Gauge as _Gauge
from prometheus_client import Histogram as _Histogram

from routing.ops.metric_values import SlotValue


class Counter(_Counter):
    def inc(self, amount: float = 1, exemplar: Any = None) -> None:
        if exemplar is None and amount >= 0 and (self._labelvalues or not self._labelnames):
            self._value.inc(amount)
            return
        super().inc(amount, exemplar)


class Gauge(_Gauge):
    def set(self, value: float) -> None:
        if self._labelvalues or not self._labelnames:
            self._value.set(float(value))
            return
        super().set(value)


class Histogram(_Histogram):
    def observe(self, amount: float, exemplar: Any = None) -> None:
        # ``amount == amount`` is False only for NaN, which prometheus_client adds to the sum and to no bucket.
        if exemplar is None and amount == amount and (self._labelvalues or not self._labelnames):
            # The first bound >= amount, as prometheus_client's "amount <= bound" walk finds it; the last bound
            # is +Inf, so the index is always in range.
            bucket = self._buckets[bisect_left(self._upper_bounds, amount)]
            total = self._sum
            if total.__class__ is SlotValue:  # multiprocess mode: both slots under one taking of the lock
                total.inc_with(amount, bucket, 1)
            else:
                total.inc(amount)
                bucket.inc(1)
            return
        super().observe(amount, exemplar)

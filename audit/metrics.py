"""Prometheus metrics of the audit publisher (exposed by the gateway's ``/metrics`` with every other metric).

Labels are bounded: a fixed reason, never a request id.
"""

from __future__ import annotations

from prometheus_client import Counter

DROPPED = Counter(
    "gomodel_audit_events_dropped_total",
    "Audit events dropped by the gateway: the in-memory buffer was full because neither the sink (broker or "
    "database) nor the spool accepted events.",
    ["reason"],
)
SPOOLED = Counter(
    "gomodel_audit_events_spooled_total",
    "Audit events written to the local spool because the sink did not take them (replayed later).",
)
# Exposed as 0 from the start, so that an alert on any increase works before the first drop.
DROPPED.labels("buffer_full")

"""Prometheus metrics of the audit publisher (exposed by the gateway's ``/metrics`` with every other metric).

Labels are bounded: a fixed reason, never a request id.
"""

from __future__ import annotations

from prometheus_client import Counter, Gauge

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
# The audit lag, as the gateway sees it: events answered but not yet handed to the sink (the broker, or the
# database in-process), whether waiting in memory or in the spool for the sink to come back. Set by each
# process's publisher thread about once a second; the spool directory is shared by the processes of one host.
UNDELIVERED = Gauge(
    "gomodel_audit_undelivered_events",
    "Audit events this process holds in memory that its sink has not taken yet (spooled events not counted).",
    multiprocess_mode="livesum",
)
OLDEST_UNDELIVERED = Gauge(
    "gomodel_audit_oldest_undelivered_seconds",
    "Age of the oldest audit event not yet handed to the sink, in memory or in the spool; 0 when none waits. "
    "Grows while the broker (or database) is away and falls back once the spool is replayed.",
    multiprocess_mode="livemax",
)
# Exposed as 0 from the start, so that an alert on any increase works before the first drop.
DROPPED.labels("buffer_full")

# The journal (audit/delivery/journal.py): every event written, encrypted, before its answer's last bytes are sent.
JOURNAL_BYTES = Counter(
    "gomodel_audit_journal_bytes_total",
    "Bytes of encrypted audit events written to this process's journal, the copy that survives a SIGKILL.",
)
JOURNAL_SKIPPED = Counter(
    "gomodel_audit_journal_skipped_total",
    "Audit events kept in memory only because the journal did not take them (write_failed: the disk refused; "
    "full: AUDIT_JOURNAL_MAX_BYTES reached; unavailable: no journal file could be opened). A SIGKILL may lose them.",
    ["reason"],
)
JOURNAL_REPLAYED = Counter(
    "gomodel_audit_journal_replayed_total",
    "Audit events replayed from the journal of a gateway process that died before delivering or spooling them.",
)
JOURNAL_TORN = Counter(
    "gomodel_audit_journal_torn_records_total",
    "Journal records skipped on replay because a process was killed while writing them (their answer was never "
    "sent).",
)
JOURNAL_LOST = Counter(
    "gomodel_audit_journal_records_lost_total",
    "Journal records lost to a damaged file on replay (estimated from the damaged bytes' length prefixes); the "
    "intact records after the damage are replayed and the file is kept as *.damaged-<time>.",
)
JOURNAL_UNREADABLE = Counter(
    "gomodel_audit_journal_unreadable_files_total",
    "Journal files of a dead process that could not be read (sealed under another secret key, or not a journal): "
    "renamed *.unreadable and not replayed.",
)
for _reason in ("write_failed", "full", "unavailable"):
    JOURNAL_SKIPPED.labels(_reason)

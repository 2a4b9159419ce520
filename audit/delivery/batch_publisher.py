"""The publisher thread and its batching, spooling and replay (see ``audit.delivery.publisher`` for the overview).

``Publisher`` takes a sink factory and a spool, so it is built from settings in production
(``audit.delivery.publisher.build_from_settings``) and from test doubles of the sink in tests.

Memory is bounded: at most ``max_buffer`` events wait in memory. ``publish`` does no I/O of any kind (it runs
on the event loop); when the buffer is full it drops the event it was handed - the newest - and counts it.
That happens only when the thread cannot empty the buffer: the sink is unreachable *and* the spool refuses
(disk full, ``AUDIT_SPOOL_MAX_BYTES`` reached), or the thread is stuck far behind. The thread reports drops in
``gomodel_audit_events_dropped_total`` and in an error log line at most every ``DROP_LOG_SECONDS``.

With a journal (``audit.delivery.journal``), ``publish`` first writes the event to it - the one I/O of the request path,
a ``pwrite`` to the page cache - and each buffered event carries its place in the journal. The buffer is
handled in order, so once a batch is delivered or spooled the thread checkpoints the journal at the batch's
last event. The thread also replays the journals of dead processes (at start-up, and every
``SPOOL_SCAN_SECONDS``), through the same prepare-and-deliver path, spooling what the sink does not take.
"""

from __future__ import annotations

import collections
import logging
import threading
import time
from collections.abc import Callable
from typing import Any, Protocol

from audit import metrics
from audit.delivery import journal_recovery
from audit.delivery.event import prepare_event
from audit.delivery.journal import Journal, Mark
from audit.delivery.sinks import DeliveryError
from audit.delivery.spool import Spool

log = logging.getLogger("gomodel.audit")

PROBE_MIN_SECONDS = 1.0
PROBE_MAX_SECONDS = 15.0
# Even while healthy, look for spool files left by a crashed sibling process now and then.
SPOOL_SCAN_SECONDS = 30.0
DEFAULT_SHUTDOWN_SECONDS = 20.0
# Dropped events are logged at most this often (with the count since the last line), not once per event.
DROP_LOG_SECONDS = 10.0
LAG_REPORT_SECONDS = 1.0  # how often the audit-lag gauges are set
# While preparing a batch, the thread hands the GIL to the event loop at least this often.
YIELD_SECONDS = 0.0002


class Sink(Protocol):
    def send(self, batch: list[dict[str, Any]]) -> None: ...

    def probe(self) -> None: ...

    def close(self) -> None: ...


class Publisher:
    """Batches, redacts and delivers audit events on one background thread; see the module docstring."""

    def __init__(
        self,
        *,
        sink_factory: Callable[[], Sink],
        spool: Spool,
        batch_size: int,
        batch_seconds: float,
        max_buffer: int,
        store_bodies: bool,
        body_max_bytes: int,
        journal: Journal | None = None,
        clock: Callable[[], float] = time.monotonic,
    ) -> None:
        self._sink_factory = sink_factory
        self._spool = spool
        self._batch_size = max(1, batch_size)
        self._batch_seconds = batch_seconds
        self._max_buffer = max(self._batch_size, max_buffer)
        self._store_bodies = store_bodies
        self._body_max_bytes = body_max_bytes
        self._clock = clock
        self._journal = journal

        # (event, its place in the journal or None), in the journal's order
        self._buffer: collections.deque[tuple[Any, Mark | None]] = collections.deque()
        self._wake = threading.Event()
        # True from a full batch's wake-up until the thread has taken it: ``Event.set`` is six Python calls, and
        # while the thread is behind every publish finds a full batch waiting.
        self._batch_wake_pending = False
        self._start_lock = threading.Lock()
        self._fallback_lock = threading.Lock()
        self._thread: threading.Thread | None = None
        self._started = False
        self._stopping = False
        self._flush_requested = False
        self._stopped = threading.Event()
        self._idle = threading.Condition()
        self._spool_failing = False
        self._in_hand = 0  # events taken from the buffer and not yet delivered or spooled
        self._hand_lock = threading.Lock()  # shutdown may take from the buffer on its caller's thread
        self._dropped = 0  # events refused by publish because the buffer was full; the thread reports them
        self._drop_lock = threading.Lock()
        self._drops_reported = 0
        self._drops_logged = 0
        self._next_drop_log = 0.0

        self._sink: Sink | None = None
        self._healthy = True
        self._probe_delay = PROBE_MIN_SECONDS
        self._next_probe = 0.0
        self._replay_pending = True  # start-up: replay what a previous process left
        self._next_scan = 0.0
        self._recover_pending = journal is not None  # start-up: replay the journals dead processes left
        self._journal_reported: dict[str, int] = {}
        self._journal_failing = False
        self._next_lag_report = 0.0
        self.counters = {"published": 0, "delivered": 0, "spooled": 0, "replayed_batches": 0, "dropped": 0,
                         "journal_replayed": 0, "journal_torn": 0, "journal_lost": 0}

    # -- the request path -----------------------------------------------------------------------------

    def publish(self, event: Any) -> None:
        """Hand one event to the publisher; returns at once, never raises for a bad event.

        Its only I/O is the journal's one write, when there is a journal. With ``max_buffer`` events already
        waiting the event is dropped (and not journaled) and counted (see the module docstring).
        """
        if not self._started:
            self.start()
        buffer = self._buffer
        if len(buffer) >= self._max_buffer:
            with self._drop_lock:
                self._dropped += 1
            return  # no wake-up: the thread reports drops on its next round (a wake per drop would spin it)
        journal = self._journal
        if journal is None:
            buffer.append((event, None))
        else:
            journal.append(event, buffer.append)
        if len(buffer) >= self._batch_size and not self._spool_failing and not self._batch_wake_pending:
            # (While the spool fails the thread retries on its own schedule; a wake per publish would spin it.)
            self._batch_wake_pending = True
            self._wake.set()

    # -- life cycle -----------------------------------------------------------------------------------

    def start(self) -> None:
        """Start the publisher thread (idempotent)."""
        with self._start_lock:
            if self._started:
                return
            if self._journal is not None:
                self._journal.start()  # before the first publish, when possible; else the thread retries
            self._thread = threading.Thread(target=self._run, name="audit-publisher", daemon=True)
            self._thread.start()
            self._started = True

    def flush(self, timeout: float = 10.0) -> bool:
        """Wait until everything published so far is delivered or spooled; False on timeout."""
        deadline = time.monotonic() + timeout
        self._flush_requested = True
        self._wake.set()
        with self._idle:
            while self._buffer or self._in_hand:
                remaining = deadline - time.monotonic()
                if remaining <= 0:
                    return False
                self._flush_requested = True
                self._wake.set()
                self._idle.wait(min(remaining, 0.05))
        return True

    def shutdown(self, timeout: float = DEFAULT_SHUTDOWN_SECONDS) -> bool:
        """Deliver or spool every event still in memory and stop the thread; False if it had to give up.

        If the thread does not finish in time (a sink call hangs past its own timeout), what is still in
        the buffer is spooled from the calling thread, so nothing stays only in memory.
        """
        self._stopping = True
        self._wake.set()
        thread = self._thread
        finished = True
        if thread is not None and thread.is_alive():
            thread.join(timeout)
            finished = not thread.is_alive()
        while self._buffer and not self._spool_failing:
            self._spool_oldest_batch()
        self._report_drops(final=True)
        handled = not self._in_hand and not self._buffer
        if self._buffer:
            journaled = sum(mark is not None for _, mark in self._buffer)
            log.error("audit: stopping with %d events that neither the sink nor the spool accepted; %d of them are "
                      "in the journal, which the next gateway process replays, the rest are lost",
                      len(self._buffer), journaled)
        if self._journal is not None:
            # Everything handed over: the journal has nothing left to keep. Otherwise it stays, locked by nobody,
            # and the next process replays it (what was delivered meanwhile goes twice, harmlessly).
            self._journal.close(remove=handled)
        self._spool.close()
        return finished and handled

    def request_flush(self) -> None:
        """Ask the thread to deliver what it has now, without waiting (safe in a signal handler)."""
        self._flush_requested = True
        self._wake.set()

    @property
    def healthy(self) -> bool:
        return self._healthy

    def stats(self) -> dict[str, Any]:
        journal = self._journal
        return {
            **self.counters,
            "dropped": self._dropped,
            "buffered": len(self._buffer),
            "healthy": self._healthy,
            "spool_bytes": self._spool.pending_bytes(),
            "journal_bytes": journal.retained_bytes if journal is not None else 0,
            "journal_skipped": sum(journal.stats.skipped.values()) if journal is not None else 0,
        }

    # -- the publisher thread -------------------------------------------------------------------------

    def _run(self) -> None:
        try:
            self._sink = self._sink_factory()
        except Exception:  # a sink that cannot even be built: spool everything until the process restarts
            log.exception("audit: cannot create the delivery sink; spooling events")
            self._sink = None
            self._healthy = False
        deadline = self._clock() + self._batch_seconds
        while True:
            busy = ((self._replay_pending and self._healthy) or self._recover_pending) and not self._stopping
            self._wake.wait(0 if busy else max(0.0, deadline - self._clock()))
            self._wake.clear()
            # After the clear: a publish from here on wakes the thread again. One in between found the flag still
            # up and did not, but the delivery below takes every full batch, its events included.
            self._batch_wake_pending = False
            stopping = self._stopping
            now = self._clock()
            on_time = now >= deadline or stopping or self._flush_requested
            self._flush_requested = False
            if on_time:
                deadline = now + self._batch_seconds
            try:
                self._maintain_journal()
                self._deliver_buffer(everything=on_time)
                if not stopping:
                    self._maybe_probe()
                    self._maybe_replay()
                self._report_drops()
                self._report_lag()
            except Exception:  # never let the thread die; the loop spools what it cannot deliver
                log.exception("audit publisher loop failed; continuing")
            with self._idle:
                self._idle.notify_all()
            if stopping and not self._buffer:
                break
        if self._sink is not None:
            self._sink.close()
        self._stopped.set()

    def _report_lag(self) -> None:
        """Set the audit-lag gauges, at most once a second (the spool part lists a directory)."""
        now = self._clock()
        if now < self._next_lag_report:
            return
        self._next_lag_report = now + LAG_REPORT_SECONDS
        held = len(self._buffer) + self._in_hand
        oldest = self._spool.oldest_created()
        try:
            first = self._buffer[0][0]
        except IndexError:
            first = None
        created = first.get("created_at") if isinstance(first, dict) else None
        if isinstance(created, (int, float)) and (oldest is None or created < oldest):
            oldest = float(created)
        metrics.UNDELIVERED.set(held)
        metrics.OLDEST_UNDELIVERED.set(max(0.0, time.time() - oldest) if oldest is not None else 0.0)

    def _take(self, limit: int) -> list[tuple[Any, Mark | None]]:
        buffer = self._buffer
        taken: list[tuple[Any, Mark | None]] = []
        while len(taken) < limit:
            try:
                taken.append(buffer.popleft())
            except IndexError:
                break
        with self._hand_lock:
            self._in_hand += len(taken)
        return taken

    def _release(self, count: int) -> None:
        with self._hand_lock:
            self._in_hand -= count

    def _deliver_buffer(self, *, everything: bool) -> None:
        while len(self._buffer) >= self._batch_size or (everything and self._buffer):
            taken = self._take(self._batch_size)
            handed_over = False
            try:
                marks = [mark for _, mark in taken]
                batch = self._prepare([event for event, _ in taken])
                handed_over = self._deliver(batch, marks)
            finally:
                self._release(len(taken))
            if handed_over:
                self._checkpoint(marks)
            # Also between batches: a thread that is behind may stay in this loop for long, and the journal
            # must rotate (and, with AUDIT_JOURNAL_FSYNC, sync) meanwhile.
            self._maintain_journal()
            if self._spool_failing:
                break  # the batch went back to the buffer: try again on the next round, after a probe

    def _prepare(self, raw: list[Any]) -> list[dict[str, Any]]:
        self.counters["published"] += len(raw)
        return self._prepare_events(raw)

    def _prepare_events(self, raw: list[Any]) -> list[dict[str, Any]]:
        prepared = []
        clock = time.perf_counter
        handed_back = clock()
        for event in raw:
            prepared.append(prepare_event(event, store_bodies=self._store_bodies, max_bytes=self._body_max_bytes))
            # Hand the GIL back every YIELD_SECONDS: the event loop waiting for it would otherwise wait for the
            # interpreter's switch interval (5 ms) while a whole batch is redacted. Not after every event: each
            # hand-over costs both threads a wake-up, and one per event was 7% of this thread's CPU.
            if clock() - handed_back >= YIELD_SECONDS:
                time.sleep(0)
                handed_back = clock()
        return prepared

    def _deliver(self, batch: list[dict[str, Any]], marks: list[Mark | None]) -> bool:
        """Deliver ``batch`` or spool it; True when either took it, False when it went back to the buffer."""
        if self._send(batch):
            self._spool_failing = False
            return True
        return self._spool_or_keep(batch, marks)

    def _send(self, batch: list[dict[str, Any]]) -> bool:
        if not (self._healthy and self._sink is not None):
            return False
        try:
            self._sink.send(batch)
        except DeliveryError as exc:
            self._mark_unhealthy(exc)
            return False
        except Exception as exc:  # a sink bug must not cost the batch
            log.exception("audit: the sink failed unexpectedly")
            self._mark_unhealthy(DeliveryError(str(exc)))
            return False
        self.counters["delivered"] += len(batch)
        return True

    def _spool_or_keep(self, batch: list[dict[str, Any]], marks: list[Mark | None]) -> bool:
        """Spool ``batch``; if even the disk refuses, keep it in memory (at the front) to try again."""
        try:
            self._spool.append(batch)
        except OSError as exc:
            if not self._spool_failing:
                log.error("audit: cannot write the spool in %s (%s); keeping up to %d events in memory, "
                          "then dropping new ones", self._spool.directory, exc, self._max_buffer)
            self._spool_failing = True
            self._buffer.extendleft(reversed(list(zip(batch, marks, strict=True))))
            return False
        if self._spool_failing:
            log.warning("audit: the spool in %s accepts events again", self._spool.directory)
        self._spool_failing = False
        self.counters["spooled"] += len(batch)
        metrics.SPOOLED.inc(len(batch))
        return True

    def _send_spooled(self, batch: list[Any]) -> bool:
        if self._sink is None:
            return False
        try:
            # The database sink stores a batch as it is, trusting this process to have prepared it; a spool
            # line may come from another process or version, or be JSON that is no batch of events.
            self._sink.send(self._prepare_events(batch))
        except DeliveryError as exc:
            self._mark_unhealthy(exc)
            return False
        self.counters["replayed_batches"] += 1
        return True

    def _maybe_probe(self) -> None:
        if self._healthy or self._clock() < self._next_probe:
            return
        try:
            if self._sink is None:
                self._sink = self._sink_factory()
            self._sink.probe()
        except DeliveryError as exc:
            self._mark_unhealthy(exc)
            return
        except Exception as exc:  # noqa: BLE001 - building the sink failed again, for whatever reason
            self._mark_unhealthy(DeliveryError(str(exc)))
            return
        log.warning("audit: delivery works again; replaying the spool")
        self._healthy = True
        self._probe_delay = PROBE_MIN_SECONDS
        self._replay_pending = True

    def _maybe_replay(self) -> None:
        now = self._clock()
        if now >= self._next_scan:
            self._next_scan = now + SPOOL_SCAN_SECONDS
            self._replay_pending = True
            self._recover_pending = self._journal is not None
        if self._recover_pending:
            self._recover_journal()
        if not (self._healthy and self._replay_pending):
            return
        outcome = self._spool.replay_one(self._send_spooled)
        if outcome == "empty":
            self._replay_pending = False

    def _mark_unhealthy(self, exc: Exception) -> None:
        if self._healthy:
            log.warning("audit: delivery failed (%s); spooling to %s", exc, self._spool.directory)
            self._probe_delay = PROBE_MIN_SECONDS
        else:
            self._probe_delay = min(PROBE_MAX_SECONDS, self._probe_delay * 2)
        self._healthy = False
        self._next_probe = self._clock() + self._probe_delay

    def _report_drops(self, *, final: bool = False) -> None:
        """Count the events ``publish`` dropped since the last report, and say so loudly (rate-limited)."""
        with self._drop_lock:
            dropped = self._dropped
        new = dropped - self._drops_reported
        if new:
            self._drops_reported = dropped
            self.counters["dropped"] = dropped
            metrics.DROPPED.labels("buffer_full").inc(new)
        unlogged = dropped - self._drops_logged
        if unlogged and (final or self._clock() >= self._next_drop_log):
            self._drops_logged = dropped
            self._next_drop_log = self._clock() + DROP_LOG_SECONDS
            log.error(
                "AUDIT EVENTS DROPPED: %d new events were refused because %d were already waiting in memory "
                "(AUDIT_BUFFER_MAX_EVENTS) and neither the sink (%s) nor the spool (%s) took them; %d dropped "
                "by this process so far", unlogged, self._max_buffer, "healthy" if self._healthy else "failing",
                "failing" if self._spool_failing else "writable", dropped)

    # -- the journal ----------------------------------------------------------------------------------

    def _maintain_journal(self) -> None:
        """Rotate, reopen or fdatasync the journal, and report its counters (the request path only counts)."""
        journal = self._journal
        if journal is None:
            return
        journal.maintain()
        stats = journal.stats
        new_bytes = stats.bytes_written - self._journal_reported.get("bytes", 0)
        if new_bytes:
            metrics.JOURNAL_BYTES.inc(new_bytes)
            self._journal_reported["bytes"] = stats.bytes_written
        skipped_now = 0
        for reason, count in stats.skipped.items():
            new = count - self._journal_reported.get(reason, 0)
            if new:
                metrics.JOURNAL_SKIPPED.labels(reason).inc(new)
                self._journal_reported[reason] = count
                skipped_now += new
        if skipped_now and not self._journal_failing:
            log.error("audit journal: %d events could not be journaled (%s; last error: %s); they wait in memory "
                      "only, so a SIGKILL could lose them", skipped_now,
                      ", ".join(f"{k} {v}" for k, v in stats.skipped.items() if v), journal.last_error)
        elif not skipped_now and self._journal_failing:
            log.warning("audit journal: events are journaled again")
        self._journal_failing = bool(skipped_now)

    def _checkpoint(self, marks: list[Mark | None]) -> None:
        last = next((mark for mark in reversed(marks) if mark is not None), None)
        if last is not None and self._journal is not None:
            self._journal.checkpoint(last)

    def _recover_journal(self) -> None:
        """Replay one orphaned journal file (of a process that died) through prepare and deliver-or-spool."""
        journal = self._journal
        if journal is None:
            self._recover_pending = False
            return
        result = journal_recovery.recover_one(journal.directory, journal.keyring, self._deliver_recovered,
                                              batch_size=self._batch_size, skip=journal.owns)
        self.counters["journal_replayed"] += result.replayed
        self.counters["journal_torn"] += result.torn
        self.counters["journal_lost"] += result.lost
        if result.outcome in ("empty", "failed"):
            self._recover_pending = False  # nothing left, or nothing takes events now: the next scan tries again

    def _deliver_recovered(self, events: list[Any]) -> bool:
        batch = self._prepare_events(events)
        if self._send(batch):
            return True
        try:
            self._spool.append(batch)
        except OSError:
            return False
        self.counters["spooled"] += len(batch)
        metrics.SPOOLED.inc(len(batch))
        return True

    # -- shutdown's last resort (runs on the caller's thread) -----------------------------------------

    def _spool_oldest_batch(self) -> None:
        """Spool the oldest batch from the calling thread: shutdown's fallback when the thread did not finish.

        No checkpoint here: the thread may still hold an older batch; the journal stays for the next process.
        """
        with self._fallback_lock:
            taken = self._take(self._batch_size)
            try:
                if taken:
                    self._spool_or_keep(self._prepare([event for event, _ in taken]), [mark for _, mark in taken])
            finally:
                self._release(len(taken))



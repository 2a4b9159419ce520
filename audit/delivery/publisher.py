"""The audit publisher: the request path hands over one event and returns; a thread does the rest.

``publish(event)`` writes the event, encrypted, to the process's journal (``audit.delivery.journal``: one ``pwrite`` to
the page cache, so that a SIGKILL loses nothing the request path handed over; see bench/micro_journal.py),
appends it to an in-memory deque and wakes the publisher thread only when a batch is full. The request path
publishes before the answer's last bytes are sent. The thread:

1. batches events by count (``AUDIT_BATCH_SIZE``) and by time (``AUDIT_FLUSH_INTERVAL``);
2. validates and redacts each event (``audit.delivery.event.prepare_event``) - raw prompts never leave the process in
   clear (the journal holds them encrypted);
3. delivers each batch through its sink: one Celery task per batch, or, without ``CELERY_BROKER_URL``, an
   insert with the ORM;
4. when delivery fails, appends the batch to the spool (``audit.delivery.spool``) and stops trying the sink until a
   cheap probe succeeds again (backing off from 1 s to 15 s), then replays the spool, oldest file first.
   It also replays at start-up, so a restarted gateway sends what a crashed one spooled;
5. checkpoints the journal once a batch is delivered or spooled, and replays the journals of dead processes
   (at start-up, then every 30 s) from their checkpoints (``audit.delivery.journal_recovery``).

The buffer is bounded (``AUDIT_BUFFER_MAX_EVENTS``): the thread spools whatever the sink does not take, so
the buffer fills only when the spool refuses too (disk full, ``AUDIT_SPOOL_MAX_BYTES``); then ``publish`` drops
new events, counts them (``gomodel_audit_events_dropped_total``) and the thread logs it loudly.

``shutdown`` delivers or spools everything still in memory. The gateway calls it at the ASGI lifespan
shutdown, once the server has finished its requests (``routing.ops.shutdown``); it also runs at interpreter
exit, and on SIGTERM in a process where nothing else handles that signal (a forked server worker exits
without running ``atexit``: that is why the gateway needs the lifespan protocol).

Delivery is at least once: the worker stores each ``request_id`` once, so a batch sent twice is harmless.
"""

from __future__ import annotations

import atexit
import logging
import os
import signal
import threading
from pathlib import Path
from typing import Any

from audit.delivery.batch_publisher import DEFAULT_SHUTDOWN_SECONDS, Publisher, Sink
from audit.delivery.journal import Journal, Keyring
from audit.delivery.spool import Spool

__all__ = ["Publisher", "Sink", "build_from_settings", "flush", "publish", "shutdown", "start", "stats"]

log = logging.getLogger("gomodel.audit")

# ------------------------------------------------------------------------------------------------------
# The process-wide publisher, configured from Django settings.
# ------------------------------------------------------------------------------------------------------

_publisher: Publisher | None = None
_publisher_lock = threading.Lock()


def publish_timeout_seconds() -> float:
    """How long one broker call may take before the publisher gives up on it (from the broker timeouts)."""
    from django.conf import settings

    options = getattr(settings, "CELERY_BROKER_TRANSPORT_OPTIONS", {}) or {}
    socket_timeout = float(options.get("socket_timeout", 3))
    connect_timeout = float(getattr(settings, "CELERY_BROKER_CONNECTION_TIMEOUT", 3) or 3)
    return float(getattr(settings, "AUDIT_PUBLISH_TIMEOUT", connect_timeout + 2 * socket_timeout + 1))


def build_from_settings() -> Publisher:
    """A Publisher configured from Django settings (Celery sink when CELERY_BROKER_URL is set)."""
    from django.conf import settings

    from audit.delivery.sinks import CelerySink, DatabaseSink

    def sink_factory() -> Sink:
        if settings.CELERY_BROKER_URL:
            from gomodel_site.celery import app

            return CelerySink(app, timeout=publish_timeout_seconds())
        return DatabaseSink(statement_timeout=publish_timeout_seconds())

    return Publisher(
        sink_factory=sink_factory,
        spool=Spool(Path(settings.AUDIT_SPOOL_DIR), max_total_bytes=settings.AUDIT_SPOOL_MAX_BYTES),
        journal=journal_from_settings(),
        batch_size=settings.AUDIT_BATCH_SIZE,
        batch_seconds=settings.AUDIT_FLUSH_INTERVAL,
        max_buffer=getattr(settings, "AUDIT_BUFFER_MAX_EVENTS", 50_000),
        store_bodies=settings.AUDIT_STORE_BODIES,
        body_max_bytes=settings.AUDIT_BODY_MAX_BYTES,
    )


def journal_from_settings() -> Journal | None:
    """The process's audit journal (``AUDIT_JOURNAL``), sealed under a key derived from ``SECRET_KEY``."""
    from django.conf import settings

    if not settings.AUDIT_JOURNAL:
        return None
    if not settings.SECRET_KEY:
        log.error("audit: no SECRET_KEY, so no audit journal: a SIGKILL loses the events still in memory")
        return None
    return Journal(
        Path(settings.AUDIT_JOURNAL_DIR),
        # Sealed under the current key; journals sealed under a fallback (a rotated key) are still read.
        Keyring([settings.SECRET_KEY, *settings.SECRET_KEY_FALLBACKS]),
        max_bytes=settings.AUDIT_JOURNAL_MAX_BYTES,
        fsync=settings.AUDIT_JOURNAL_FSYNC,
    )


def _get() -> Publisher:
    global _publisher
    with _publisher_lock:
        if _publisher is None:
            _publisher = build_from_settings()
            atexit.register(_shutdown_at_exit)
            _install_sigterm_handler()
        return _publisher


def publish(event: dict[str, Any]) -> None:
    """Hand one audit event to the process's publisher (non-blocking, thread-safe, never raises)."""
    publisher = _publisher
    if publisher is None:
        try:
            publisher = _get()
        except Exception:  # a misconfigured audit must not fail the request it describes
            log.exception("audit: cannot start the publisher; event %s not recorded", _request_id_of(event))
            return
    publisher.publish(event)


def start() -> Publisher:
    """Start the process's publisher thread now (it also starts on the first publish)."""
    publisher = _get()
    publisher.start()
    return publisher


def flush(timeout: float = 10.0) -> bool:
    """Wait until everything published so far is delivered or spooled; False on timeout."""
    publisher = _publisher
    return True if publisher is None else publisher.flush(timeout)


def shutdown(timeout: float = DEFAULT_SHUTDOWN_SECONDS) -> bool:
    """Deliver or spool everything in memory and stop the publisher; a later publish starts a new one."""
    global _publisher
    with _publisher_lock:
        publisher, _publisher = _publisher, None
    if publisher is None:
        return True
    return publisher.shutdown(timeout)


def stats() -> dict[str, Any]:
    publisher = _publisher
    return publisher.stats() if publisher is not None else {"published": 0, "buffered": 0, "healthy": True}


def _request_id_of(event: Any) -> str:
    return str(event.get("request_id", "?")) if isinstance(event, dict) else "?"


def _shutdown_at_exit() -> None:
    try:
        shutdown()
    except Exception:  # at exit there is nobody left to tell but the log
        log.exception("audit: shutdown at exit failed")


def _on_sigterm(signum: int, frame: Any) -> None:
    """SIGTERM's default action would kill the process without running atexit: flush first, then die so."""
    # (No lock here: the interrupted main thread might hold it.)
    publisher = _publisher
    if publisher is not None:
        publisher.shutdown()
    signal.signal(signal.SIGTERM, signal.SIG_DFL)
    os.kill(os.getpid(), signal.SIGTERM)


def _install_sigterm_handler() -> None:
    """Flush on SIGTERM in a process where SIGTERM would simply kill (a script, a management command).

    Where something else handles SIGTERM - an ASGI server, whose graceful stop ends in the lifespan shutdown
    that calls ``shutdown`` - the publisher leaves the signal alone. Only possible on the main thread.
    """
    if threading.current_thread() is not threading.main_thread():
        return
    try:
        if signal.getsignal(signal.SIGTERM) == signal.SIG_DFL:
            signal.signal(signal.SIGTERM, _on_sigterm)
    except (ValueError, OSError):  # not the main interpreter, or signals unavailable here
        return


def _forget_after_fork() -> None:
    """A forked child has no publisher thread: start afresh (the parent keeps its own events)."""
    global _publisher, _publisher_lock
    _publisher = None
    _publisher_lock = threading.Lock()


os.register_at_fork(after_in_child=_forget_after_fork)

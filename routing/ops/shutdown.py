"""Stopping a gateway worker without cutting requests short or losing an audit event.

ASGI servers handle SIGTERM and SIGINT themselves: granian and uvicorn stop accepting connections, let the
requests in flight finish (for as long as those take), then run the ASGI lifespan shutdown and exit. Around
that, the gateway adds, in each worker process (installed at the lifespan startup):

1. on the signal the worker is *draining*: ``/health/ready`` answers 503, so whatever still probes it stops
   sending it work (new connections are refused by the server already);
2. ``GOMODEL_SHUTDOWN_GRACE`` after the signal, requests still running are cancelled - a stream ends cut
   short, and its audit event says so - so a stuck upstream cannot hold the stop up forever;
3. at the lifespan shutdown, which the server runs once its connections are closed, the routing table's
   reload thread stops and the audit publisher delivers or spools every event still in memory before the
   process exits.

A forked server worker exits without running ``atexit``, and granian's ``--interface asginl`` runs no
lifespan: there nothing of this runs and events still in memory at a stop are lost, which the worker logs
loudly at its first request. Run ``granian --interface asgi`` (the README's production command).
"""

from __future__ import annotations

import asyncio
import logging
import os
import signal
import threading
from typing import Any

from asgiref.sync import sync_to_async
from django.apps import apps
from django.conf import settings

from routing.config.runtime import runtime
from routing.ops import early_stop
from routing.ops.early_stop import STOP_SIGNALS

log = logging.getLogger("gomodel.shutdown")


class Drain:
    """This worker's stop: whether it is draining, the requests in flight, and the grace deadline."""

    def __init__(self) -> None:
        self.draining = False
        self.lifespan_started = False
        self._in_flight: set[asyncio.Task[Any]] = set()
        self._cut_short: set[asyncio.Task[Any]] = set()
        self._grace_timer: asyncio.TimerHandle | None = None
        self._checked_lifespan = False

    @property
    def in_flight(self) -> int:
        return len(self._in_flight)

    def track(self, app: Any) -> Any:
        """``app`` as an ASGI application whose requests count as in flight (and are cancelled past the grace)."""

        async def tracked(scope: Any, receive: Any, send: Any) -> None:
            if not self._checked_lifespan:
                self._check_lifespan()
            task = asyncio.current_task()
            if task is None:  # a server that does not run requests as asyncio tasks: nothing to cancel
                await app(scope, receive, send)
                return
            self._in_flight.add(task)
            try:
                await app(scope, receive, send)
            except asyncio.CancelledError:
                if task not in self._cut_short:
                    raise
                # Cancelled here at the end of the grace: the request is over, and the server needs no error.
                task.uncancel()
            finally:
                self._in_flight.discard(task)
                self._cut_short.discard(task)

        return tracked

    def begin(self, grace: float) -> None:
        """Start draining (on the event loop): requests still running ``grace`` seconds from now are cancelled."""
        self.draining = True
        if self._grace_timer is not None:
            return  # a second signal: the first one's deadline stands
        log.warning("stopping: %d requests in flight get up to %gs to finish (GOMODEL_SHUTDOWN_GRACE)",
                    len(self._in_flight), grace)
        self._grace_timer = asyncio.get_running_loop().call_later(grace, self._cut_stragglers)

    def end(self) -> None:
        """The server finished its requests: the grace deadline no longer matters."""
        if self._grace_timer is not None:
            self._grace_timer.cancel()

    def _cut_stragglers(self) -> None:
        if not self._in_flight:
            return
        log.warning("stopping: GOMODEL_SHUTDOWN_GRACE is over; cancelling the %d requests still in flight",
                    len(self._in_flight))
        for task in list(self._in_flight):
            self._cut_short.add(task)
            task.cancel()

    def _check_lifespan(self) -> None:
        self._checked_lifespan = True
        if not self.lifespan_started:
            log.error(
                "NO ASGI LIFESPAN: this worker was started without the lifespan protocol (granian --interface "
                "asginl, uvicorn --lifespan off). At a stop it cannot drain, and the audit events still in its "
                "memory are lost. Run granian --interface asgi."
            )


drain = Drain()


def install_signal_handlers(loop: asyncio.AbstractEventLoop, grace: float) -> None:
    """Put the drain in front of the server's own SIGTERM and SIGINT handlers, which then run as before.

    Python runs signal handlers on the main thread; granian and uvicorn run the event loop there.
    """
    if threading.current_thread() is not threading.main_thread():
        log.warning("the event loop is not on the main thread: SIGTERM will not drain this worker")
        return
    for signum in STOP_SIGNALS:
        previous = signal.getsignal(signum)
        if getattr(previous, "gomodel_drain", False):
            continue
        signal.signal(signum, _drain_then(previous, loop, grace))


def _drain_then(previous: Any, loop: asyncio.AbstractEventLoop, grace: float) -> Any:
    def handler(signum: int, frame: Any) -> None:
        drain.draining = True  # at once: a readiness probe answered before the loop runs begin() says so
        loop.call_soon_threadsafe(drain.begin, grace)
        if callable(previous):
            previous(signum, frame)
        elif previous == signal.SIG_DFL:  # nothing else handles it: what the default would have done
            signal.signal(signum, signal.SIG_DFL)
            os.kill(os.getpid(), signum)

    handler.gomodel_drain = True  # type: ignore[attr-defined]
    return handler


async def start_serving() -> None:
    """At the lifespan startup: drain on SIGTERM/SIGINT, start the audit publisher (it replays the spool), and
    act on a stop signal that arrived while the application was being imported (routing.ops.early_stop)."""
    drain.lifespan_started = True
    install_signal_handlers(asyncio.get_running_loop(), settings.GOMODEL_SHUTDOWN_GRACE)
    if apps.is_installed("audit"):
        from audit.delivery import publisher

        publisher.start()
    early_stop.redeliver()


async def stop_gateway() -> None:
    """At the lifespan shutdown: stop reloading the routing table, then flush what must not be lost (audit)."""
    drain.end()
    runtime.stop()
    if not apps.is_installed("audit"):
        return
    from audit.delivery import publisher

    flushed = await sync_to_async(publisher.shutdown, thread_sensitive=False)()
    if flushed:
        log.info("stopped: every audit event was delivered or spooled")
    else:
        log.error("stopped: the audit publisher did not finish delivering or spooling (see the errors above)")

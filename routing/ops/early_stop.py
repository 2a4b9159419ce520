"""A stop signal that arrives while a server worker is still importing the application.

granian forks its workers with the master's SIGTERM and SIGINT handlers, which do nothing in a worker: a
signal the master forwards before the worker has installed its own handlers - importing the application
takes a second or two - would be lost, and that worker would never stop. ``catch`` (called first thing by
``gomodel_site.asgi``) records such a signal instead; ``redeliver`` (called by the lifespan startup, once the
server's handlers and the drain are in place) raises it again, and the worker stops as it should.

A signal can also come before ``catch`` runs, while the worker is still importing the server's own modules.
The master's handler that the worker inherited has then run in the worker: granian's sets ``interrupt_signal``
on its server object, the worker's copy of the master's. ``catch`` reads that flag on the handler it replaces
and records the signal too, so that window loses nothing either.

Standard library only: it runs before Django is imported.
"""

from __future__ import annotations

import signal
import threading
from typing import Any

STOP_SIGNALS = (signal.SIGTERM, signal.SIGINT)
_caught: list[int] = []


def catch() -> None:
    """Record stop signals from now until the server installs its own handlers (main thread only)."""
    if threading.current_thread() is not threading.main_thread():
        return
    for signum in STOP_SIGNALS:
        current = signal.getsignal(signum)
        # Only a handler inherited from a parent process (granian's master). The default action, Python's
        # KeyboardInterrupt or "ignore" already do the right thing in a process that is still starting.
        if callable(current) and current is not signal.default_int_handler and current is not _remember:
            signal.signal(signum, _remember)
            if _ran_before(current) and signal.SIGTERM not in _caught:
                _caught.append(signal.SIGTERM)  # one stop is enough; the handler does not say which signal it was


def _ran_before(handler: Any) -> bool:
    """Whether the inherited master's handler has already run in this process (granian's server object, the
    handler's ``__self__``, then holds ``interrupt_signal = True``)."""
    return getattr(getattr(handler, "__self__", None), "interrupt_signal", False) is True


def _remember(signum: int, frame: Any) -> None:
    _caught.append(signum)


def redeliver() -> None:
    """Raise each stop signal caught during start-up again, for the handlers now installed."""
    while _caught:
        signal.raise_signal(_caught.pop(0))

"""A stop signal that arrives while a server worker is still importing the application.

granian forks its workers with the master's SIGTERM and SIGINT handlers, which do nothing in a worker: a
signal the master forwards before the worker has installed its own handlers - importing the application
takes a second or two - would be lost, and that worker would never stop. ``catch`` (called first thing by
``gomodel_site.asgi``) records such a signal instead; ``redeliver`` (called by the lifespan startup, once the
server's handlers and the drain are in place) raises it again, and the worker stops as it should.

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


def _remember(signum: int, frame: Any) -> None:
    _caught.append(signum)


def redeliver() -> None:
    """Raise each stop signal caught during start-up again, for the handlers now installed."""
    while _caught:
        signal.raise_signal(_caught.pop(0))

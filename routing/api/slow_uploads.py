"""Giving up on request bodies that arrive too slowly, with one timer per worker instead of one per request.

``asyncio.timeout`` around every body read costs about 5 us a request here (a timer scheduled and cancelled
on the hot path, for an upload that almost always arrives in one message). Instead a read registers its task
and its deadline in a dict (``watch``: well under a microsecond), and one sweep per event loop, running only
while reads are in progress, cancels the reads past their deadline. A late read is therefore cut off between
its deadline and one sweep interval later: at most a second, a quarter of the timeout when that is shorter.

    watch = watch_upload(deadline, timeout)
    try:
        body = await read()
    except asyncio.CancelledError:
        if watch.cut_off():  # the sweep's cancellation, now undone: the upload was too slow
            ...
        raise
    finally:
        watch.end()
"""

from __future__ import annotations

import asyncio
import time
import weakref
from typing import Any


class UploadTooSlow(Exception):
    """The body was still arriving at its deadline."""


class _Sweeper:
    """The body reads in progress on one event loop, and the timer that cancels the late ones."""

    def __init__(self, loop: asyncio.AbstractEventLoop) -> None:
        self.loop = loop
        self.reads: dict[asyncio.Task[Any], float] = {}
        self.cut_off: set[asyncio.Task[Any]] = set()
        self.timer: asyncio.TimerHandle | None = None

    def sweep(self, interval: float) -> None:
        now = time.monotonic()
        for task, deadline in list(self.reads.items()):
            if deadline <= now:
                del self.reads[task]
                self.cut_off.add(task)
                task.cancel()
        self.timer = self.loop.call_later(interval, self.sweep, interval) if self.reads else None


class UploadWatch:
    """One read being watched; see the module's docstring for its use."""

    __slots__ = ("sweeper", "task")

    def __init__(self, sweeper: _Sweeper, task: asyncio.Task[Any]) -> None:
        self.sweeper = sweeper
        self.task = task

    def cut_off(self) -> bool:
        """Whether the sweep cancelled the read, and nobody else did: that cancellation is then undone."""
        if self.task not in self.sweeper.cut_off:
            return False
        self.sweeper.cut_off.discard(self.task)
        return self.task.uncancel() == 0

    def end(self) -> None:
        """Stop watching (also after ``cut_off``)."""
        self.sweeper.reads.pop(self.task, None)
        if self.task in self.sweeper.cut_off:  # cut off, but the read ended anyway: no cancellation is owed
            self.sweeper.cut_off.discard(self.task)
            self.task.uncancel()


_sweepers: weakref.WeakKeyDictionary[asyncio.AbstractEventLoop, _Sweeper] = weakref.WeakKeyDictionary()
_last: list[_Sweeper] = []  # the sweeper last used: a worker has one event loop, so almost always the one


def watch_upload(deadline: float, timeout: float) -> UploadWatch:
    """Watch the current task's body read until ``deadline`` (``time.monotonic()``); ``timeout`` (seconds)
    sets how often the sweep looks. Raises UploadTooSlow when the deadline has passed already."""
    if deadline <= time.monotonic():
        raise UploadTooSlow
    loop = asyncio.get_running_loop()
    if _last and _last[0].loop is loop:
        sweeper = _last[0]
    else:
        sweeper = _sweepers.get(loop) or _sweepers.setdefault(loop, _Sweeper(loop))
        _last[:] = [sweeper]
    task = asyncio.current_task()
    if task is None:
        raise RuntimeError("a body is read inside the request's task")
    sweeper.reads[task] = deadline
    if sweeper.timer is None:
        interval = min(1.0, max(0.01, timeout / 4))
        sweeper.timer = loop.call_later(interval, sweeper.sweep, interval)
    return UploadWatch(sweeper, task)

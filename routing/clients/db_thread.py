"""Run a blocking database function from async code without keeping a connection behind.

Django's connections belong to the thread that opened them; a worker thread that never closes its
connection holds one of the pool's few connections for good. Every database call made from the event loop
goes through ``in_db_thread``, which hands the connection back to the pool as soon as the call returns.
"""

from __future__ import annotations

import functools
from collections.abc import Awaitable, Callable
from typing import ParamSpec, TypeVar

from asgiref.sync import sync_to_async
from django.db import connections

P = ParamSpec("P")
R = TypeVar("R")


def in_db_thread(func: Callable[P, R]) -> Callable[P, Awaitable[R]]:
    @functools.wraps(func)
    def run(*args: P.args, **kwargs: P.kwargs) -> R:
        try:
            return func(*args, **kwargs)
        finally:
            connections.close_all()  # this thread's connections only: back to the pool

    return sync_to_async(run, thread_sensitive=False)

"""The suite's one way to wait: poll for a state with a bounded wait, never sleep for an event to happen."""

from __future__ import annotations

import time
from collections.abc import Callable
from typing import TypeVar

T = TypeVar("T")


def wait_for(condition: Callable[[], T], timeout: float, what: str, interval: float = 0.05) -> T:
    """``condition()``'s first truthy value, polled every ``interval`` seconds for up to ``timeout``; a test
    that waited in vain fails naming ``what`` it waited for."""
    deadline = time.monotonic() + timeout
    while time.monotonic() < deadline:
        value = condition()
        if value:
            return value
        time.sleep(interval)
    value = condition()  # once more: the state may have arrived while the last interval slept
    if not value:
        raise AssertionError(f"timed out after {timeout:g} s waiting for {what}")
    return value

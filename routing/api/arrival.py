"""When a request arrived: its deadline (``X-GoModel-Deadline-Ms``) starts then, not once its body is in.

The ASGI handlers note the arrival before they authenticate or read a byte of the body, and hand it to the
view on the request (``ARRIVAL_ATTRIBUTE``), so a slow upload spends the client's own time budget.
"""

from __future__ import annotations

import time
from typing import NamedTuple

from django.http import HttpRequest

ARRIVAL_ATTRIBUTE = "gateway_arrival"


class Arrival(NamedTuple):
    """When a request arrived, on the monotonic clock (for its deadline) and the wall clock (for the audit).

    A named tuple: built on every request, and a frozen dataclass costs several times as much to build."""

    monotonic: float
    unix: float

    @staticmethod
    def now() -> Arrival:
        return Arrival(time.monotonic(), time.time())


def arrival_of(request: HttpRequest) -> Arrival:
    """When ``request`` arrived: as its handler noted it, else now (a request built another way)."""
    arrival = getattr(request, ARRIVAL_ATTRIBUTE, None)
    return arrival if isinstance(arrival, Arrival) else Arrival.now()

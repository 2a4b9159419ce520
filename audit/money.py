"""Money as the admin and the auditor pages print it: rounded to what matters, never a float's noise.

A request costs fractions of a cent, so a fixed number of decimals either hides it ($0.0000) or prints
``0.000003959999999999999``. Amounts under a dollar keep three significant digits; larger ones cents.
"""

from __future__ import annotations

import math
from collections.abc import Callable

MAX_DECIMALS = 9


def usd(value: float | None, *, empty: str = "-") -> str:
    """``value`` in USD: ``$0``, ``$0.00000396``, ``$0.0123``, ``$12.50``, ``$1,234.56``; ``empty`` for None."""
    if value is None or not math.isfinite(value):
        return empty
    if value == 0:
        return "$0"
    magnitude = abs(value)
    decimals = 2 if magnitude >= 1 else min(MAX_DECIMALS, 2 - math.floor(math.log10(magnitude)))
    text = f"{magnitude:,.{decimals}f}"
    whole, _, fraction = text.partition(".")
    fraction = fraction.rstrip("0").ljust(2, "0")  # trailing zeros say nothing, but cents keep two digits
    text = f"{whole}.{fraction}"
    return f"{'-' if value < 0 else ''}${text}"


def axis_usd(top: float, ticks: int = 4) -> Callable[[float], str]:
    """A formatter for a money axis from 0 to ``top`` in ``ticks`` steps: as many decimals as the step needs.

    ``$0.000025, $0.00005, $0.000075`` rather than ``$0.0000, $0.0001, $0.0001``.
    """
    step = top / ticks if top > 0 else 1.0
    decimals = 0 if step >= 1 else min(MAX_DECIMALS, 1 - math.floor(math.log10(step)))

    def fmt(value: float) -> str:
        if value == 0:
            return "$0"
        text = f"{value:,.{decimals}f}"
        return "$" + (text.rstrip("0").rstrip(".") if "." in text else text)

    return fmt

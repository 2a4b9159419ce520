"""The conversions between the file's plain values and the database's: prices as Decimal, dates as date."""

from __future__ import annotations

import datetime as dt
from decimal import Decimal


def decimal_in(value: float | None) -> Decimal | None:
    return None if value is None else Decimal(str(value))


def float_out(value: Decimal | None) -> float | None:
    return None if value is None else float(value)


def date_in(value: str | None) -> dt.date | None:
    return None if value is None else dt.date.fromisoformat(value)

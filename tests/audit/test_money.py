"""Money on the admin and auditor pages: rounded amounts, and axis ticks that tell their values apart."""

from __future__ import annotations

import pytest

from audit import charts
from audit.money import axis_usd, usd


@pytest.mark.parametrize(("value", "shown"), [
    (None, "-"), (0.0, "$0"), (0.000003959999999999999, "$0.00000396"), (0.0123, "$0.0123"), (0.5, "$0.50"),
    (12.5, "$12.50"), (1234.567, "$1,234.57"), (-0.25, "-$0.25"), (float("nan"), "-"),
])
def test_it_prints_money_rounded(value: float | None, shown: str) -> None:
    assert usd(value) == shown


@pytest.mark.parametrize(("top", "ticks"), [
    (0.0001, ["$0", "$0.000025", "$0.00005", "$0.000075", "$0.0001"]),
    (2.0, ["$0", "$0.5", "$1", "$1.5", "$2"]),
    (500.0, ["$0", "$125", "$250", "$375", "$500"]),
])
def test_money_ticks_have_the_decimals_their_step_needs(top: float, ticks: list[str]) -> None:
    fmt = axis_usd(top)
    shown = [fmt(top * i / 4) for i in range(5)]
    assert shown == ticks
    assert len(set(shown)) == 5


def test_the_tuning_cost_axis_reads_distinct_ticks() -> None:
    series = [charts.Series("USD per accepted answer", [0.00004, 0.00007, None])]
    top = charts.line_top(series)
    svg = str(charts.lines("Cost per accepted answer", ["a", "b", "c"], series, fmt=axis_usd(top), y_max=top))
    assert ">$0.000025<" in svg
    assert ">$0.000075<" in svg
    assert ">$0.0000<" not in svg

"""Small server-side SVG charts for the auditor pages: stacked bars and lines, no JavaScript.

Each function returns markup safe to embed (every label is escaped). Colours come from CSS classes
(``series-0``, ``series-1``...) styled by the page, so the charts follow the admin's light or dark theme.
"""

from __future__ import annotations

import math
from collections.abc import Callable, Sequence
from dataclasses import dataclass

from django.utils.html import escape
from django.utils.safestring import SafeString, mark_safe

WIDTH = 720
HEIGHT = 220
PAD_LEFT = 68  # room for a money tick such as $0.000075
PAD_RIGHT = 12
PAD_TOP = 12
PAD_BOTTOM = 40


@dataclass(frozen=True)
class Series:
    name: str
    values: Sequence[float | None]
    css: str = ""  # the CSS class that colours it; default ``series-<position>``

    def css_class(self, position: int) -> str:
        return self.css or f"series-{position}"


def nice_max(value: float) -> float:
    """The smallest of 1, 2, 2.5, 5 times a power of ten that is at least ``value``."""
    if value <= 0:
        return 1.0
    magnitude = 10 ** math.floor(math.log10(value))
    for step in (1, 2, 2.5, 5, 10):
        if value <= step * magnitude * (1 + 1e-9):
            return step * magnitude
    return value


def _axis(y_max: float, fmt: Callable[[float], str]) -> list[str]:
    parts = []
    plot_h = HEIGHT - PAD_TOP - PAD_BOTTOM
    for i in range(5):
        value = y_max * i / 4
        y = PAD_TOP + plot_h - plot_h * i / 4
        parts.append(f'<line class="grid" x1="{PAD_LEFT}" x2="{WIDTH - PAD_RIGHT}" y1="{y:.1f}" y2="{y:.1f}"/>')
        parts.append(f'<text class="tick" x="{PAD_LEFT - 6}" y="{y + 4:.1f}" text-anchor="end">'
                     f"{escape(fmt(value))}</text>")
    return parts


def _x_labels(labels: Sequence[str], slot: float) -> list[str]:
    parts = []
    every = max(1, len(labels) // 12)
    for i, label in enumerate(labels):
        if i % every:
            continue
        x = PAD_LEFT + slot * (i + 0.5)
        parts.append(f'<text class="tick" x="{x:.1f}" y="{HEIGHT - PAD_BOTTOM + 16}" text-anchor="middle">'
                     f"{escape(label)}</text>")
    return parts


def _legend(series: Sequence[Series]) -> list[str]:
    parts = []
    x = PAD_LEFT
    for i, s in enumerate(series):
        parts.append(f'<rect class="{s.css_class(i)}" x="{x}" y="{HEIGHT - 14}" width="10" height="10"/>')
        parts.append(f'<text class="legend" x="{x + 14}" y="{HEIGHT - 5}">{escape(s.name)}</text>')
        x += 24 + 7 * len(s.name)
    return parts


def _frame(title: str, body: list[str]) -> SafeString:
    return mark_safe(  # noqa: S308 - every interpolated label above is escaped
        f'<svg class="chart" viewBox="0 0 {WIDTH} {HEIGHT}" role="img" aria-label="{escape(title)}" '
        f'xmlns="http://www.w3.org/2000/svg"><title>{escape(title)}</title>{"".join(body)}</svg>'
    )


def stacked_bars(
    title: str,
    labels: Sequence[str],
    series: Sequence[Series],
    *,
    marker_at: float | None = None,
    marker_label: str = "",
    fmt: Callable[[float], str] = lambda v: f"{v:g}",
    legend: bool = True,
    y_max: float | None = None,
) -> SafeString:
    """Bars per label, each stacking the series' values; an optional vertical marker before slot ``marker_at``.

    ``legend=False`` leaves the legend to the page (many series with long names do not fit in one line).
    ``y_max`` fixes the axis' top (``bar_top`` gives the one it would pick), for a formatter made for it.
    """
    totals = [sum(s.values[i] or 0 for s in series) for i in range(len(labels))]
    y_max = y_max if y_max is not None else nice_max(max(totals, default=0))
    plot_w = WIDTH - PAD_LEFT - PAD_RIGHT
    plot_h = HEIGHT - PAD_TOP - PAD_BOTTOM
    slot = plot_w / max(1, len(labels))
    body = _axis(y_max, fmt)
    for i, label in enumerate(labels):
        base = 0.0
        for k, s in enumerate(series):
            value = s.values[i] or 0
            if value <= 0:
                continue
            h = plot_h * value / y_max
            y = PAD_TOP + plot_h - plot_h * (base + value) / y_max
            body.append(
                f'<rect class="{s.css_class(k)}" x="{PAD_LEFT + slot * i + slot * 0.1:.1f}" y="{y:.1f}" '
                f'width="{slot * 0.8:.1f}" height="{h:.1f}"><title>{escape(label)} {escape(s.name)}: '
                f"{escape(fmt(value))}</title></rect>"
            )
            base += value
    if marker_at is not None:
        x = PAD_LEFT + slot * marker_at
        body.append(f'<line class="marker" x1="{x:.1f}" x2="{x:.1f}" y1="{PAD_TOP}" y2="{PAD_TOP + plot_h}"/>')
        body.append(f'<text class="marker-label" x="{x + 4:.1f}" y="{PAD_TOP + 10}">{escape(marker_label)}</text>')
    body += _x_labels(labels, slot) + (_legend(series) if legend else [])
    return _frame(title, body)


def bar_top(series: Sequence[Series]) -> float:
    """The axis top ``stacked_bars`` picks for ``series``: the nice value above the tallest stack."""
    length = max((len(s.values) for s in series), default=0)
    return nice_max(max((sum(s.values[i] or 0 for s in series if i < len(s.values)) for i in range(length)), default=0))


def line_top(series: Sequence[Series]) -> float:
    """The axis top ``lines`` picks for ``series``."""
    return nice_max(max((v for s in series for v in s.values if v is not None), default=0))


def lines(
    title: str,
    labels: Sequence[str],
    series: Sequence[Series],
    *,
    fmt: Callable[[float], str] = lambda v: f"{v:g}",
    y_max: float | None = None,
) -> SafeString:
    """One polyline per series over the labels; a None value breaks the line."""
    values = [v for s in series for v in s.values if v is not None]
    top = y_max if y_max is not None else nice_max(max(values, default=0))
    plot_w = WIDTH - PAD_LEFT - PAD_RIGHT
    plot_h = HEIGHT - PAD_TOP - PAD_BOTTOM
    slot = plot_w / max(1, len(labels))
    body = _axis(top, fmt)
    for k, s in enumerate(series):
        segments: list[list[str]] = [[]]
        for i, value in enumerate(s.values):
            if value is None:
                segments.append([])
                continue
            x = PAD_LEFT + slot * (i + 0.5)
            y = PAD_TOP + plot_h - plot_h * min(value, top) / top
            segments[-1].append(f"{x:.1f},{y:.1f}")
            body.append(f'<circle class="{s.css_class(k)}" cx="{x:.1f}" cy="{y:.1f}" r="2.5"><title>'
                        f"{escape(labels[i])} {escape(s.name)}: {escape(fmt(value))}</title></circle>")
        for points in segments:
            if len(points) > 1:
                body.append(f'<polyline class="line {s.css_class(k)}" points="{" ".join(points)}"/>')
    body += _x_labels(labels, slot) + _legend(series)
    return _frame(title, body)


def attempt_timeline(attempts: Sequence[tuple[str, float, str]]) -> SafeString:
    """Attempts one after another on a time axis: (label, latency_ms, outcome class) each."""
    total = sum(max(0.0, ms) for _, ms, _ in attempts) or 1.0
    row_h = 22
    height = PAD_TOP + row_h * len(attempts) + 24
    plot_w = WIDTH - 220 - 64  # room for the last bar's label
    body = []
    offset = 0.0
    for i, (label, ms, outcome) in enumerate(attempts):
        ms = max(0.0, ms)
        x = 220 + plot_w * offset / total
        w = max(2.0, plot_w * ms / total)
        y = PAD_TOP + row_h * i
        body.append(f'<text class="tick" x="214" y="{y + 14}" text-anchor="end">{escape(label)}</text>')
        body.append(f'<rect class="outcome-{escape(outcome)}" x="{x:.1f}" y="{y}" width="{w:.1f}" height="16">'
                    f"<title>{escape(label)}: {ms:.1f} ms</title></rect>")
        body.append(f'<text class="legend" x="{x + w + 4:.1f}" y="{y + 12}">{ms:.0f} ms</text>')
        offset += ms
    body.append(f'<text class="tick" x="220" y="{height - 6}">0 ms</text>')
    body.append(f'<text class="tick" x="{WIDTH - PAD_RIGHT}" y="{height - 6}" text-anchor="end">'
                f"{total:.0f} ms</text>")
    return mark_safe(  # noqa: S308 - labels escaped above
        f'<svg class="chart" viewBox="0 0 {WIDTH} {height}" role="img" aria-label="attempt timeline" '
        f'xmlns="http://www.w3.org/2000/svg"><title>attempt timeline</title>{"".join(body)}</svg>'
    )

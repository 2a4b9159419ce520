"""The live state of a virtual model's targets, as the admin shows it.

Health is kept per worker process, so the page shows the state of the process that serves it and says so.
"""

from __future__ import annotations

import os
import time
from datetime import UTC, datetime

from django.utils.html import format_html, format_html_join
from django.utils.safestring import SafeString

from routing.config.runtime import current_table
from routing.core.selector import Candidate, adaptive_weights
from routing.gateway.state import state


def target_rows(source: str) -> list[dict[str, object]]:
    """One row per target: configured and live weight, latency estimate, in flight, cooldown."""
    table = current_table()
    virtual = table.virtual_models.get(source)
    if virtual is None:
        return []
    now = time.monotonic()
    healths = [state.health.get(t.name) for t in virtual.targets]
    candidates = [
        Candidate(name=t.name, health=h, weight=t.weight) for t, h in zip(virtual.targets, healths, strict=True)
    ]
    live = adaptive_weights(candidates, now, state.selector_config, None) if candidates else []
    heaviest = max(live, default=0.0) or 1.0
    rows = []
    for target, health, weight in zip(virtual.targets, healths, live, strict=True):
        until = health.cooldown_until
        rows.append({
            "target": target.name,
            "configured_weight": target.weight,
            "live_weight": round(weight / heaviest, 3),
            "status": health.status(now),
            "latency_ms": None if health.latency_estimate_s is None else round(health.latency_estimate_s * 1000, 1),
            "in_flight": health.in_flight,
            "cooldown_until": None if until is None else
            datetime.fromtimestamp(time.time() + until - now, tz=UTC).strftime("%Y-%m-%d %H:%M:%S UTC"),
            "last_error": health.last_error_reason or "",
        })
    return rows


def render_live_state(source: str) -> SafeString:
    rows = target_rows(source)
    if not rows:
        return format_html("<p>{}</p>", "No live state: the virtual model is not in the routing table of this process.")
    header = format_html(
        "<p>Read from worker process {} (each worker keeps its own health statistics); refresh to update.</p>",
        os.getpid(),
    )
    body = format_html_join(
        "",
        "<tr><td>{}</td><td>{}</td><td>{}</td><td>{}</td><td>{}</td><td>{}</td><td>{}</td><td>{}</td></tr>",
        ((r["target"], r["configured_weight"], r["live_weight"], r["status"],
          "-" if r["latency_ms"] is None else f"{r['latency_ms']} ms", r["in_flight"], r["cooldown_until"] or "-",
          r["last_error"] or "-") for r in rows),
    )
    return format_html(
        "{}<table><thead><tr><th>target</th><th>weight</th><th>live weight</th><th>status</th>"
        "<th>latency estimate</th><th>in flight</th><th>cooldown until</th><th>last error</th></tr></thead>"
        "<tbody>{}</tbody></table>",
        header, body,
    )

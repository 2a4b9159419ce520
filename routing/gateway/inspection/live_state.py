"""The live state of a virtual model's targets, as the admin shows it.

Health is kept per worker process, so the page shows the state of the process that serves it and says so.
With ``REDIS_URL`` set, cooldowns, lockouts and open breakers come from every process (routing.gateway.
shared_sync): a row says when its cooldown is another process's verdict, and which process (host/pid/tag).
"""

from __future__ import annotations

import os
import time
from datetime import UTC, datetime

from django.utils.html import format_html, format_html_join
from django.utils.safestring import SafeString

from routing.config.runtime import current_table
from routing.core.provider_limits import TargetQuota
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
        quota = state.quotas.get(target.name)
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
            # The process whose verdict this cooldown is; empty when it is this process's own (or none).
            "verdict_from": (health.shared_origin or "") if until is not None else "",
            "provider_minute": _minute(quota, now),
            "last_probe": _last_probe(target.name),
        })
    return rows


def _last_probe(target: str) -> str:
    """The target's last background probe known here: when, its result and what it did (empty: none)."""
    last = state.probes.get(target)
    if last is None:
        return ""
    when = datetime.fromtimestamp(last.at_unix, tz=UTC).strftime("%Y-%m-%d %H:%M:%S UTC")
    by = f", by another process ({last.origin})" if last.origin else ""
    return f"{when}: {last.result} ({last.effect}{by})"


def _minute(quota: TargetQuota | None, now: float) -> str:
    """This process's last minute against the provider's rpm/tpm (tokens used and reserved); empty without limits.

    While Redis decides admissions it counts every process's attempts, so the row says these are this process's."""
    if quota is None:
        return ""
    requests, tokens = quota.counts(now)
    parts = []
    if quota.limits.rpm is not None:
        parts.append(f"{requests}/{quota.limits.rpm} requests")
    if quota.limits.tpm is not None:
        parts.append(f"{tokens}/{quota.limits.tpm} tokens")
    shown = ", ".join(parts)
    return f"{shown} (this process; Redis counts every process)" if state.quotas.shared else shown


def render_live_state(source: str) -> SafeString:
    rows = target_rows(source)
    if not rows:
        return format_html("<p>{}</p>", "No live state: the virtual model is not in the routing table of this process.")
    shared = state.shared
    if shared is None:
        sharing = "each worker keeps its own health statistics"
    elif shared.redis_up is False:
        sharing = "Redis is unreachable: cooldowns are this worker's own until it answers"
    else:
        sharing = "cooldowns, lockouts and open breakers are shared by every process through Redis; latency and " \
                  "in-flight counts are this worker's"
    header = format_html(
        "<p>Read from worker process {} ({}); refresh to update.</p>",
        os.getpid(), sharing,
    )
    body = format_html_join(
        "",
        "<tr><td>{}</td><td>{}</td><td>{}</td><td>{}</td><td>{}</td><td>{}</td><td>{}</td><td>{}</td><td>{}</td>"
        "<td>{}</td><td>{}</td></tr>",
        ((r["target"], r["configured_weight"], r["live_weight"], r["status"],
          "-" if r["latency_ms"] is None else f"{r['latency_ms']} ms", r["in_flight"], r["cooldown_until"] or "-",
          r["last_error"] or "-",
          f"another process ({r['verdict_from']})" if r["verdict_from"] else "this process" if r["cooldown_until"]
          else "-",
          r["provider_minute"] or "-", r["last_probe"] or "-") for r in rows),
    )
    return format_html(
        "{}<table><thead><tr><th>target</th><th>weight</th><th>live weight</th><th>status</th>"
        "<th>latency estimate</th><th>in flight</th><th>cooldown until</th><th>last error</th>"
        "<th>cooldown verdict from</th><th>provider limits, last minute</th><th>last background probe</th></tr>"
        "</thead>"
        "<tbody>{}</tbody></table>",
        header, body,
    )

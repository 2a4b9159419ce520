"""The admin's front page: how the gateway is doing, from the audit rollup and this process's live state.

Traffic, errors, latency and cost come from ``audit.dashboard`` (the rollup, never the revisions themselves);
target health comes from the serving process (``routing.gateway.inspection.live_state``), with cooldowns, lockouts and
probes that other processes shared through Redis. It lives beside the admin because it joins the two: the audit app
never imports routing. The stock app list follows the dashboard on the same page.
"""

from __future__ import annotations

import os
from typing import Any
from urllib.parse import urlencode

from django.conf import settings
from django.contrib import admin
from django.http import HttpRequest, HttpResponse
from django.template.response import TemplateResponse
from django.urls import reverse
from django.utils import timezone

from audit import charts, dashboard
from audit.alerts import recent_budget_alerts
from audit.models import BudgetAlert
from audit.money import axis_usd, usd
from routing.config.runtime import current_table
from routing.gateway.inspection.live_state import target_rows
from routing.gateway.state import state
from routing.playground import SEND_PERMISSION

VIEW_REVISIONS = "audit.view_auditrevision"
DEFAULT_WINDOW = "day"


def _ms(value: float | None) -> str:
    if value is None:
        return "-"
    return f"{value:,.0f} ms" if value >= 10 else f"{value:.1f} ms"


def _count_tick(value: float) -> str:
    return f"{value:,.0f}" if value >= 100 or value == int(value) else f"{value:.3g}"


def _rate(value: float | None) -> str:
    return "-" if value is None else f"{value:.1%}"


def _summary(totals: dashboard.Totals) -> dict[str, str | int]:
    return {
        "requests": totals.requests, "errors": totals.errors, "server_errors": totals.server_errors,
        "error_rate": _rate(totals.error_rate), "p50": _ms(totals.p50_ms), "p99": _ms(totals.p99_ms),
        "cost": usd(totals.cost_usd), "tokens": totals.input_tokens + totals.output_tokens,
        "cache_hit_rate": _rate(totals.cache_hit_rate), "cache_lookups": totals.cache_lookups,
        "cache_hits": totals.cache_hits, "cache_semantic_hits": totals.cache_semantic_hits,
    }


def _charts(window: dashboard.Window, slots: list[dashboard.Slot]) -> list[Any]:
    labels = [s.start.strftime(window.label) for s in slots]
    count = [s.totals for s in slots]
    traffic = [charts.Series("answered", [t.requests - t.errors for t in count]),
               charts.Series("errors", [t.errors for t in count], css="series-error")]
    cost = [charts.Series("USD billed", [t.cost_usd for t in count], css="spend-0")]
    cost_top = charts.bar_top(cost)
    latency = [charts.Series("p50", [t.p50_ms for t in count]), charts.Series("p99", [t.p99_ms for t in count])]
    return [
        charts.stacked_bars(f"Requests per {_slot_name(window)}", labels, traffic, fmt=_count_tick),
        charts.lines("Error rate", labels, [charts.Series("errors / requests", [t.error_rate for t in count],
                                                          css="series-error")], fmt=lambda v: f"{v:.0%}"),
        charts.lines("Latency (ms)", labels, latency, fmt=_count_tick),
        charts.stacked_bars("Cost", labels, cost, fmt=axis_usd(cost_top), y_max=cost_top),
    ]


def _slot_name(window: dashboard.Window) -> str:
    return {60: "minute", 3600: "hour"}.get(window.slot, f"{window.slot // 3600} hours")


def _history(**filters: str) -> str:
    return f"{reverse('audit:history')}?{urlencode({k: v for k, v in filters.items() if v})}"


def _targets() -> list[dict[str, object]]:
    """Every virtual model's targets, with their live state in this process (shared verdicts included)."""
    table = current_table()
    rows: list[dict[str, object]] = []
    for source in sorted(table.virtual_models):
        for row in target_rows(source):
            rows.append({**row, "virtual_model": source})
    return rows


def _alert_row(alert: BudgetAlert) -> dict[str, object]:
    since = alert.fired_at.replace(hour=0, minute=0, second=0, microsecond=0).isoformat()
    url = (_history(key=alert.scope_name, since=since) if alert.scope_kind == "key"
           else _history(team=alert.scope_name, since=since))
    detail = ""
    if alert.delivery == BudgetAlert.DELIVERED:
        detail = f"to {alert.webhook}" + (f" after {alert.attempts} attempts" if alert.attempts > 1 else "")
    elif alert.delivery in (BudgetAlert.PENDING, BudgetAlert.FAILED):
        detail = f"{alert.webhook}: {alert.attempts} attempts" + (f", {alert.last_error}" if alert.last_error else "")
    return {"when": alert.fired_at.strftime("%Y-%m-%d %H:%M:%S"), "kind": alert.scope_kind, "name": alert.scope_name,
            "url": url, "threshold": f"{alert.threshold}%", "spend": usd(float(alert.spend_usd)),
            "budget": usd(float(alert.budget_usd)), "period": alert.period,
            "delivery": alert.get_delivery_display(), "detail": detail}


def _process() -> dict[str, object]:
    shared = state.shared
    if shared is None:
        sharing = "each worker process keeps its own health: this is the state of the process that served this page"
    elif shared.redis_up is False:
        sharing = "Redis is unreachable: the cooldowns shown are this process's own until it answers"
    else:
        sharing = ("cooldowns, lockouts, open breakers and probes are shared by every process through Redis; latency "
                   "estimates and in-flight counts are this process's")
    return {"pid": os.getpid(), "origin": getattr(shared, "origin", ""), "sharing": sharing,
            "version": current_table().version}


def dashboard_view(request: HttpRequest) -> HttpResponse:
    """``/admin/``: the dashboard, then the admin's app list."""
    now = timezone.now()
    name = request.GET.get("window", DEFAULT_WINDOW)
    window = dashboard.WINDOWS.get(name) or dashboard.WINDOWS[DEFAULT_WINDOW]
    context: dict[str, Any] = {
        **admin.site.each_context(request),
        "title": "Dashboard",
        "subtitle": None,
        "app_list": admin.site.get_app_list(request),
        "targets": _targets(),
        "process": _process(),
        "auth_open": settings.GOMODEL_AUTH == "open",
        "window": window.name,
        "window_links": [(w, w == window.name, f"?{urlencode({'window': w})}") for w in dashboard.WINDOWS],
        "can_view_audit": request.user.has_perm(VIEW_REVISIONS),
        "can_use_playground": request.user.has_perm(SEND_PERMISSION),
    }
    if context["can_view_audit"]:
        slots = dashboard.window_slots(window, now)
        summaries = []
        for other in dashboard.WINDOWS.values():
            other_slots = slots if other is window else dashboard.window_slots(other, now)
            summaries.append((other.name, _summary(dashboard.window_totals(other_slots))))
        start, _ = window.bounds(now)
        since = {"since": start.isoformat()}
        context.update({
            "summaries": summaries,
            "charts": _charts(window, slots),
            "has_traffic": any(s.totals.requests for s in slots),
            "cache_configured": bool(current_table().caches),
            "tiers": [(s.label, s.requests, f"{s.share:.1%}") for s in dashboard.tier_mix(window, now)],
            "top_keys": [(s.label, usd(s.cost_usd), s.requests, _history(key=s.label, **since) if s.key_id is not None
                          else "") for s in dashboard.top_keys(window, now)],
            "top_teams": [(s.label, usd(s.cost_usd), s.requests, _history(team=s.team, **since))
                          for s in dashboard.top_teams(window, now)],
            "budget_alerts": [_alert_row(alert) for alert in recent_budget_alerts()],
            "alert_thresholds": ", ".join(f"{t}%" for t in settings.GOMODEL_BUDGET_ALERT_THRESHOLDS),
        })
    return TemplateResponse(request, "admin/dashboard.html", context)

"""The auditor pages: history, one request, one session, config history, tuning, spend, exports.

Read-only views behind login (the admin's login page) and the audit view permissions that the ``auditors``
group has. They render Django templates inside the admin's layout; charts are inline SVG (audit.charts).
"""

from __future__ import annotations

import datetime as dt
from collections.abc import Callable
from typing import Any
from urllib.parse import urlencode

from django.conf import settings
from django.contrib import admin
from django.contrib.auth.decorators import login_required, permission_required
from django.http import Http404, HttpRequest, HttpResponse, StreamingHttpResponse
from django.shortcuts import render
from django.urls import reverse
from django.utils import timezone
from django.views.decorators.http import require_GET

from audit import charts, decisions, exports, selectors, spend, tuning
from audit.filters import MAX_TOP, filters_from_query, parse_instant, spend_query_from_query
from audit.models import AuditRevision
from audit.money import axis_usd, usd

VIEW_REVISIONS = "audit.view_auditrevision"
VIEW_CONFIG = "audit.view_configrevision"


def auditor_view(permission: str) -> Callable[[Callable[..., HttpResponse]], Callable[..., HttpResponse]]:
    """GET only, logged in (else the admin login page), and ``permission`` (else 403)."""

    def decorate(view: Callable[..., HttpResponse]) -> Callable[..., HttpResponse]:
        guarded = permission_required(permission, raise_exception=True)(view)
        return require_GET(login_required(guarded, login_url="admin:login"))

    return decorate


def _page(request: HttpRequest, template: str, title: str, **context: Any) -> HttpResponse:
    nav = {"audit/config_history.html": "config", "audit/tuning.html": "tuning", "audit/spend.html": "spend"}.get(
        template, "history"
    )
    return render(request, template, {**admin.site.each_context(request), "title": title, "nav": nav, **context})


def _query(**params: Any) -> str:
    return urlencode({k: v for k, v in params.items() if v not in (None, "")})


@auditor_view(VIEW_REVISIONS)
def history(request: HttpRequest) -> HttpResponse:
    filters, errors = filters_from_query(request.GET)
    try:
        size = int(request.GET.get("size", selectors.DEFAULT_PAGE_SIZE))
    except ValueError:
        size = selectors.DEFAULT_PAGE_SIZE
    cursor = request.GET.get("cursor") or None
    if cursor and selectors.decode_cursor(cursor) is None:
        errors.append("cursor: not a valid page cursor; showing the first page")
        cursor = None
    page = selectors.history_page(filters, cursor=cursor, size=size)
    query = filters.as_query()
    return _page(
        request,
        "audit/history.html",
        "Request history",
        rows=page.rows,
        errors=errors,
        filters=filters,
        form=request.GET,
        next_url=f"?{_query(**query, size=size, cursor=page.next_cursor)}" if page.next_cursor else None,
        first_url=f"?{_query(**query, size=size)}" if cursor else None,
        export_query=_query(**query),
    )


def _signals_total(signals: list[dict[str, Any]]) -> float:
    return sum(float(s.get("points") or 0) for s in signals)


@auditor_view(VIEW_REVISIONS)
def revision(request: HttpRequest, request_id: str) -> HttpResponse:
    found = selectors.revision_detail(request_id)
    if found is None:
        raise Http404("No audit revision with this request id.")
    rev, attempts, config = found
    timeline = charts.attempt_timeline(
        [(f"#{a.seq} {a.target}", a.latency_ms, _outcome(a.action, a.status)) for a in attempts]
    ) if attempts else None
    winner = rev.winner or rev.target
    return _page(
        request,
        "audit/revision.html",
        f"Request {rev.request_id}",
        rev=rev,
        attempts=attempts,
        config=config,
        timeline=timeline,
        signals_total=_signals_total(rev.signals or []),
        threshold=selectors.threshold_in_force(version=rev.config_version, at=rev.created_at)
        or settings.PRO_SMART_ROUTING_THRESHOLD,
        winner=winner,
        attempts_cost=sum(a.cost_usd or 0 for a in attempts),
        billed=rev.billed_cost_usd is not None or rev.billed_input_tokens is not None,
        limit=decisions.limit_refusal(rev),
        policy=decisions.policy_view(rev),
        draw=decisions.winner_draw(rev, winner),
        skipped=decisions.skipped(rev),
        capability=decisions.capability_detail(rev),
        category_rule=decisions.CATEGORY_RULES.get(rev.category_rule, ""),
        team_url=f"{reverse('audit:history')}?{_query(team=rev.team)}" if rev.team else "",
    )


def _outcome(action: str, status: int | None) -> str:
    if action in ("accepted", "returned_to_client") and status is not None and 200 <= status < 300:
        return "ok"
    if action in ("retry_same", "fallback"):
        return "retried"
    return "failed" if action == "gave_up" or (status or 0) >= 400 else "other"


@auditor_view(VIEW_REVISIONS)
def session(request: HttpRequest, session_hash: str) -> HttpResponse:
    revisions = selectors.session_revisions(session_hash)
    if not revisions:
        raise Http404("No requests recorded for this session.")
    return _page(
        request,
        "audit/session.html",
        f"Session {session_hash[:16]}",
        session_hash=session_hash,
        revisions=revisions,
        pin_changes=selectors.pin_history(revisions),
        truncated=len(revisions) >= 1000,
        total_cost=sum(r.cost_usd or 0 for r in revisions),
    )


@auditor_view(VIEW_CONFIG)
def config_history(request: HttpRequest) -> HttpResponse:
    before = request.GET.get("before", "")
    before_version = int(before) if before.isdigit() else None
    revisions = selectors.config_revisions(before_version=before_version, limit=20)
    more = bool(revisions) and selectors.config_revisions(before_version=revisions[-1].version, limit=1)
    return _page(
        request,
        "audit/config_history.html",
        "Configuration history",
        revisions=revisions,
        next_url=f"?before={revisions[-1].version}" if more else None,
        can_view_requests=request.user.has_perm(VIEW_REVISIONS),
    )


def _money(value: float) -> str:
    return usd(value)


@auditor_view(VIEW_REVISIONS)
def tuning_page(request: HttpRequest) -> HttpResponse:
    now = timezone.now()
    until = parse_instant(request.GET.get("until", "")) or now
    since = parse_instant(request.GET.get("since", "")) or until - dt.timedelta(days=7)
    alias = (request.GET.get("alias") or "").strip()[:200]
    qs = AuditRevision.objects.filter(created_at__gte=since, created_at__lt=until)
    if alias:
        qs = qs.filter(tier_alias=alias)
    raw_threshold = request.GET.get("threshold", "")
    recorded = selectors.threshold_in_force(at=until)
    current = int(raw_threshold) if raw_threshold.isdigit() else (recorded or settings.PRO_SMART_ROUTING_THRESHOLD)

    groups = tuning.score_groups(qs)
    scores, counts = tuning.histogram(groups)
    outcomes = tuning.simulate(groups, tuning.threshold_range(groups, current), current)
    histogram_svg = charts.stacked_bars(
        "Score histogram",
        [str(s) for s in scores],
        [charts.Series("easy", counts["easy"]), charts.Series("hard", counts["hard"])],
        marker_at=float(current) if current <= len(scores) else float(len(scores)),
        marker_label=f"threshold {current}",
        fmt=lambda v: f"{v:,.0f}",
    )
    hourly = until - since <= dt.timedelta(days=2)
    buckets = tuning.over_time(qs, hourly=hourly)
    labels = [b.start.strftime("%H:%M" if hourly else "%m-%d") for b in buckets]
    split_svg = charts.stacked_bars(
        "Tier split",
        labels,
        [charts.Series("easy", [b.easy for b in buckets]), charts.Series("hard", [b.hard for b in buckets]),
         charts.Series("no tier", [b.total - b.easy - b.hard for b in buckets])],
        fmt=lambda v: f"{v:,.0f}",
    )
    fallback_svg = charts.lines(
        "Fallback rate",
        labels,
        [charts.Series("requests that fell back", [b.fallback_rate for b in buckets])],
        fmt=lambda v: f"{v:.0%}",
    )
    cost_series = [charts.Series("USD per accepted answer", [b.cost_per_accepted for b in buckets])]
    cost_top = charts.line_top(cost_series)
    cost_svg = charts.lines("Cost per accepted answer", labels, cost_series, fmt=axis_usd(cost_top), y_max=cost_top)
    per_token = tuning.cost_per_token(groups)
    return _page(
        request,
        "audit/tuning.html",
        "Tuning the smart-routing threshold",
        since=since,
        until=until,
        alias=alias,
        current=current,
        recorded=recorded,
        outcomes=outcomes,
        outcome_rows=[(o, _money(o.cost_usd)) for o in outcomes],
        per_token=per_token,
        total=sum(g.count for g in groups),
        histogram_svg=histogram_svg,
        split_svg=split_svg,
        fallback_svg=fallback_svg,
        cost_svg=cost_svg,
        has_traffic=bool(buckets),
    )


_PERIOD_LABELS = {"day": "%m-%d", "week": "%m-%d", "month": "%Y-%m"}
_SPEND_PARAMS = ("period", "group", "from", "to", "key", "team", "top")


def _spend_labels(groups: list[spend.Group]) -> dict[spend.Group, str]:
    """Each group's label; a key name shared by two key ids (a key deleted and made again) gets its id."""
    seen: dict[str, int] = {}
    for group in groups:
        seen[group.label] = seen.get(group.label, 0) + 1
    return {g: f"{g.label} (#{g.key_id})" if seen[g.label] > 1 and g.key_id is not None else g.label for g in groups}


def _history_url(query: spend.SpendQuery, since: dt.datetime, until: dt.datetime, **filters: str) -> str:
    base = {"key": query.key, "team": query.team, **filters}
    return f"{reverse('audit:history')}?{_query(since=since.isoformat(), until=until.isoformat(), **base)}"


@auditor_view(VIEW_REVISIONS)
def spend_page(request: HttpRequest) -> HttpResponse:
    query, errors = spend_query_from_query(request.GET, now=timezone.now())
    report = spend.spend_report(query)
    has_spend = report.totals.cost_usd > 0
    given = {name: request.GET.get(name, "").strip() for name in _SPEND_PARAMS}
    labels = _spend_labels([row.group for row in report.groups])
    periods = report.periods
    series = [
        charts.Series(labels[group], [p.by_slot.get(i, 0.0) for p in periods], css=f"spend-{i}")
        for i, group in enumerate(report.top)
    ]
    if any(p.by_slot.get(spend.OTHER) for p in periods):
        series.append(charts.Series("other", [p.by_slot.get(spend.OTHER, 0.0) for p in periods], css="spend-other"))
    top = charts.bar_top(series)
    chart = charts.stacked_bars(
        f"Spend per {query.period} by {query.group_by}",
        [p.start.strftime(_PERIOD_LABELS[query.period]) for p in periods],
        series,
        fmt=axis_usd(top),
        legend=False,
        y_max=top,
    )
    effective = {
        "period": query.period, "group": query.group_by, "key": query.key, "team": query.team, "top": query.top,
        "from": query.start.date().isoformat(), "to": (query.end - dt.timedelta(days=1)).date().isoformat(),
    }
    return _page(
        request,
        "audit/spend.html",
        "Spend",
        report=report,
        query=query,
        errors=errors,
        form=effective,
        max_top=MAX_TOP,
        # Switching the period or the grouping keeps what was asked for, not the range shown for another period.
        period_links=[(p, p == query.period, f"?{_query(**{**given, 'period': p})}") for p in spend.PERIODS],
        group_links=[(g, g == query.group_by, f"?{_query(**{**given, 'group': g})}") for g in spend.GROUPINGS],
        chart=chart,
        legend=[(s.css, s.name) for s in series],
        has_spend=has_spend,
        total_money=_money(report.totals.cost_usd),
        group_rows=[
            (row, labels[row.group], _money(row.totals.cost_usd), f"{row.share:.1%}" if has_spend else "",
             _history_url(query, query.start, query.end, **row.group.history_filter()))
            for row in report.groups
        ],
        more_money=_money(report.more_groups.cost_usd) if report.more_groups else "",
        period_rows=[
            (row, _money(row.totals.cost_usd), _history_url(query, max(row.start, query.start), row.end))
            for row in reversed(periods)
            if row.totals.requests  # the chart shows the quiet periods; the table lists the busy ones
        ],
        history_url=_history_url(query, query.start, query.end),
        csv_query=_query(**effective),
    )


@auditor_view(VIEW_REVISIONS)
def spend_csv(request: HttpRequest) -> StreamingHttpResponse:
    query, _ = spend_query_from_query(request.GET, now=timezone.now())
    response = StreamingHttpResponse(exports.spend_csv_lines(query), content_type="text/csv; charset=utf-8")
    response["Content-Disposition"] = f'attachment; filename="spend-{query.period}-{query.group_by}-' \
        f'{query.start:%Y%m%d}-{query.end - dt.timedelta(days=1):%Y%m%d}.csv"'
    return response


def _export_name(extension: str) -> str:
    return f"audit-{timezone.now():%Y%m%d-%H%M%S}.{extension}"


@auditor_view(VIEW_REVISIONS)
def export_csv(request: HttpRequest) -> StreamingHttpResponse:
    filters, _ = filters_from_query(request.GET)
    response = StreamingHttpResponse(exports.csv_lines(filters), content_type="text/csv; charset=utf-8")
    response["Content-Disposition"] = f'attachment; filename="{_export_name("csv")}"'
    return response


@auditor_view(VIEW_REVISIONS)
def export_jsonl(request: HttpRequest) -> StreamingHttpResponse:
    filters, _ = filters_from_query(request.GET)
    response = StreamingHttpResponse(exports.jsonl_lines(filters), content_type="application/x-ndjson")
    response["Content-Disposition"] = f'attachment; filename="{_export_name("jsonl")}"'
    return response

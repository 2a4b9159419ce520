"""The auditor pages: history, one request, one session, config history, tuning, exports.

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
from django.utils import timezone
from django.views.decorators.http import require_GET

from audit import charts, exports, selectors, tuning
from audit.filters import filters_from_query, parse_instant
from audit.models import AuditRevision

VIEW_REVISIONS = "audit.view_auditrevision"
VIEW_CONFIG = "audit.view_configrevision"


def auditor_view(permission: str) -> Callable[[Callable[..., HttpResponse]], Callable[..., HttpResponse]]:
    """GET only, logged in (else the admin login page), and ``permission`` (else 403)."""

    def decorate(view: Callable[..., HttpResponse]) -> Callable[..., HttpResponse]:
        guarded = permission_required(permission, raise_exception=True)(view)
        return require_GET(login_required(guarded, login_url="admin:login"))

    return decorate


def _page(request: HttpRequest, template: str, title: str, **context: Any) -> HttpResponse:
    nav = {"audit/config_history.html": "config", "audit/tuning.html": "tuning"}.get(template, "history")
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
        winner=rev.winner or rev.target,
        attempts_cost=sum(a.cost_usd or 0 for a in attempts),
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
    return f"${value:,.4f}" if value < 100 else f"${value:,.0f}"


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
    cost_svg = charts.lines(
        "Cost per accepted answer",
        labels,
        [charts.Series("USD per accepted answer", [b.cost_per_accepted for b in buckets])],
        fmt=lambda v: f"${v:.4f}",
    )
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

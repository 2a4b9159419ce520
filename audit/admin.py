"""Read-only admin for the audit tables.

Audit rows are evidence: nobody adds, changes or deletes them in the admin, superusers included (retention
is the only deletion path: ``audit.tasks.purge_old_revisions`` / ``manage.py purge_audit``). Auditors (view
permission) browse them here and on the richer auditor pages (/audit/). The change lists run ``COUNT(*)`` only
while the table is small (below EXACT_COUNT_BELOW rows by the planner's estimate); past that the paginator uses
PostgreSQL's row estimate. Money is printed rounded (audit.money), latencies in whole tenths of a millisecond.
"""

from __future__ import annotations

from typing import Any

from django.contrib import admin
from django.core.paginator import Paginator
from django.db import connections
from django.db.models import Model, QuerySet
from django.http import HttpRequest
from django.urls import reverse
from django.utils.functional import cached_property
from django.utils.html import format_html

from audit.models import (
    AttemptRecord,
    AuditRevision,
    BudgetAlert,
    ConfigRevision,
    RevisionRollup,
    UndeliverableEvent,
)
from audit.money import usd

# Below this many rows (by the estimate) a list counts its rows exactly: COUNT(*) of a small table is cheap, and an
# estimate there is visibly wrong ("1000 audit revisions" and 20 page links for 49 rows).
EXACT_COUNT_BELOW = 20_000


class EstimatedCountPaginator(Paginator):
    """A paginator that counts exactly while the table is small and uses the planner's row estimate past that.

    On PostgreSQL the estimate comes from ``pg_class.reltuples`` (kept fresh by autovacuum); elsewhere, or
    before the first ANALYZE, the highest id stands in. On a large table it may overshoot a filtered list: a
    page past the end is simply empty.
    """

    @cached_property
    def count(self) -> int:
        qs = self.object_list
        if not isinstance(qs, QuerySet):
            return len(qs)
        estimate = _table_estimate(qs)
        if estimate < EXACT_COUNT_BELOW:
            return int(qs.count())
        return estimate


def _table_estimate(qs: QuerySet[Any]) -> int:
    model = qs.model
    connection = connections[qs.db]
    if connection.vendor == "postgresql":
        with connection.cursor() as cursor:
            cursor.execute("SELECT reltuples::bigint FROM pg_class WHERE oid = %s::regclass", [model._meta.db_table])
            row = cursor.fetchone()
        if row and row[0] and row[0] > 0:
            return int(row[0])
    highest = model._default_manager.using(qs.db).order_by("-pk").values_list("pk", flat=True).first()
    return int(highest or 0)


class ReadOnlyAdmin(admin.ModelAdmin):
    paginator = EstimatedCountPaginator
    show_full_result_count = False
    list_per_page = 50

    def has_add_permission(self, request: HttpRequest, obj: Model | None = None) -> bool:
        return False

    def has_change_permission(self, request: HttpRequest, obj: Model | None = None) -> bool:
        return False

    def has_delete_permission(self, request: HttpRequest, obj: Model | None = None) -> bool:
        return False


def _cost(obj: AuditRevision | AttemptRecord) -> str:
    return usd(obj.cost_usd)


def _latency(obj: AuditRevision | AttemptRecord) -> str:
    return f"{obj.latency_ms:,.1f} ms"


class AttemptInline(admin.TabularInline):
    model = AttemptRecord
    extra = 0
    can_delete = False
    fields = ("seq", "target", "status", "error_class", "reason", "action", "validation", "latency", "cost")
    readonly_fields = fields
    ordering = ("seq",)

    def has_add_permission(self, request: HttpRequest, obj: Model | None = None) -> bool:
        return False

    def has_change_permission(self, request: HttpRequest, obj: Model | None = None) -> bool:
        return False

    @admin.display(description="latency", ordering="latency_ms")
    def latency(self, obj: AttemptRecord) -> str:
        return _latency(obj)

    @admin.display(description="cost", ordering="cost_usd")
    def cost(self, obj: AttemptRecord) -> str:
        return _cost(obj)


class MoneyColumns:
    """The cost and latency columns of a list, rounded."""

    @admin.display(description="latency", ordering="latency_ms")
    def latency(self, obj: AuditRevision | AttemptRecord) -> str:
        return _latency(obj)

    @admin.display(description="cost", ordering="cost_usd")
    def cost(self, obj: AuditRevision | AttemptRecord) -> str:
        return _cost(obj)


@admin.register(AuditRevision)
class AuditRevisionAdmin(MoneyColumns, ReadOnlyAdmin):
    list_display = (
        "created_at", "request_id", "key_name", "team", "requested_model", "tier", "target", "status", "error_class",
        "latency", "cost", "auditor_page",
    )
    search_fields = ("=request_id", "=operation_id", "=session_hash")
    ordering = ("-created_at", "-id")
    inlines = (AttemptInline,)
    exclude = ("prompt_text", "output_text", "cost_usd", "billed_cost_usd")
    readonly_fields = ("cost", "billed_cost")

    @admin.display(description="billed cost")
    def billed_cost(self, obj: AuditRevision) -> str:
        return usd(obj.billed_cost_usd)

    @admin.display(description="explained")
    def auditor_page(self, obj: AuditRevision) -> str:
        return format_html('<a href="{}">open</a>', reverse("audit:revision", args=[obj.request_id]))


@admin.register(AttemptRecord)
class AttemptRecordAdmin(MoneyColumns, ReadOnlyAdmin):
    list_display = ("revision", "seq", "target", "status", "error_class", "action", "latency", "cost")
    list_select_related = ("revision",)
    search_fields = ("=attempt_id", "=revision__request_id")
    ordering = ("-id",)


@admin.register(ConfigRevision)
class ConfigRevisionAdmin(ReadOnlyAdmin):
    list_display = ("version", "created_at", "author", "source", "summary")
    ordering = ("-version",)


@admin.register(UndeliverableEvent)
class UndeliverableEventAdmin(ReadOnlyAdmin):
    list_display = ("created_at", "request_id", "error")
    ordering = ("-created_at",)


@admin.register(RevisionRollup)
class RevisionRollupAdmin(MoneyColumns, ReadOnlyAdmin):
    list_display = ("bucket", "span", "key_name", "team", "model", "tier", "status", "requests", "cost")
    list_filter = ("span",)
    ordering = ("-bucket",)


@admin.register(BudgetAlert)
class BudgetAlertAdmin(ReadOnlyAdmin):
    list_display = ("fired_at", "scope_kind", "scope_name", "team", "threshold_shown", "spend", "period", "delivery",
                    "attempts", "webhook", "last_error")
    list_filter = ("delivery", "scope_kind", "threshold")
    search_fields = ("=scope_name", "=team", "=alert_id")
    ordering = ("-fired_at", "-id")

    @admin.display(description="threshold", ordering="threshold")
    def threshold_shown(self, obj: BudgetAlert) -> str:
        return f"{obj.threshold}%"

    @admin.display(description="spend of budget")
    def spend(self, obj: BudgetAlert) -> str:
        return f"{usd(float(obj.spend_usd))} of {usd(float(obj.budget_usd))}"

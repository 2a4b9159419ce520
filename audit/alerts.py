"""Budget alerts in the audit trail: recording one (once per scope, period and threshold), its delivery, the latest.

``budget_alert_record`` is called before an alert is posted anywhere: the first alert for a scope, period and
threshold creates the row and owns it; a second one (another process that counted on its own, a restart whose
seeded spend lagged behind) finds the row taken and is dropped, so a threshold is posted once. The document is
the alert's plain JSON (``routing.core.budget_alerts.alert_document``).
"""

from __future__ import annotations

import datetime as dt
import uuid
from collections.abc import Mapping
from decimal import Decimal
from typing import Any

from django.db.models import F
from django.utils import timezone

from audit.models import BudgetAlert


def _when(text: str) -> dt.datetime:
    return dt.datetime.fromisoformat(text.replace("Z", "+00:00"))


def budget_alert_record(*, document: Mapping[str, Any], scope_ident: str, webhook: str) -> tuple[BudgetAlert, bool]:
    """The row of the alert's scope, period and threshold, and whether this alert owns it (created it now, or
    earlier: a retry of the same alert). ``webhook`` is the receiver's origin, or empty when none is configured."""
    scope = document["scope"]
    alert_id = uuid.UUID(document["id"])
    row, _ = BudgetAlert.objects.get_or_create(
        scope_ident=scope_ident, period=document["period"], threshold=document["threshold_percent"],
        defaults={
            "alert_id": alert_id,
            "fired_at": _when(document["created_at"]),
            "scope_kind": scope["kind"],
            "scope_name": scope["name"],
            "team": scope.get("team") or "",
            "budget_period": document["budget_period"],
            "budget_usd": Decimal(str(document["budget_usd"])),
            "spend_usd": Decimal(str(document["spend_usd"])),
            "webhook": webhook,
            "delivery": BudgetAlert.PENDING if webhook else BudgetAlert.NO_WEBHOOK,
        },
    )
    return row, row.alert_id == alert_id


def budget_alert_attempted(*, alert_id: str, status: int | None, error: str, final: bool) -> None:
    """Count one delivery attempt: delivered on a 2xx; otherwise failed for good when ``final``, else pending."""
    delivered = status is not None and 200 <= status < 300
    state = BudgetAlert.DELIVERED if delivered else BudgetAlert.FAILED if final else BudgetAlert.PENDING
    BudgetAlert.objects.filter(alert_id=uuid.UUID(alert_id)).update(
        attempts=F("attempts") + 1, last_status=status, last_error="" if delivered else error[:300], delivery=state,
        delivered_at=timezone.now() if delivered else None)


def budget_alert_refused(*, alert_id: str, error: str) -> None:
    """The alert cannot be posted at all (no secret to sign it with): failed, with why, and no attempt made."""
    BudgetAlert.objects.filter(alert_id=uuid.UUID(alert_id)).update(delivery=BudgetAlert.FAILED, last_error=error[:300])


def recent_budget_alerts(limit: int = 10) -> list[BudgetAlert]:
    """The latest alerts, newest first (the dashboard's list; an index range scan on ``fired_at``)."""
    return list(BudgetAlert.objects.order_by("-fired_at", "-id")[:limit])

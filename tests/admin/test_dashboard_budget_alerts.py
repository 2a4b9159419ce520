"""The admin's dashboard lists the recent budget alerts: whose, which threshold, the spend against the budget, and
how delivery went (the receiver's origin only, never its path); an empty list says what would appear there."""

from __future__ import annotations

import datetime as dt
import uuid
from decimal import Decimal

import pytest
from django.test import Client

from audit.models import BudgetAlert

pytestmark = pytest.mark.django_db



def alert(name: str, threshold: int, **fields: object) -> BudgetAlert:
    return BudgetAlert.objects.create(
        alert_id=uuid.uuid4(), fired_at=dt.datetime(2026, 12, 2, 8, threshold // 10, tzinfo=dt.UTC), scope_kind="key",
        scope_ident=f"key:{name}", scope_name=name, period="day:2026-12-02", budget_period="day", threshold=threshold,
        budget_usd=Decimal("12.5"), spend_usd=Decimal("10.01"), **fields)


def test_the_dashboard_lists_the_latest_alerts_and_their_delivery(admin_client: Client) -> None:
    alert("ci-bot", 50, webhook="https://hooks.example.com", delivery=BudgetAlert.DELIVERED, attempts=2)
    alert("ci-bot", 80, webhook="https://hooks.example.com", delivery=BudgetAlert.FAILED, attempts=9,
          last_error="https://hooks.example.com answered 503")
    alert("nightly", 100, delivery=BudgetAlert.NO_WEBHOOK)
    page = admin_client.get("/admin/").content.decode()
    section = page[page.index('id="dashboard-budget-alerts"'):]
    section = section[:section.index("</table>")]
    rows = section.split("<tr>")[2:]
    assert ["nightly" in rows[0], "80%" in rows[1], "50%" in rows[2]] == [True, True, True]  # newest first
    assert "$10.01 of $12.50" in rows[0]
    assert "delivered" in rows[2]
    assert "to https://hooks.example.com after 2 attempts" in rows[2]
    assert "failed" in rows[1]
    assert "9 attempts, https://hooks.example.com answered 503" in rows[1]
    assert "no webhook" in rows[0]
    assert "/audit/" in rows[2]
    assert "key=ci-bot" in rows[2]


def test_an_empty_list_says_which_thresholds_would_appear(admin_client: Client) -> None:
    page = admin_client.get("/admin/").content.decode()
    assert "No budget alert yet: a key or team whose spend crosses\n      50%, 80%, 100% of its budget" in page


def test_the_audit_admin_lists_every_alert_read_only(admin_client: Client) -> None:
    alert("ci-bot", 50, webhook="https://hooks.example.com", delivery=BudgetAlert.DELIVERED, attempts=1)
    page = admin_client.get("/admin/audit/budgetalert/").content.decode()
    assert "ci-bot" in page
    assert "$10.01 of $12.50" in page
    assert admin_client.get("/admin/audit/budgetalert/add/").status_code == 403

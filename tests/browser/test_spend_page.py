"""The spend page in a real browser: an auditor switches the period, filters by team, and sees the chart and totals.

The spend is recorded through the audit's own ingestion (``revisions_ingest`` in the gateway's database), so
the team names and costs are known whatever else the other browser tests sent through the gateway.
"""

from __future__ import annotations

import re
import time

import pytest
from playwright.sync_api import expect

from tests.browser.conftest import AUDITOR, Site, WatchedPage
from tests.browser.test_admin_and_audit_pages import assert_styled, log_in
from tests.e2e.conftest import manage

pytestmark = [pytest.mark.services, pytest.mark.slow]

TEAM = "browser-platform"


def record_spend(site: Site) -> None:
    now = time.time()
    events = [
        {"request_id": f"spend-browser-{i}", "created_at": now - days * 86400, "key_id": key_id,
         "key_name": key_name, "team": team, "status": 200, "validation": "accepted", "cost_usd": cost,
         "usage": {"input_tokens": 1000, "output_tokens": 100}, "attempts": []}
        for i, (days, key_id, key_name, team, cost) in enumerate([
            (0, 9001, "browser-ci", TEAM, 1.5),
            (1, 9002, "browser-web", TEAM, 2.25),
            (8, 9002, "browser-web", TEAM, 0.25),
            (0, 9003, "browser-notebook", "browser-research", 4.0),
        ])
    ]
    code = f"from audit.services import revisions_ingest\nrevisions_ingest(events={events!r})"
    manage(site.database_url, "shell", "-c", code)


def test_an_auditor_switches_the_period_and_filters_by_team(site: Site, watched: WatchedPage) -> None:
    record_spend(site)
    page = watched.page
    log_in(page, site, AUDITOR, "/audit/")
    page.click("nav.audit-nav a:text-is('Spend')")
    page.wait_for_url(f"{site.base_url}/audit/spend/")
    assert_styled(page)
    expect(page.locator("h2").first).to_have_text("Spend per day by key")
    chart = page.locator("svg.chart")
    expect(chart).to_be_visible()
    assert chart.bounding_box()["height"] > 100  # type: ignore[index]
    assert page.locator("svg.chart rect.spend-0").count() >= 1
    expect(page.locator("ul.chart-legend")).to_contain_text("browser-notebook")

    page.click(".audit-switch a[data-period='week']")
    page.wait_for_url(re.compile(r".*/audit/spend/\?.*period=week"))
    expect(page.locator("h2").first).to_have_text("Spend per week by key")
    expect(page.locator(".audit-switch a[data-period='week']")).to_have_class("current")

    page.fill("input[name=team]", TEAM)
    page.click(".audit-filters input[type=submit]")
    page.wait_for_url(re.compile(rf".*/audit/spend/\?.*team={TEAM}"))
    expect(page.locator("[data-total='spend']")).to_have_text("$4.00")
    expect(page.locator("[data-total='requests']")).to_have_text("3")
    expect(page.locator("[data-total='input']")).to_have_text("3000")
    expect(page.locator("[data-total='output']")).to_have_text("300")
    # At least two weeks with spend: requests today or yesterday, and one eight days ago.
    bars = page.locator("svg.chart rect[class^='spend-']")
    assert bars.count() >= 2
    assert "browser-notebook" not in page.inner_text("#spend-by-group")
    expect(page.locator("#spend-by-group")).to_contain_text("browser-web")

    page.click(".audit-switch a[data-group='team']")
    page.wait_for_url(re.compile(r".*/audit/spend/\?.*group=team"))
    expect(page.locator("h2").first).to_have_text("Spend per week by team")
    page.click(f"#spend-by-group a:text-is('{TEAM}')")
    page.wait_for_url(re.compile(rf".*/audit/\?.*team={TEAM}"))
    expect(page.locator("table.audit tbody tr")).to_have_count(3)

    assert watched.problems == []

"""The admin's dashboard and the fixed lists in a real browser at 1400 px: what an operator lands on and reads.

The dashboard's traffic comes from requests sent through the gateway (the audit rollup is written as the
revisions are stored); its target table from the serving process. Lists count their rows exactly, print money
rounded, and no page scrolls sideways: a wide table scrolls inside its own box.
"""

from __future__ import annotations

import datetime as dt
import os
import re
from collections.abc import Iterator

import httpx2
import psycopg
import pytest
from playwright.sync_api import Browser, Page

from tests.browser.conftest import ADMIN, AUDITOR, Site, WatchedPage
from tests.browser.test_admin_and_audit_pages import assert_styled, log_in, wait_for_revision

pytestmark = [pytest.mark.services, pytest.mark.slow]

SHOTS = os.environ.get("GOMODEL_BROWSER_SHOTS", "")  # a folder: each page's screenshot is saved there


@pytest.fixture
def wide(browser: Browser) -> Iterator[WatchedPage]:
    """A page 1400 px wide, as an operator's laptop shows the admin."""
    context = browser.new_context(viewport={"width": 1400, "height": 900}, color_scheme="light")
    try:
        yield WatchedPage(context.new_page())
    finally:
        context.close()


@pytest.fixture(scope="module")
def traffic(site: Site) -> list[str]:
    """Requests through the gateway, stored by the audit: two answered, one refused for an unknown model."""
    ids = []
    for model in ("normal", "pool", "no-such-model"):
        body = {"model": model, "messages": [{"role": "user", "content": f"Say hello to the {model} dashboard."}]}
        response = httpx2.post(f"{site.base_url}/v1/chat/completions", json=body, timeout=30)
        assert response.status_code in (200, 404), response.text
        ids.append(response.headers["x-request-id"])
    for request_id in ids:
        wait_for_revision(site, request_id)
    return ids


def shot(page: Page, name: str) -> None:
    if SHOTS:
        page.screenshot(path=os.path.join(SHOTS, f"{name}.png"), full_page=True)


def assert_no_sideways_scroll(page: Page) -> None:
    """The page fits the window: whatever is wider scrolls inside its box."""
    widths = page.evaluate("() => [document.documentElement.scrollWidth, document.documentElement.clientWidth]")
    assert widths[0] <= widths[1], f"the page is {widths[0]} px wide in a {widths[1]} px window"


def db_count(site: Site, table: str) -> int:
    with psycopg.connect(site.database_url.replace("postgres://", "postgresql://")) as conn:
        row = conn.execute(f"SELECT count(*) FROM {table}").fetchone()  # noqa: S608 - the test's own names
    assert row is not None
    return int(row[0])


def test_the_root_lands_on_the_admin_and_view_site_goes_to_the_auditor_pages(site: Site, wide: WatchedPage) -> None:
    response = httpx2.get(f"{site.base_url}/", timeout=10)
    assert response.status_code == 302
    assert response.headers["location"] == "/admin/"
    page = wide.page
    page.goto(f"{site.base_url}/")
    page.wait_for_url(re.compile(r".*/admin/login/\?next=/admin/$"))
    log_in(page, site, ADMIN, "/admin/")
    page.click("#user-tools a:text-is('View site')")
    page.wait_for_url(f"{site.base_url}/audit/")
    assert_styled(page)
    assert wide.problems == []


def test_the_admin_opens_on_a_dashboard_of_traffic_spend_and_target_health(
        site: Site, wide: WatchedPage, traffic: list[str]) -> None:
    page = wide.page
    log_in(page, site, ADMIN, "/admin/")
    assert_styled(page)
    assert page.inner_text("h1") == "Dashboard"
    summary = page.locator("#dashboard-summary tbody tr")
    assert summary.count() == 3
    stored = db_count(site, "audit_auditrevision")
    for row in range(3):
        cells = summary.nth(row).locator("td")
        assert int(cells.nth(0).inner_text()) == stored  # every request of this test run, within the hour
        assert re.fullmatch(r"\d+\.\d%", cells.nth(1).inner_text())  # the refused one is an error
        assert re.fullmatch(r"[\d.,]+ ms", cells.nth(3).inner_text())  # p50
        assert re.fullmatch(r"\$[\d.,]+|\$0", cells.nth(6).inner_text())
        assert cells.nth(7).inner_text() == "-"  # no cached name: no lookup to rate
    assert page.locator("#dashboard-summary thead th").nth(8).text_content() == "Cache hit rate"
    assert "No response cache is configured" in page.inner_text("#dashboard-cache")
    assert page.locator("#dashboard-traffic svg.chart").count() == 4
    assert "hard" in page.inner_text("#dashboard-tiers") or "easy" in page.inner_text("#dashboard-tiers")
    assert "no key" in page.inner_text("#dashboard-top-keys")  # the gateway runs open: requests without a key
    assert "runs open" in page.inner_text("#dashboard-open")
    targets = page.inner_text("#dashboard-target-table")
    assert "pool" in targets
    assert "healthy" in targets
    assert "peak-EWMA" in page.inner_text("#dashboard-targets")
    links = page.eval_on_selector_all("#dashboard-links a", "links => links.map(a => a.getAttribute('href'))")
    assert {"/audit/", "/audit/spend/", "/audit/tuning/", "/audit/config/", "/v1/openapi.json", "/health"} <= set(links)
    assert page.locator("#dashboard-apps .app-routing").count() == 1  # the app list follows
    assert_no_sideways_scroll(page)
    shot(page, "dashboard")

    page.click("#dashboard-window a:text-is('hour')")
    page.wait_for_url(f"{site.base_url}/admin/?window=hour")
    assert page.locator("#dashboard-traffic svg.chart").count() == 4
    assert page.locator("#dashboard-window a.current").inner_text() == "hour"
    assert wide.problems == []


def test_an_auditor_sees_the_dashboard_with_the_traffic(site: Site, wide: WatchedPage, traffic: list[str]) -> None:
    page = wide.page
    log_in(page, site, AUDITOR, "/admin/")
    assert page.locator("#dashboard-summary").count() == 1
    assert wide.problems == []


def test_the_audit_lists_count_their_rows_and_print_costs_rounded(
        site: Site, wide: WatchedPage, traffic: list[str]) -> None:
    page = wide.page
    log_in(page, site, ADMIN, "/admin/audit/auditrevision/")
    stored = db_count(site, "audit_auditrevision")
    assert re.search(rf"\b{stored} audit revisions?\b", page.inner_text("#changelist-form .paginator"))
    assert page.locator("#changelist-form .paginator a").count() == 0  # one page: no page links
    costs = page.eval_on_selector_all("#result_list td.field-cost", "cells => cells.map(c => c.innerText)")
    assert costs
    assert all(re.fullmatch(r"-|\$0|\$\d[\d,]*(\.\d{2,9})?", cost) for cost in costs), costs
    assert_no_sideways_scroll(page)

    page.goto(f"{site.base_url}/admin/audit/attemptrecord/")
    attempts = db_count(site, "audit_attemptrecord")
    assert re.search(rf"\b{attempts} attempt records?\b", page.inner_text("#changelist-form .paginator"))
    costs = page.eval_on_selector_all("#result_list td.field-cost", "cells => cells.map(c => c.innerText)")
    assert all(len(cost) <= 12 for cost in costs), costs

    page.goto(f"{site.base_url}/admin/audit/configrevision/")
    versions = db_count(site, "audit_configrevision")
    assert re.search(rf"\b{versions} config revisions?\b", page.inner_text("#changelist-form .paginator"))
    assert wide.problems == []


@pytest.mark.parametrize("path", ["/admin/routing/providermodel/", "/audit/", "/admin/routing/virtualmodel/"])
def test_wide_tables_scroll_inside_their_box_at_1400_px(
        site: Site, wide: WatchedPage, traffic: list[str], path: str) -> None:
    page = wide.page
    log_in(page, site, ADMIN, path)
    assert_styled(page)
    assert_no_sideways_scroll(page)
    if path == "/admin/routing/virtualmodel/":
        page.click("#result_list a:text-is('pool')")
        page.wait_for_url(re.compile(r".*/admin/routing/virtualmodel/\d+/change/$"))
        assert "peak-EWMA" in page.inner_text(".field-live_state")
        assert_no_sideways_scroll(page)
    shot(page, path.strip("/").replace("/", "-"))
    assert wide.problems == []


def test_empty_lists_say_what_to_do(site: Site, wide: WatchedPage) -> None:
    page = wide.page
    log_in(page, site, ADMIN, "/admin/routing/gatewaykey/")
    empty = page.inner_text("#gatewaykey-empty")
    assert "runs open" in empty
    assert "manage.py createkey NAME" in empty
    page.goto(f"{site.base_url}/admin/routing/routingsettings/")
    in_force = page.inner_text("#routingsettings-in-force")
    assert "smart_routing_threshold" in in_force
    assert "environment" in in_force
    assert_no_sideways_scroll(page)
    assert wide.problems == []


def test_the_dashboard_shows_the_cache_hit_rate_of_the_rollup(site: Site, wide: WatchedPage) -> None:
    """Cache lookups as the rollup holds them (a minute and an hour row of a cached name: 3 exact hits, 1 semantic,
    4 misses), read back as the traffic summary's hit rate; the rows are taken out again for the other pages."""
    now = dt.datetime.now(dt.UTC)
    columns = ["span", "bucket", "key_id", "key_name", "team", "model", "tier", "status", "requests", "cost_usd",
               "input_tokens", "output_tokens", "latency_ms_sum", "cache_hits", "cache_semantic_hits",
               "cache_misses", *(f"lat_{i:02d}" for i in range(16))]
    rows = [[span, now.replace(second=0, microsecond=0) if span == 60 else now.replace(minute=0, second=0,
             microsecond=0), -1, "", "", "cached-dashboard", "", 200, 8, 0.0, 0, 0, 80.0, 3, 1, 4, 8,
             *([0] * 15)] for span in (60, 3600)]
    url = site.database_url.replace("postgres://", "postgresql://")
    with psycopg.connect(url) as conn:
        conn.cursor().executemany(f"INSERT INTO audit_revisionrollup ({', '.join(columns)}) "  # noqa: S608
                                  f"VALUES ({', '.join(['%s'] * len(columns))})", rows)
    try:
        page = wide.page
        log_in(page, site, ADMIN, "/admin/")
        summary = page.locator("#dashboard-summary tbody tr")
        for row in range(3):  # hour (minute rows), day and week (hour rows); nothing else of this site is cached
            cell = summary.nth(row).locator("td").nth(7)
            assert cell.inner_text() == "50.0%\n3 exact, 1 semantic / 8"
            assert cell.get_attribute("title") == "3 exact and 1 semantic hits in 8 lookups"
        assert wide.problems == []
    finally:
        with psycopg.connect(url) as conn:
            conn.execute("DELETE FROM audit_revisionrollup WHERE model = 'cached-dashboard'")

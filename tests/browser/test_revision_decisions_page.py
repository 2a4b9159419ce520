"""The request page's decision sections in a real browser, in the light and the dark admin theme: a request
refused by its team's limit and one that walked a routing policy's fallback chain.

The revisions are recorded through the audit's own ingestion (``revisions_ingest`` in the gateway's database),
so what the page must show is known whatever else the other browser tests sent through the gateway.
"""

from __future__ import annotations

import re
import time
from collections.abc import Iterator

import pytest
from playwright.sync_api import Browser, expect

from tests.browser.conftest import AUDITOR, Site, WatchedPage
from tests.browser.test_admin_and_audit_pages import assert_styled, log_in
from tests.e2e.conftest import manage

pytestmark = [pytest.mark.services, pytest.mark.slow]

POLICY_STEP = {"from": "fast", "to": "cheap", "virtual_model": "browser-pool", "reason": "max_latency_ms"}


def record_decisions(site: Site) -> None:
    now = time.time()
    events = [
        {"request_id": "decisions-browser-limit", "created_at": now, "key_id": 9101, "key_name": "browser-ci",
         "team": "browser-research", "limit": "team:tpm", "requested_model": "normal", "status": 429,
         "error_class": "limit_exceeded", "validation": "not_run", "attempts": []},
        {"request_id": "decisions-browser-policy", "created_at": now, "key_id": 9101, "key_name": "browser-ci",
         "requested_model": "browser-pool", "status": 200, "validation": "accepted", "target": "sim/fast",
         "policy": "cheap", "policy_chain": "fast>cheap",
         "policy_decision": {"selected": "fast", "source": "header", "policy": "cheap", "strategy": "cost",
                             "steps": [POLICY_STEP], "applied_to": ["browser-pool"], "unmet": ""},
         "attempts": []},
    ]
    code = f"from audit.services import revisions_ingest\nrevisions_ingest(events={events!r})"
    manage(site.database_url, "shell", "-c", code)


@pytest.fixture(scope="module")
def recorded(site: Site) -> Site:
    record_decisions(site)
    return site


@pytest.fixture(params=["light", "dark"])
def themed(request: pytest.FixtureRequest, browser: Browser) -> Iterator[WatchedPage]:
    context = browser.new_context(viewport={"width": 1280, "height": 900}, color_scheme=request.param)
    try:
        yield WatchedPage(context.new_page())
    finally:
        context.close()


def luminance(css_color: str) -> float:
    """The relative luminance (0 black, 1 white) of an ``rgb(...)``/``rgba(...)`` colour."""
    red, green, blue = (int(v) / 255 for v in re.findall(r"[\d.]+", css_color)[:3])
    return 0.2126 * red + 0.7152 * green + 0.0722 * blue


def test_an_auditor_reads_the_limit_and_the_policy_sections_in_either_theme(recorded: Site,
                                                                            themed: WatchedPage) -> None:
    page = themed.page
    log_in(page, recorded, AUDITOR, "/audit/requests/decisions-browser-limit/")
    assert_styled(page)
    limit = page.locator("#limit")
    expect(limit).to_be_visible()
    expect(limit).to_contain_text("The team browser-research reached its limit of tokens per minute (team:tpm)")
    expect(page.locator("#policy")).to_have_count(0)

    page.goto(f"{recorded.base_url}/audit/requests/decisions-browser-policy/")
    assert_styled(page)
    policy = page.locator("#policy")
    expect(policy).to_be_visible()
    expect(policy).to_contain_text("Chain walked: fast>cheap")
    step = policy.locator("tbody tr").first
    expect(step).to_contain_text("browser-pool")
    expect(step).to_contain_text("max_latency_ms (none is within the latency bound)")
    expect(page.locator("#limit")).to_have_count(0)

    # Readable in the theme in force: the text stands out from the page behind it.
    text = luminance(policy.locator("p").first.evaluate("e => getComputedStyle(e).color"))
    behind = luminance(page.eval_on_selector("body", "e => getComputedStyle(e).backgroundColor"))
    assert abs(text - behind) > 0.5
    assert (behind < 0.5) is (page.evaluate("matchMedia('(prefers-color-scheme: dark)').matches"))

    assert themed.problems == []

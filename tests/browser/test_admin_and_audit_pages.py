"""The admin and the auditor pages in a real browser: styled, scripts running, no console error.

Each page is checked by what the browser computed, not by status codes alone: every stylesheet the page links
holds rules, the header has the admin's colour, the theme toggle shows one icon instead of three, and on the
virtual model's edit page the inline's "Add another" link exists (the admin's JavaScript draws it) and works.
"""

from __future__ import annotations

import gzip
import re
import time

import brotli
import httpx2
import psycopg
import pytest
from playwright.sync_api import Page

from tests.browser.conftest import ADMIN, AUDITOR, Site, WatchedPage

pytestmark = [pytest.mark.services, pytest.mark.slow]

UNSTYLED_BACKGROUND = "rgba(0, 0, 0, 0)"  # a browser's default for an element no stylesheet paints


def log_in(page: Page, site: Site, user: tuple[str, str], next_path: str) -> None:
    page.goto(f"{site.base_url}/admin/login/?next={next_path}")
    assert_styled(page)
    page.fill("#id_username", user[0])
    page.fill("#id_password", user[1])
    page.click("input[type=submit]")
    page.wait_for_url(f"{site.base_url}{next_path}")


def assert_styled(page: Page) -> None:
    """Every linked stylesheet loaded with rules, and the admin's own look is applied."""
    # A sheet that failed to load has no rules to read (Chromium throws instead of answering 0).
    sheets = page.eval_on_selector_all("link[rel=stylesheet]", """links => links.map(l => {
        try { return [l.href, l.sheet ? l.sheet.cssRules.length : 0]; } catch (e) { return [l.href, 0]; }
    })""")
    assert sheets, "the page links no stylesheet"
    assert [href for href, rules in sheets if rules == 0] == [], "stylesheets that did not load"
    header = page.eval_on_selector("#header", "e => getComputedStyle(e).backgroundColor")
    assert header != UNSTYLED_BACKGROUND
    body_font = page.eval_on_selector("body", "e => getComputedStyle(e).fontFamily")
    assert "Times" not in body_font  # the browser's default serif font: the admin's CSS did not apply


def assert_one_theme_icon(page: Page) -> None:
    """The theme toggle draws one icon; unstyled, all three are drawn side by side."""
    shown = page.eval_on_selector_all(
        ".theme-toggle svg", "icons => icons.filter(i => getComputedStyle(i).display !== 'none').length")
    assert shown == 1


def wait_for_revision(site: Site, request_id: str, timeout: float = 15.0) -> None:
    """Wait until the audit revision of ``request_id`` is stored (the publisher writes it asynchronously)."""
    deadline = time.monotonic() + timeout
    with psycopg.connect(site.database_url.replace("postgres://", "postgresql://")) as conn:
        while time.monotonic() < deadline:
            row = conn.execute("SELECT 1 FROM audit_auditrevision WHERE request_id = %s", (request_id,)).fetchone()
            if row is not None:
                return
            time.sleep(0.1)
    raise AssertionError(f"no audit revision for {request_id} after {timeout}s")


def test_it_styles_the_admin_and_runs_its_scripts_on_the_virtual_model_page(
        site: Site, watched: WatchedPage) -> None:
    page = watched.page
    log_in(page, site, ADMIN, "/admin/")
    assert_styled(page)
    assert_one_theme_icon(page)

    page.goto(f"{site.base_url}/admin/routing/virtualmodel/")
    assert_styled(page)
    page.click("#result_list a:text-is('pool')")
    page.wait_for_url(re.compile(r".*/admin/routing/virtualmodel/\d+/change/$"))
    assert_styled(page)
    assert page.input_value("#id_source") == "pool"
    rows = page.locator(".inline-related tr.form-row:not(.empty-form)")
    before = rows.count()
    page.click(".add-row a")  # drawn and handled by the admin's inlines.js
    assert rows.count() == before + 1

    assert watched.problems == []


def test_it_shows_a_requests_audit_page_styled_to_an_auditor(site: Site, watched: WatchedPage) -> None:
    body = {"model": "normal", "messages": [{"role": "user", "content": "Think step by step: why does it fail?"}]}
    response = httpx2.post(f"{site.base_url}/v1/chat/completions", json=body, timeout=30)
    assert response.status_code == 200, response.text
    request_id = response.headers["x-request-id"]
    wait_for_revision(site, request_id)

    page = watched.page
    log_in(page, site, AUDITOR, "/audit/")
    assert_styled(page)
    assert_one_theme_icon(page)
    page.click(f"a[href='/audit/requests/{request_id}/']")
    page.wait_for_url(f"{site.base_url}/audit/requests/{request_id}/")
    assert_styled(page)
    content = page.inner_text("#content")
    assert request_id in content
    assert response.headers["x-gomodel-target"] in content

    assert watched.problems == []


def test_it_serves_a_static_file_compressed_and_cacheable_forever(site: Site) -> None:
    login = httpx2.get(f"{site.base_url}/admin/login/", timeout=10)
    hashed = re.search(r'href="(/static/admin/css/base\.[0-9a-f]{12}\.css)"', login.text)
    assert hashed is not None, "the login page does not link a content-hashed stylesheet"
    url = f"{site.base_url}{hashed.group(1)}"
    plain = httpx2.get(url, headers={"accept-encoding": "identity"}, timeout=10)
    assert plain.status_code == 200
    assert "content-encoding" not in plain.headers
    assert plain.headers["content-type"].startswith("text/css")

    for encoding, decompress in (("br", brotli.decompress), ("gzip", gzip.decompress)):
        with httpx2.stream("GET", url, headers={"accept-encoding": encoding}, timeout=10) as response:
            raw = b"".join(response.iter_raw())
        assert response.status_code == 200
        assert response.headers["content-encoding"] == encoding
        assert response.headers["vary"] == "Accept-Encoding"
        cache_control = response.headers["cache-control"]
        max_age = int(re.search(r"max-age=(\d+)", cache_control).group(1))  # type: ignore[union-attr]
        assert max_age >= 365 * 24 * 3600
        assert "immutable" in cache_control
        assert len(raw) < len(plain.content)
        assert decompress(raw) == plain.content


def test_it_answers_404_for_a_static_file_that_does_not_exist(site: Site) -> None:
    response = httpx2.get(f"{site.base_url}/static/admin/css/missing.css", timeout=10)
    assert response.status_code == 404

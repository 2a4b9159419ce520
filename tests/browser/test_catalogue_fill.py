"""The price catalogue on the model form in a real browser: the upstream field offers the catalogued names of the
chosen provider's kind, typing one fills the empty prices, limits and capabilities (refilled as the name grows from
gpt-4o to gpt-4o-mini), the save dates the prices with the catalogue's day, and the list flags prices gone stale."""

from __future__ import annotations

import re

import psycopg
import pytest
from playwright.sync_api import Page

from routing.config.catalogue import catalogue
from tests.browser.conftest import ADMIN, Site, WatchedPage
from tests.browser.test_admin_and_audit_pages import assert_styled, log_in

pytestmark = [pytest.mark.services, pytest.mark.slow]

ADD = "/admin/routing/providermodel/add/"
LIST = "/admin/routing/providermodel/"


def value(page: Page, name: str) -> str:
    return page.input_value(f"#id_{name}")


def ticked(page: Page) -> list[str]:
    return page.eval_on_selector_all("input[name=capabilities]:checked", "boxes => boxes.map(b => b.value)")


def delete_model(page: Page, site: Site, name: str) -> None:
    """Delete through the admin, so the change is versioned like any other (the site is shared by the package)."""
    page.goto(f"{site.base_url}{LIST}?q={name}")
    page.click(f"#result_list a:text-is('{name}')")
    page.click("a.deletelink")
    page.wait_for_url(re.compile(r".*/delete/(\?.*)?$"))
    page.click("#content input[type=submit]")
    page.wait_for_url(re.compile(r".*/admin/routing/providermodel/(\?.*)?$"))
    assert page.locator(f"#result_list a:text-is('{name}')").count() == 0


def test_it_fills_a_new_model_from_the_catalogue_as_the_name_is_typed(site: Site, watched: WatchedPage) -> None:
    page = watched.page
    mini = catalogue().lookup("openai", "gpt-4o-mini")
    assert mini is not None
    log_in(page, site, ADMIN, ADD)
    assert_styled(page)
    page.select_option("#id_provider", label="oa")
    offered = page.eval_on_selector("#id_upstream-catalogue", "list => Array.from(list.options).map(o => o.value)")
    assert {"gpt-4o-mini", "gpt-5", "gpt-4.1"} <= set(offered)
    assert "claude-haiku-4-5" not in offered  # another kind's names are not offered

    page.locator("#id_upstream").press_sequentially("gpt-4o")
    assert value(page, "input_price") == "2.5"  # gpt-4o is catalogued too: filled on the way
    page.locator("#id_upstream").press_sequentially("-mini")
    assert (value(page, "input_price"), value(page, "output_price"), value(page, "cached_input_price")) == (
        "0.15", "0.6", "0.075")
    assert (value(page, "context_window"), value(page, "max_output_tokens")) == ("128000", "16384")
    assert ticked(page) == list(mini.capabilities)
    assert page.inner_text("#catalogue-note") == (
        f"Filled from the price catalogue: read {mini.as_of} from {mini.source}.")

    page.click("input[name=_save]")
    page.wait_for_url(re.compile(r".*/admin/routing/providermodel/$"))
    row = page.locator("#result_list tr", has=page.locator("a:text-is('oa/gpt-4o-mini')"))
    assert row.locator("td.field-prices_as_of_flag").inner_text() == mini.as_of.isoformat()
    assert watched.problems == []

    # Prices set before the catalogue's day that differ from it: flagged, and found by the list's filter.
    with psycopg.connect(site.database_url.replace("postgres://", "postgresql://")) as conn:
        conn.execute("UPDATE routing_providermodel SET output_price = 0.9, prices_as_of = %s WHERE name = %s",
                     (mini.as_of.replace(year=mini.as_of.year - 1), "oa/gpt-4o-mini"))
    page.goto(f"{site.base_url}{LIST}")
    cell = page.locator("#result_list tr", has=page.locator("a:text-is('oa/gpt-4o-mini')")).locator(
        "td.field-prices_as_of_flag")
    assert cell.inner_text().splitlines() == [mini.as_of.replace(year=mini.as_of.year - 1).isoformat(),
                                              "older than the catalogue", f"{mini.as_of}: $0.15 / $0.60"]
    assert cell.locator(".catalogue-stale").evaluate("e => getComputedStyle(e).color") != \
        cell.locator(".catalogue-figures").evaluate("e => getComputedStyle(e).color")  # the flag stands out
    page.click("#changelist-filter a:text-is('older than the catalogue')")
    page.wait_for_url(re.compile(r".*catalogue=stale"))
    assert page.locator("#result_list a:text-is('oa/gpt-4o-mini')").count() == 1
    assert page.locator("#result_list a:text-is('oa/oa-model')").count() == 0
    delete_model(page, site, "oa/gpt-4o-mini")
    assert watched.problems == []


def test_a_typed_price_is_kept_and_an_alias_fills_on_the_server_too(site: Site, watched: WatchedPage) -> None:
    page = watched.page
    haiku = catalogue().lookup("anthropic", "claude-haiku-4-5")
    assert haiku is not None
    log_in(page, site, ADMIN, ADD)
    page.select_option("#id_provider", label="an")
    page.fill("#id_input_price", "0.5")  # the operator's own price first: the catalogue leaves it alone
    page.fill("#id_upstream", "claude-haiku-4-5")
    assert (value(page, "input_price"), value(page, "output_price")) == ("0.5", "")
    assert page.locator("#catalogue-note").count() == 0
    page.fill("#id_input_price", "")  # cleared again: the save fills it on the server
    page.click("input[name=_save]")
    page.wait_for_url(re.compile(r".*/admin/routing/providermodel/$"))
    assert f"filled from the price catalogue: read {haiku.as_of} from {haiku.source}" in page.inner_text(
        "ul.messagelist")
    row = page.locator("#result_list tr", has=page.locator("a:text-is('an/claude-haiku-4-5')"))
    assert row.locator("td.field-input").inner_text() == "$1.00"
    delete_model(page, site, "an/claude-haiku-4-5")
    assert watched.problems == []

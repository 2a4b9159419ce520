"""The playground and the admin's pickers in a real browser: a chat streamed into the page through the gateway's
own /v1/chat/completions, the decision read back from the audit, a key's limits and model list applied to what
the page sends as that key, and a misspelt target refused with the nearest name."""

from __future__ import annotations

import re
import time
from collections.abc import Iterator

import pytest
from playwright.sync_api import Browser, Page

from tests.browser.conftest import ADMIN, Site, WatchedPage
from tests.browser.test_admin_and_audit_pages import assert_styled, log_in
from tests.browser.test_dashboard import assert_no_sideways_scroll, shot
from tests.e2e.conftest import manage

pytestmark = [pytest.mark.services, pytest.mark.slow]

KEY_NAME = "playground-limited"


@pytest.fixture
def wide(browser: Browser) -> Iterator[WatchedPage]:
    context = browser.new_context(viewport={"width": 1400, "height": 900}, color_scheme="light")
    try:
        yield WatchedPage(context.new_page())
    finally:
        context.close()


def open_playground(page: Page, site: Site) -> None:
    log_in(page, site, ADMIN, "/admin/")
    page.click("#dashboard-playground")
    page.wait_for_url(f"{site.base_url}/admin/playground/")
    assert_styled(page)
    page.wait_for_selector("#pg-form[data-ready=true]")


def send(page: Page, model: str, text: str) -> None:
    page.select_option("#pg-model", model)
    page.fill("#pg-message-0", text)
    page.click("#pg-send")


def wait_until_sent(page: Page) -> None:
    """The answer (or the refusal) is in and the page has read the decision from the audit."""
    page.wait_for_function("!document.getElementById('pg-send').disabled", timeout=30_000)


def decision(page: Page, field: str) -> str:
    return page.inner_text(f"#pg-decision tr[data-field={field}] td")


def test_it_streams_the_answer_into_the_page_and_shows_the_decision(site: Site, wide: WatchedPage) -> None:
    page = wide.page
    open_playground(page, site)
    names = page.eval_on_selector_all("#pg-model option", "options => options.map(o => o.value)")
    assert {"normal", "pool", "oa/oa-model", "oa/slow-stream"} <= set(names)

    # A slow stream (twelve chunks, 150 ms apart): part of the answer is on the page while it still streams.
    send(page, "oa/slow-stream", "Tell me a long story about a lighthouse.")
    page.wait_for_function("document.getElementById('pg-answer').textContent.length > 0 && "
                           "document.getElementById('pg-status').textContent === 'streaming...'", timeout=30_000)
    wait_until_sent(page)
    assert page.inner_text("#pg-status").startswith("done in ")
    assert len(page.inner_text("#pg-answer")) > 20
    assert decision(page, "target") == "oa/slow-stream"

    page.fill("#pg-system", "You are a careful mathematician.")
    send(page, "normal", "Prove that the square root of two is irrational, step by step, then analyse the proof.")
    wait_until_sent(page)
    assert page.inner_text("#pg-error") == ""
    assert page.inner_text("#pg-answer").strip()
    assert re.fullmatch(r"(easy|hard) \(score -?[\d.]+, normal to \S+\)", decision(page, "tier"))
    assert decision(page, "caller") == "playground:admin"
    assert decision(page, "status") == "200"
    assert decision(page, "target") in ("oa/oa-model", "oa/az-model", "az/az-model", "an/an-model", "ge/ge-model")
    assert re.fullmatch(r"\$[\d.,]+( \(billed .*\))?", decision(page, "cost"))
    outcomes = page.eval_on_selector_all("#pg-attempts tbody tr td:nth-child(4)",
                                         "cells => cells.map(c => c.innerText)")
    assert outcomes
    assert outcomes[-1] == "answered"
    assert_no_sideways_scroll(page)
    shot(page, "playground")
    request_id = decision(page, "request_id")
    page.click("#pg-revision-link a")
    page.wait_for_url(f"{site.base_url}/audit/requests/{request_id}/")
    assert request_id in page.inner_text("#content")
    assert "playground:admin" in page.inner_text("#content")
    assert wide.problems == []


@pytest.mark.parametrize(("tools", "words"), [
    ('[{"type": "function", ', "tools: not valid JSON"),
    ('{"type": "function"}', "tools: expected a JSON array of tools, got object"),
    ('[{"type": "function", "function": {"parameters": {}}}]', "tools[0].function.name: expected the function's name"),
])
def test_invalid_tools_are_refused_in_the_page_naming_the_field(site: Site, wide: WatchedPage, tools: str,
                                                                words: str) -> None:
    page = wide.page
    open_playground(page, site)
    sent: list[str] = []
    page.on("request", lambda request: sent.append(request.url) if "/v1/" in request.url else None)
    page.fill("#pg-tools", tools)
    send(page, "normal", "What is the weather in Lisbon?")
    page.wait_for_function("document.getElementById('pg-error').textContent.length > 0")
    assert page.inner_text("#pg-error").startswith(words)
    assert page.get_attribute("#pg-tools", "aria-invalid") == "true"
    assert sent == []  # nothing reached the gateway
    assert wide.problems == []


def test_as_a_key_the_request_gets_the_keys_models_and_limits(site: Site, wide: WatchedPage) -> None:
    manage(site.database_url, "createkey", KEY_NAME, "--model", "normal", "--rpm", "2")
    page = wide.page
    open_playground(page, site)
    deadline = time.monotonic() + 20  # the gateway reloads the configuration the command changed
    while not page.locator(f"#pg-caller option:text-matches('^{KEY_NAME}')").count():
        assert time.monotonic() < deadline, "the new key never reached the playground"
        page.reload()
        page.wait_for_selector("#pg-form[data-ready=true]")
    value = page.eval_on_selector(f"#pg-caller option:text-matches('^{KEY_NAME}')", "o => o.value")
    page.select_option("#pg-caller", value)

    send(page, "pool", "Say hello.")  # not on the key's list
    wait_until_sent(page)
    assert page.inner_text("#pg-error").startswith("403 model_not_allowed: ")
    assert decision(page, "caller") == KEY_NAME
    assert decision(page, "status") == "403 (permanent)"

    send(page, "normal", "Say hello.")
    wait_until_sent(page)
    assert page.inner_text("#pg-error") == ""
    assert decision(page, "status") == "200"
    assert decision(page, "limits") == "0 of 2"  # the refused request counted, as a client's does

    send(page, "normal", "Say hello again.")
    wait_until_sent(page)
    assert page.inner_text("#pg-error").startswith("429 rate_limit_exceeded: ")
    assert decision(page, "limit").startswith("key:rpm")
    # The two refusals are the only responses that failed (the browser reports each one twice).
    unexpected = [p for p in wide.problems if not re.search(r"\b(403|429)\b.*/v1/chat/completions", p)]
    assert unexpected == []
    assert len(wide.problems) == 4


def test_a_misspelt_target_is_refused_with_the_nearest_name(site: Site, wide: WatchedPage) -> None:
    page = wide.page
    log_in(page, site, ADMIN, "/admin/routing/virtualmodel/add/")
    offered = page.eval_on_selector(
        "#" + page.get_attribute("#id_targets-0-target", "list"),  # type: ignore[operator]
        "list => Array.from(list.options).map(o => o.value)")
    assert {"oa/oa-model", "pool"} <= set(offered)
    page.fill("#id_source", "typo-pool")
    page.fill("#id_targets-0-target", "oa/oa-modle")
    page.fill("#id_targets-0-weight", "1")  # leaving the target: a note under it before anything is saved
    note = page.locator(".name-picker-note[data-for='targets-0-target']")
    assert note.inner_text().startswith("\u201coa/oa-modle\u201d is not a configured name. Did you mean oa/oa-model")
    page.click(".add-row a")  # a second row: its field offers the names too, and its own list
    added = page.get_attribute("#id_targets-1-target", "list")
    assert added == "id_targets-1-target-names"
    assert page.locator(f"datalist#{added} option[value='pool']").count() == 1
    page.fill("#id_targets-1-target", "pool")
    page.fill("#id_targets-1-weight", "1")
    assert page.locator(".name-picker-note[data-for='targets-1-target']").count() == 0
    page.click("input[name=_save]")
    page.wait_for_selector(".errorlist")
    assert "Did you mean `oa/oa-model`" in page.inner_text("#targets-group")
    shot(page, "virtual-model-typo")

    page.goto(f"{site.base_url}/admin/routing/gatewaykey/add/")
    page.wait_for_selector("#id_allowed_models_from")  # the admin's filter box replaced the raw JSON field
    page.locator("#id_allowed_models_input").press_sequentially("norm")
    shot(page, "key-allowed-models")
    assert page.eval_on_selector_all("#id_allowed_models_from option", "o => o.map(x => x.value)") == ["normal"]
    assert wide.problems == []


def test_a_page_whose_session_ended_gets_no_token_and_says_so(site: Site, wide: WatchedPage) -> None:
    page = wide.page
    open_playground(page, site)
    page.context.clear_cookies()  # logged out (and the CSRF cookie gone) while the page stays open
    send(page, "normal", "Say hello.")
    wait_until_sent(page)
    assert page.inner_text("#pg-error").startswith("No token (403): your session may have ended")
    assert page.inner_text("#pg-answer") == ""
    assert [p for p in wide.problems if "/admin/playground/token/" not in p] == []

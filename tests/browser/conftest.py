"""A running gateway set up as the README's production recipe, and a real browser to look at its pages.

The gateway runs under granian after ``collectstatic`` (into a folder of the test's own), with a superuser
and an auditor (a staff user in the ``auditors`` group). The browser is Debian's ``chromium`` package driven by
Playwright: the test run installs it when it is missing (tests/machine.py); Playwright never downloads a
browser of its own here.
"""

from __future__ import annotations

from collections.abc import Iterator
from dataclasses import dataclass, field
from pathlib import Path

import pytest
from playwright.sync_api import Browser, ConsoleMessage, Page, Response, sync_playwright

from routing.simulator.server import SimulatorServer
from tests.e2e.conftest import SIM_MODELS, fresh_database, manage, open_gateway
from tests.gateway_process import Gateway

CHROMIUM = Path("/usr/bin/chromium")
CHROMIUM_ARGS = ["--headless", "--no-sandbox", "--disable-gpu", "--disable-quic", "--no-first-run",
                 "--disable-background-networking", "--disable-component-update", "--disable-sync"]

ADMIN = ("admin", "admin-password-for-browser-tests")
AUDITOR = ("auditor", "auditor-password-for-browser-tests")

CREATE_USERS = f"""
from django.contrib.auth.models import Group, User
User.objects.create_superuser({ADMIN[0]!r}, "admin@example.com", {ADMIN[1]!r})
auditor = User.objects.create_user({AUDITOR[0]!r}, password={AUDITOR[1]!r}, is_staff=True)
auditor.groups.add(Group.objects.get(name="auditors"))
"""


@dataclass
class Site:
    gateway: Gateway
    database_url: str

    @property
    def base_url(self) -> str:
        return self.gateway.base_url


@pytest.fixture(scope="package")
def site(tmp_path_factory: pytest.TempPathFactory) -> Iterator[Site]:
    tmp = Path(tmp_path_factory.mktemp("browser"))
    static_root = str(tmp / "static")
    with SimulatorServer(config={"models": SIM_MODELS}) as simulator, fresh_database("browser") as url:
        manage(url, "collectstatic", "--noinput", "-v0", env={"DJANGO_STATIC_ROOT": static_root})
        manage(url, "shell", "-c", CREATE_USERS)
        env = {"DJANGO_STATIC_ROOT": static_root, "GOMODEL_AUTH": "open"}
        with open_gateway(tmp, simulator, url, server="granian", env=env) as gateway:
            yield Site(gateway=gateway, database_url=url)


@pytest.fixture(scope="package")
def browser() -> Iterator[Browser]:
    if not CHROMIUM.exists():
        pytest.fail(f"{CHROMIUM} is missing: install Debian's chromium package (tests/machine.py does when it can)")
    with sync_playwright() as playwright:
        browser = playwright.chromium.launch(executable_path=str(CHROMIUM), args=CHROMIUM_ARGS)
        yield browser
        browser.close()


@dataclass
class WatchedPage:
    """A browser page that records every console error, uncaught script error and failed response."""

    page: Page
    problems: list[str] = field(default_factory=list)

    def __post_init__(self) -> None:
        self.page.on("console", self._on_console)
        self.page.on("pageerror", lambda error: self.problems.append(f"uncaught error: {error}"))
        self.page.on("response", self._on_response)

    def _on_console(self, message: ConsoleMessage) -> None:
        if message.type == "error":
            self.problems.append(f"console error: {message.text} ({message.location.get('url')})")

    def _on_response(self, response: Response) -> None:
        if response.status >= 400:
            self.problems.append(f"{response.status} for {response.request.method} {response.url}")


@pytest.fixture
def watched(browser: Browser) -> Iterator[WatchedPage]:
    context = browser.new_context(viewport={"width": 1280, "height": 900}, color_scheme="light")
    try:
        yield WatchedPage(context.new_page())
    finally:
        context.close()

"""Google access tokens for Vertex AI providers: minted from a service-account file (or Application Default
Credentials) against a loopback OAuth token endpoint, refreshed ahead of expiry off the event loop, and a failure
turned into a "no usable key" problem that is logged once and never shows a token or the private key."""

from __future__ import annotations

import asyncio
import logging
import threading
import time
from collections.abc import Iterator
from pathlib import Path

import pytest

from routing.clients import gcp_tokens
from routing.clients.gcp_tokens import TokenSource, TokenSources, access_keys
from routing.core.table import ProviderSpec
from tests.gcp_token_server import CLOUD_PLATFORM, TokenServer
from tests.waiting import wait_for


def vertex(credentials_file: str, name: str = "vx") -> ProviderSpec:
    return ProviderSpec(name=name, kind="vertex", base_url="http://127.0.0.1:1", region="us-central1",
                        project="test-project-1", credentials_file=credentials_file)


@pytest.fixture
def registry() -> Iterator[TokenSources]:
    sources = TokenSources()
    yield sources
    sources.stop_all()


@pytest.fixture
def token_server() -> Iterator[TokenServer]:
    with TokenServer() as server:
        yield server


def test_it_mints_a_token_from_the_service_account_file(tmp_path: Path, token_server: TokenServer,
                                                        registry: TokenSources) -> None:
    provider = vertex(str(token_server.write_key_file(tmp_path)))

    keys, problems = asyncio.run(access_keys(provider, registry=registry))

    assert [key.reveal() for key in keys] == ["ya29.test-token-1"]
    assert problems == ()
    assert token_server.grants[0].claims["scope"] == CLOUD_PLATFORM
    assert "ya29" not in repr(keys) + repr(registry.source_for(provider))


def test_application_default_credentials_read_google_application_credentials(
        tmp_path: Path, token_server: TokenServer, registry: TokenSources, monkeypatch: pytest.MonkeyPatch) -> None:
    monkeypatch.setenv("GOOGLE_APPLICATION_CREDENTIALS", str(token_server.write_key_file(tmp_path)))

    keys, _ = asyncio.run(access_keys(vertex(""), registry=registry))

    assert [key.reveal() for key in keys] == ["ya29.test-token-1"]


def test_it_refreshes_ahead_of_expiry_and_the_hot_path_only_reads(tmp_path: Path, registry: TokenSources) -> None:
    with TokenServer(expires_in=6) as server:
        provider = vertex(str(server.write_key_file(tmp_path)))
        first, _ = asyncio.run(access_keys(provider, registry=registry))
        first_expiry = server.grants[0].at + 6

        wait_for(lambda: len(server.tokens()) >= 2, 8, "a second token")
        second, _ = asyncio.run(access_keys(provider, registry=registry))

    assert [k.reveal() for k in first] == ["ya29.test-token-1"]
    assert [k.reveal() for k in second] == ["ya29.test-token-2"]
    assert server.grants[1].at < first_expiry - 2  # renewed at mid-life, well before the first one expired
    assert registry.source_for(provider).fetches == 2


def test_a_failed_fetch_is_a_key_problem_logged_once_without_secrets(
        tmp_path: Path, registry: TokenSources, caplog: pytest.LogCaptureFixture, monkeypatch: pytest.MonkeyPatch
) -> None:
    monkeypatch.setattr(gcp_tokens, "RETRY_FIRST_S", 0.05)
    monkeypatch.setattr(gcp_tokens, "RETRY_MAX_S", 0.05)
    caplog.set_level(logging.INFO, logger="routing.clients.gcp_tokens")
    with TokenServer(fail_with=(400, {"error": "invalid_grant", "error_description": "Account disabled"})) as server:
        provider = vertex(str(server.write_key_file(tmp_path)))
        keys, problems = asyncio.run(access_keys(provider, registry=registry))
        wait_for(lambda: len(server.grants) >= 4, 10, "four token grants")  # it keeps trying in the background
        warnings = [r for r in caplog.records if r.levelno == logging.WARNING]
        server.fail_with = None
        wait_for(lambda: registry.source_for(provider).current() is not None, 10, "a current token")
        recovered, _ = asyncio.run(access_keys(provider, registry=registry))
        private_key = server.private_key_pem

    assert keys == ()
    assert len(problems) == 1
    assert problems[0].startswith("no Google access token (RefreshError: invalid_grant: Account disabled")
    assert len(warnings) == 1  # once per transition, not once per retry
    assert "provider vx: cannot fetch a Google access token" in warnings[0].getMessage()
    assert any("fetched again" in r.getMessage() for r in caplog.records)
    assert [k.reveal() for k in recovered] == ["ya29.test-token-1"]
    logged = caplog.text + problems[0]
    assert "ya29." not in logged
    assert private_key.splitlines()[1] not in logged


def test_a_missing_file_is_a_problem_naming_the_error(tmp_path: Path, registry: TokenSources) -> None:
    keys, problems = asyncio.run(access_keys(vertex(str(tmp_path / "absent.json")), registry=registry))

    assert keys == ()
    assert problems[0].startswith("no Google access token (FileNotFoundError")


def test_waiting_for_the_first_token_never_blocks_the_event_loop() -> None:
    release = threading.Event()

    class SlowCredentials:
        token: str | None = None
        expiry = None

        def refresh(self, request: object) -> None:
            release.wait(5)
            self.token = "ya29.slow-token"

    source = TokenSource("slow", "", loader=lambda path: SlowCredentials(), transport=lambda proxy: None)

    async def scenario() -> tuple[int, str | None]:
        ticks = 0

        async def ticker() -> None:
            nonlocal ticks
            while True:
                ticks += 1
                await asyncio.sleep(0.01)

        ticking = asyncio.create_task(ticker())
        source.start()
        asyncio.get_running_loop().call_later(0.3, release.set)
        await source.first_attempt(5)
        ticking.cancel()
        key = source.current()
        return ticks, key.reveal() if key is not None else None

    ticks, token = asyncio.run(scenario())
    source.stop()

    assert token == "ya29.slow-token"
    assert ticks >= 10  # the loop kept running while the thread waited on the token endpoint


def test_a_source_that_runs_out_of_time_reports_the_wait(registry: TokenSources) -> None:
    never = threading.Event()

    class StuckCredentials:
        token: str | None = None
        expiry = None

        def refresh(self, request: object) -> None:
            never.wait(5)

    source = TokenSource("stuck", "", loader=lambda path: StuckCredentials(), transport=lambda proxy: None)
    source.start()
    started = time.monotonic()
    asyncio.run(source.first_attempt(0.2))
    waited = time.monotonic() - started
    never.set()
    source.stop()

    assert 0.15 <= waited < 2
    assert source.current() is None
    assert source.problem == "no access token fetched yet"


def test_prepare_starts_sources_for_vertex_providers_and_stops_removed_ones(tmp_path: Path,
                                                                            token_server: TokenServer,
                                                                            registry: TokenSources) -> None:
    path = str(token_server.write_key_file(tmp_path))
    other = ProviderSpec(name="oa", kind="openai", base_url="http://127.0.0.1:1")
    registry.prepare([vertex(path), vertex(path, "vc"), other])
    wait_for(lambda: len(token_server.tokens()) == 2, 10, "two tokens minted")  # minted before any request asked
    kept = registry.source_for(vertex(path))

    registry.prepare([vertex(path)])

    assert registry.source_for(vertex(path)) is kept
    assert "vc" not in registry._sources
    assert "oa" not in registry._sources

"""The admin's live view says which cooldowns came from another process, and how full each provider's minute is."""

from __future__ import annotations

import time
from collections.abc import Iterator
from typing import Any

import pytest

from routing.core.outcome import AttemptOutcome, ErrorClass
from routing.core.table import ModelSpec, ProviderSpec, RoutingTable, TargetRef, VirtualModelSpec
from routing.gateway.inspection import live_state
from routing.gateway.state import state

TABLE = RoutingTable.build(
    version=1,
    providers=[ProviderSpec("p", "openai", "http://127.0.0.1:9/v1")],
    models=[ModelSpec(name="a", provider="p", upstream="a", rpm=3, tpm=1000),
            ModelSpec(name="b", provider="p", upstream="b"),
            ModelSpec(name="c", provider="p", upstream="c")],
    virtual_models=[VirtualModelSpec(source="pool", strategy="failover",
                                     targets=(TargetRef("a"), TargetRef("b"), TargetRef("c")))],
)


@pytest.fixture(autouse=True)
def table_in_this_process(monkeypatch: pytest.MonkeyPatch, settings: Any) -> Iterator[None]:
    settings.REDIS_URL = ""  # this process's own state only
    monkeypatch.setattr(live_state, "current_table", lambda: TABLE)
    state.renew()
    state.follow(TABLE)
    yield
    state.renew()


def test_a_row_names_the_process_whose_verdict_its_cooldown_is() -> None:
    now = time.monotonic()
    state.health.get("b").adopt_cooldown(now + 60.0, now, reason="auth", origin="gw-2/4711/a1b2c3")
    state.health.get("c").record(AttemptOutcome.failure(ErrorClass.INCOMPATIBLE, "auth", status=401), now)

    rows = {row["target"]: row for row in live_state.target_rows("pool")}

    assert (rows["a"]["verdict_from"], rows["b"]["verdict_from"], rows["c"]["verdict_from"]) == (
        "", "gw-2/4711/a1b2c3", "")
    page = str(live_state.render_live_state("pool"))
    assert "another process (gw-2/4711/a1b2c3)" in page
    assert "this process" in page  # c's own lockout


def test_a_row_shows_the_provider_minute_against_its_limits() -> None:
    now = time.monotonic()
    state.quotas.dispatch("a", now, reserve=120)  # an attempt in flight: its tokens are reserved

    rows = {row["target"]: row for row in live_state.target_rows("pool")}

    assert rows["a"]["provider_minute"] == "1/3 requests, 120/1000 tokens"
    assert rows["b"]["provider_minute"] == ""

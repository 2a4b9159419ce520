"""The admin's live view of a virtual model: one row per target, read from this process's health registry."""

from __future__ import annotations

import time
from collections.abc import Iterator

import pytest

from routing.core.table import ModelSpec, ProviderSpec, RoutingTable, TargetRef, VirtualModelSpec
from routing.gateway.inspection import live_state
from routing.gateway.state import state

TABLE = RoutingTable.build(
    version=1,
    providers=[ProviderSpec("p", "openai", "http://127.0.0.1:9/v1")],
    models=[ModelSpec(name="a", provider="p", upstream="a"), ModelSpec(name="b", provider="p", upstream="b")],
    virtual_models=[VirtualModelSpec(source="pool", strategy="adaptive",
                                     targets=(TargetRef("a"), TargetRef("b", 2.0)))],
)


@pytest.fixture(autouse=True)
def table_in_this_process(monkeypatch: pytest.MonkeyPatch) -> Iterator[None]:
    monkeypatch.setattr(live_state, "current_table", lambda: TABLE)
    state.renew()
    yield
    state.renew()


def test_it_shows_each_target_with_the_health_this_process_keeps() -> None:
    now = time.monotonic()
    state.health.get("a").in_flight = 2
    state.health.get("b").adopt_cooldown(now + 60.0, now, reason="rate_limited")

    rows = live_state.target_rows("pool")

    assert [row["target"] for row in rows] == ["a", "b"]
    a, b = rows
    assert (a["configured_weight"], a["status"], a["in_flight"], a["cooldown_until"], a["last_error"]) == (
        1.0, "healthy", 2, None, "")
    assert (b["configured_weight"], b["status"], b["in_flight"], b["last_error"]) == (
        2.0, "cooling", 0, "rate_limited")
    assert isinstance(b["cooldown_until"], str)
    assert b["cooldown_until"].endswith(" UTC")
    assert a["live_weight"] == 1.0  # the only target with weight left: the heaviest is 1
    assert b["live_weight"] == 0.0


def test_it_has_no_rows_for_a_model_the_table_does_not_hold() -> None:
    assert live_state.target_rows("missing") == []

"""One prober round in process against the simulator: what it sends, what it changes, and how it is accounted."""

from __future__ import annotations

import asyncio
import time
from collections.abc import Iterator
from typing import Any

import pytest
from prometheus_client import REGISTRY

from routing.clients import upstream
from routing.clients.shared_state_store import HealthEntry, SharedStateStore
from routing.core.outcome import AttemptOutcome, ErrorClass
from routing.core.table import ModelSpec, ProviderSpec, RoutingTable, Secret, TargetRef, VirtualModelSpec
from routing.gateway import audit_handoff
from routing.gateway.background.prober import Prober
from routing.gateway.background.shared_sync import BACKGROUND_PROBE, SharedSync
from routing.gateway.inspection import live_state
from routing.gateway.state import state
from routing.simulator.server import SimulatorServer

KEY = "sk-probe-secret-value"


def table(sim_url: str) -> RoutingTable:
    return RoutingTable.build(
        version=7,
        providers=[ProviderSpec("oa", "openai", f"{sim_url}/v1", api_keys=(Secret(KEY),), probe="completion"),
                   ProviderSpec("an", "anthropic", sim_url, api_keys=(Secret(KEY),))],
        models=[ModelSpec(name="oa/priced", provider="oa", upstream="priced", input_price=1000.0,
                          output_price=2000.0),
                ModelSpec(name="an/plain", provider="an", upstream="plain")],
        virtual_models=[VirtualModelSpec(source="pool", strategy="adaptive",
                                         targets=(TargetRef("oa/priced"), TargetRef("an/plain")))],
    )


@pytest.fixture
def sim() -> Iterator[SimulatorServer]:
    with SimulatorServer({"models": {"priced": {}, "plain": {}}}) as server:
        yield server


@pytest.fixture
def published(monkeypatch: pytest.MonkeyPatch) -> list[dict[str, Any]]:
    events: list[dict[str, Any]] = []
    monkeypatch.setattr(audit_handoff, "publish", events.append)
    return events


@pytest.fixture(autouse=True)
def fresh_state() -> Iterator[None]:
    state.renew()
    yield
    state.renew()


def one_round(routing_table: RoutingTable) -> list[Any]:
    """A prober round on a fresh event loop, the provider connections closed after it."""
    async def run() -> list[Any]:
        try:
            return list(await Prober(state, table=lambda: routing_table).run_round())
        finally:
            await upstream.pool.aclose()

    return asyncio.run(run())


def server_error() -> AttemptOutcome:
    return AttemptOutcome.failure(ErrorClass.TRANSIENT, "server_error", status=500, latency_s=0.1)


def sample(name: str, **labels: str) -> float:
    return REGISTRY.get_sample_value(name, labels) or 0.0


def test_it_ends_a_cooldown_with_a_priced_one_token_completion_and_accounts_for_it(
        sim: SimulatorServer, published: list[dict[str, Any]], monkeypatch: pytest.MonkeyPatch) -> None:
    routing_table = table(sim.base_url)
    monkeypatch.setattr(live_state, "current_table", lambda: routing_table)
    health = state.health.get("oa/priced")
    for _ in range(3):
        health.record(server_error(), time.monotonic())
    assert health.status(time.monotonic()) == "cooling"
    cost_before = sample("gomodel_cost_usd_total", target="oa/priced")
    spend_before = sample("gomodel_spend_usd_total", key="(probe)", team="")

    records = one_round(routing_table)

    assert [(r.task.target, r.call.mode, r.effect) for r in records] == [("oa/priced", "completion", "closed")]
    assert health.status(time.monotonic()) == "healthy"
    sent = sim.received("priced")[-1]
    assert sent["body"]["max_tokens"] == 1
    assert sent["path"] == "/v1/chat/completions"
    cost = records[0].call.cost
    assert cost is not None
    assert cost > 0
    assert sample("gomodel_probes_total", target="oa/priced", result="passed") >= 1
    assert sample("gomodel_cost_usd_total", target="oa/priced") == pytest.approx(cost_before + cost)
    assert sample("gomodel_spend_usd_total", key="(probe)", team="") == pytest.approx(spend_before + cost)
    [event] = published
    assert (event["endpoint"], event["target"], event["status"], event["cost_usd"]) == ("probe", "oa/priced", 200, cost)
    assert event["attempts"][0]["action"] == "probe:closed"
    assert KEY not in repr(event)
    row = next(r for r in live_state.target_rows("pool") if r["target"] == "oa/priced")
    assert row["status"] == "healthy"
    assert "passed (closed)" in str(row["last_probe"])
    assert "last background probe" in live_state.render_live_state("pool")


def test_a_failed_transient_probe_changes_nothing_and_is_not_audited(sim: SimulatorServer,
                                                                     published: list[dict[str, Any]]) -> None:
    routing_table = table(sim.base_url)
    health = state.health.get("an/plain")
    for _ in range(3):
        health.record(server_error(), time.monotonic())
    until = health.cooldown_until
    sim.set_fault("plain", {"kind": "status", "status": 500})

    records = one_round(routing_table)

    assert [(r.task.target, r.call.mode, r.effect, r.call.outcome.reason) for r in records] == [
        ("an/plain", "models", "unchanged", "server_error")]
    assert health.cooldown_until == until
    assert published == []
    assert state.probes["an/plain"].result == "server_error"
    assert sim.received("plain")[-1]["path"] == "/v1/models/plain"


def test_other_processes_follow_an_early_close_and_show_the_last_probe() -> None:
    sync = SharedSync(SharedStateStore("redis://127.0.0.1:6379/7", prefix="probe-unit:"), state.health,
                      known=lambda name: True, probes=state.probes, origin="here")
    now = time.monotonic()
    health = state.health.get("t")
    health.adopt_cooldown(now + 60, now, reason="server_error", origin="there")
    close = HealthEntry("1-0", "there", "t", "close", BACKGROUND_PROBE, duration_ms=50, level=0, age_ms=10)
    assert sync.apply(close, now + 1)
    assert health.status(now + 1) == "healthy"
    assert not sync.apply(HealthEntry("2-0", "there", "t", "probe", "passed:closed", 0, 0, age_ms=0), now + 1)
    assert (state.probes["t"].result, state.probes["t"].effect, state.probes["t"].origin) == (
        "passed", "closed", "there")
    health.adopt_cooldown(now + 60, now + 2, reason="rate_limited", origin="there")
    assert not sync.apply(close, now + 3)  # a 429 elsewhere: never shortened by a probe
    state.health.listen(None)

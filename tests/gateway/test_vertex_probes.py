"""The background prober on Vertex AI targets: a one-token completion on each publisher's path, sent with the
provider's access token, closes the cooldown; without a token nothing is sent and the cooldown is extended (as
for a provider whose keys do not resolve)."""

from __future__ import annotations

import asyncio
import time
from collections.abc import Iterator
from pathlib import Path
from typing import Any

import pytest

from routing.clients import gcp_tokens, upstream
from routing.core.outcome import AttemptOutcome, ErrorClass
from routing.core.table import ModelSpec, ProviderSpec, RoutingTable
from routing.gateway.background.prober import Prober
from routing.gateway.state import state
from routing.simulator.server import SimulatorServer
from tests.gcp_token_server import TokenServer

TOKEN = "ya29.probe-token"
PUBLISHERS = "/v1/projects/probe-project/locations/us-central1/publishers"


@pytest.fixture(autouse=True)
def fresh_state() -> Iterator[None]:
    state.renew()
    yield
    state.renew()
    gcp_tokens.sources.prepare([])  # stop the token threads this test started


@pytest.fixture
def sim() -> Iterator[SimulatorServer]:
    with SimulatorServer({"models": {"gem-p": {"api_keys": [TOKEN]}, "claude-p": {"api_keys": [TOKEN]}}}) as server:
        yield server


def table(sim_url: str, credentials_file: str) -> RoutingTable:
    cloud: dict[str, Any] = {"region": "us-central1", "project": "probe-project", "credentials_file": credentials_file}
    return RoutingTable.build(
        version=3,
        providers=[ProviderSpec("vxp", "vertex", sim_url, **cloud), ProviderSpec("vcp", "vertex_anthropic", sim_url,
                                                                                 **cloud)],
        models=[ModelSpec(name="vxp/gem-p", provider="vxp", upstream="gem-p"),
                ModelSpec(name="vcp/claude-p", provider="vcp", upstream="claude-p")],
    )


def cool(target: str) -> None:
    health = state.health.get(target)
    for _ in range(3):
        health.record(AttemptOutcome.failure(ErrorClass.TRANSIENT, "server_error", status=500, latency_s=0.1),
                      time.monotonic())
    assert health.status(time.monotonic()) == "cooling"


def one_round(routing_table: RoutingTable) -> list[Any]:
    async def run() -> list[Any]:
        try:
            return list(await Prober(state, table=lambda: routing_table).run_round())
        finally:
            await upstream.pool.aclose()

    return asyncio.run(run())


def test_a_one_token_completion_with_the_access_token_closes_each_cooldown(sim: SimulatorServer,
                                                                           tmp_path: Path) -> None:
    with TokenServer(fixed=TOKEN) as server:
        routing_table = table(sim.base_url, str(server.write_key_file(tmp_path)))
        cool("vxp/gem-p")
        cool("vcp/claude-p")

        records = one_round(routing_table)

    assert sorted((r.task.target, r.call.mode, r.effect) for r in records) == [
        ("vcp/claude-p", "completion", "closed"), ("vxp/gem-p", "completion", "closed")]
    gemini, claude = sim.received("gem-p")[-1], sim.received("claude-p")[-1]
    assert gemini["path"] == PUBLISHERS + "/google/models/gem-p:generateContent"
    assert gemini["body"]["generationConfig"]["maxOutputTokens"] == 1
    assert claude["path"] == PUBLISHERS + "/anthropic/models/claude-p:rawPredict"
    assert claude["body"]["max_tokens"] == 1
    assert gemini["auth"]["key_index"] == claude["auth"]["key_index"] == 0


def test_without_a_token_nothing_is_sent_and_the_cooldown_is_extended(sim: SimulatorServer, tmp_path: Path) -> None:
    routing_table = table(sim.base_url, str(tmp_path / "missing.json"))
    cool("vxp/gem-p")

    records = one_round(routing_table)

    assert [(r.task.target, r.call.outcome.reason, r.effect) for r in records] == [
        ("vxp/gem-p", "key_unavailable", "extended")]
    assert sim.received("gem-p") == []

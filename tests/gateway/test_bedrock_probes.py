"""Background probes of Bedrock targets: a one-token Converse call signed with SigV4 (Bedrock's model list is
another service, so there is no models probe), and a provider without AWS credentials reported as such, unsent."""

from __future__ import annotations

import asyncio
import time
from collections.abc import Iterator
from typing import Any

import pytest

from routing.clients import aws_credentials, upstream
from routing.core.outcome import AttemptOutcome, ErrorClass
from routing.core.probes import mode_problem, probe_mode
from routing.core.table import ModelSpec, ProviderSpec, RoutingTable, Secret
from routing.gateway import audit_handoff
from routing.gateway.background.prober import Prober
from routing.gateway.state import state
from routing.simulator.recorder import key_fingerprint
from routing.simulator.server import SimulatorServer

KEY_ID, SECRET = "AKIDPROBETEST0000001", "probe-secret-access-key"
MODEL = "anthropic.claude-3-haiku-20240307-v1:0"


def table(sim_url: str) -> RoutingTable:
    return RoutingTable.build(
        version=3,
        providers=[ProviderSpec("br", "bedrock", sim_url, region="us-west-2",
                                aws_keys=(Secret(KEY_ID), Secret(SECRET))),
                   ProviderSpec("brn", "bedrock", sim_url, region="us-west-2")],
        models=[ModelSpec(name="br/haiku", provider="br", upstream=MODEL),
                ModelSpec(name="brn/haiku", provider="brn", upstream=MODEL)],
        virtual_models=[],
    )


@pytest.fixture
def sim() -> Iterator[SimulatorServer]:
    with SimulatorServer({"models": {MODEL: {}}}) as server:
        yield server


@pytest.fixture(autouse=True)
def fresh_state(monkeypatch: pytest.MonkeyPatch) -> Iterator[None]:
    state.renew()
    aws_credentials.credential_cache.forget()
    monkeypatch.setattr(aws_credentials.credential_cache, "_resolve", lambda: None)  # the chain finds nothing
    monkeypatch.setattr(audit_handoff, "publish", lambda event: None)
    yield
    aws_credentials.credential_cache.forget()
    state.renew()


def one_round(routing_table: RoutingTable) -> list[Any]:
    async def run() -> list[Any]:
        try:
            return list(await Prober(state, table=lambda: routing_table).run_round())
        finally:
            await upstream.pool.aclose()

    return asyncio.run(run())


def test_bedrock_is_proved_by_a_signed_one_token_completion_only() -> None:
    assert probe_mode("bedrock", "") == "completion"
    assert mode_problem("bedrock", "models") is not None


def test_a_cooling_bedrock_target_is_probed_signed_and_one_without_credentials_is_not_sent(
        sim: SimulatorServer) -> None:
    for target in ("br/haiku", "brn/haiku"):
        health = state.health.get(target)
        for _ in range(3):
            health.record(AttemptOutcome.failure(ErrorClass.TRANSIENT, "server_error", status=500, latency_s=0.1),
                          time.monotonic())

    records = {r.task.target: r for r in one_round(table(sim.base_url))}

    assert (records["br/haiku"].call.mode, records["br/haiku"].effect) == ("completion", "closed")
    assert records["brn/haiku"].call.outcome.reason == "key_unavailable"
    assert records["brn/haiku"].effect != "closed"
    [sent] = sim.received(MODEL)  # the unsigned provider sent nothing
    assert sent["path"] == f"/model/{MODEL}/converse"
    assert sent["auth"]["fingerprint"] == key_fingerprint(KEY_ID)
    assert sent["body"]["inferenceConfig"] == {"maxTokens": 1}

"""Provider rpm/tpm in the engine: a target at its provider's limit is skipped like a cooling one, in process.

The simulator records every request it receives, so "the provider never saw it" is read from its records.
"""

from __future__ import annotations

import dataclasses
from typing import Any

import pytest

from routing.core.table import RoutingTable, TargetRef, VirtualModelSpec
from routing.simulator import SimulatorServer
from tests.gateway import support
from tests.gateway.support import answer, counted, request, run

simulator, sim, fresh_state = support.simulator, support.sim, support.fresh_state


def limited_table(sim_url: str, **limits: int) -> RoutingTable:
    """The tests' table with ``limits`` (rpm, tpm) on ``primary`` and a failover pool primary -> secondary."""
    base = support.routing_table(sim_url)
    models = [dataclasses.replace(m, **limits) if m.name == "primary" else m for m in base.models.values()]
    return RoutingTable.build(
        version=1, providers=list(base.providers.values()), models=models,
        virtual_models=[VirtualModelSpec(source="pool", strategy="failover",
                                         targets=(TargetRef("primary"), TargetRef("secondary")))],
    )


def test_the_request_after_rpm_within_the_minute_goes_to_the_fallback_and_the_provider_never_sees_it(
        sim: SimulatorServer, audit_events: list[dict[str, Any]]) -> None:
    table = limited_table(sim.base_url, rpm=3)
    skips_before = counted("gomodel_target_limit_skips_total", target="primary", reason="at_provider_rpm")

    async def scenario() -> list[str]:
        return [(await answer(request(table, "pool", f"question {i}"))).headers["X-GoModel-Target"]
                for i in range(4)]

    assert run(scenario()) == ["primary", "primary", "primary", "secondary"]
    assert len(sim.received("primary")) == 3  # the fourth never reached primary's provider
    assert len(sim.received("secondary")) == 1
    skipped = audit_events[-1]["selection"]["skipped"]
    assert {"target": "primary", "reason": "at_provider_rpm"} in skipped
    assert counted("gomodel_target_limit_skips_total", target="primary",
                   reason="at_provider_rpm") == skips_before + 1


def test_tokens_count_from_the_real_usage_of_answers(sim: SimulatorServer) -> None:
    table = limited_table(sim.base_url, tpm=10)

    async def scenario() -> list[tuple[str, int]]:
        targets = []
        for i in range(2):
            reply = await answer(request(table, "pool", f"tell me about tokens, part {i}"))
            targets.append((reply.headers["X-GoModel-Target"], reply.json()["usage"]["total_tokens"]))
        return targets

    (first, used), (second, _) = run(scenario())
    assert used >= 10  # the first answer alone filled the minute's tokens ...
    assert (first, second) == ("primary", "secondary")  # ... so the next request went elsewhere
    assert len(sim.received("primary")) == 1


def test_streams_count_their_usage_too(sim: SimulatorServer) -> None:
    table = limited_table(sim.base_url, tpm=10)

    async def scenario() -> list[str]:
        first = await answer(request(table, "pool", "a streamed answer", stream=True,
                                     stream_options={"include_usage": True}))
        second = await answer(request(table, "pool", "and another"))
        return [first.headers["X-GoModel-Target"], second.headers["X-GoModel-Target"]]

    assert run(scenario()) == ["primary", "secondary"]


def test_a_concrete_model_at_its_limit_is_a_503_that_says_when_to_come_back(sim: SimulatorServer) -> None:
    table = limited_table(sim.base_url, rpm=1)

    async def scenario() -> tuple[int, int, dict[str, Any], str]:
        first = await answer(request(table, "primary"))
        second = await answer(request(table, "primary"))
        return first.status, second.status, second.error, second.headers.get("Retry-After", "")

    first, second, error, retry_after = run(scenario())
    assert (first, second) == (200, 503)
    assert error["code"] == "provider_limit_reached"
    assert "requests or tokens per minute" in error["message"]
    assert 1 <= int(retry_after) <= 61
    assert len(sim.received("primary")) == 1


def test_every_target_at_its_limit_is_a_503_naming_the_limit(sim: SimulatorServer) -> None:
    base = limited_table(sim.base_url, rpm=1)
    models = [dataclasses.replace(m, rpm=1) if m.name == "secondary" else m for m in base.models.values()]
    table = RoutingTable.build(version=1, providers=list(base.providers.values()), models=models,
                               virtual_models=list(base.virtual_models.values()))

    async def scenario() -> list[int]:
        return [(await answer(request(table, "pool", f"q{i}"))).status for i in range(3)]

    assert run(scenario()) == [200, 200, 503]


@pytest.mark.parametrize("limits", [{}, {"rpm": 1000, "tpm": 1_000_000}])
def test_room_under_the_limits_changes_nothing(sim: SimulatorServer, limits: dict[str, int]) -> None:
    table = limited_table(sim.base_url, **limits)

    async def scenario() -> list[str]:
        return [(await answer(request(table, "pool", f"q{i}"))).headers["X-GoModel-Target"] for i in range(5)]

    assert run(scenario()) == ["primary"] * 5

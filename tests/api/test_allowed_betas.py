"""``anthropic-beta`` reaches a provider only for the betas its operator allows (``allowed_betas``): a beta can
change the price. Any other is dropped, not refused, and the answer names it in ``X-GoModel-Dropped-Betas``."""

from __future__ import annotations

import dataclasses
import json
from typing import Any

import pytest
from django.test import AsyncClient

from routing.config.runtime import runtime
from routing.core.table import ProviderSpec, RoutingTable
from routing.simulator import SimulatorServer
from tests.gateway import support

simulator = support.simulator
sim = support.sim
fresh_state = support.fresh_state

pytestmark = pytest.mark.django_db

BODY = {"model": "claude", "max_tokens": 16, "messages": [{"role": "user", "content": "hi"}]}
ASKED = "prompt-caching-2024-07-31, context-1m-2025-08-07,interleaved-thinking-2025-05-14"


def serve(sim: SimulatorServer, allowed: frozenset[str]) -> None:
    table = support.routing_table(sim.base_url)
    provider = dataclasses.replace(table.providers["sim-anthropic"], allowed_betas=allowed)
    runtime.swap(dataclasses.replace(table, providers={**table.providers, "sim-anthropic": provider}))


@pytest.fixture(autouse=True)
def open_access(settings: Any) -> None:
    settings.GOMODEL_AUTH = "open"


def post(path: str, body: dict[str, Any], **headers: str) -> Any:
    """The answer to one request, read to its end on a loop that closes the upstream connections it opened."""

    async def ask() -> Any:
        response = await AsyncClient().post(path, json.dumps(body), content_type="application/json",
                                            headers=headers)
        if response.streaming:
            async for _ in response.streaming_content:
                pass
        return response

    return support.run(ask())


@pytest.mark.parametrize("stream", [False, True])
def test_it_passes_on_only_the_allowed_betas_and_names_the_dropped_ones(sim: SimulatorServer, stream: bool) -> None:
    serve(sim, frozenset({"prompt-caching-2024-07-31", "interleaved-thinking-2025-05-14"}))
    response = post("/v1/messages", {**BODY, "stream": stream}, **{"anthropic-beta": ASKED})
    assert response.status_code == 200
    [sent] = sim.received("claude-sim")
    assert sent["headers"]["anthropic-beta"] == "prompt-caching-2024-07-31,interleaved-thinking-2025-05-14"
    assert response["X-GoModel-Dropped-Betas"] == "context-1m-2025-08-07"


def test_by_default_no_beta_is_passed_on(sim: SimulatorServer) -> None:
    serve(sim, frozenset())
    response = post("/v1/messages", BODY, **{"anthropic-beta": ASKED})
    assert response.status_code == 200
    [sent] = sim.received("claude-sim")
    assert "anthropic-beta" not in sent["headers"]
    assert response["X-GoModel-Dropped-Betas"] == (
        "prompt-caching-2024-07-31,context-1m-2025-08-07,interleaved-thinking-2025-05-14")


def test_an_answer_without_dropped_betas_has_no_such_header(sim: SimulatorServer) -> None:
    serve(sim, frozenset({"context-1m-2025-08-07"}))
    allowed = post("/v1/messages", BODY, **{"anthropic-beta": "context-1m-2025-08-07"})
    plain = post("/v1/messages", BODY)
    assert (allowed.status_code, plain.status_code) == (200, 200)
    assert "X-GoModel-Dropped-Betas" not in allowed
    assert "X-GoModel-Dropped-Betas" not in plain
    assert [r["headers"].get("anthropic-beta") for r in sim.received("claude-sim")] == ["context-1m-2025-08-07", None]


def test_count_tokens_passes_on_only_the_allowed_betas(sim: SimulatorServer) -> None:
    serve(sim, frozenset({"prompt-caching-2024-07-31"}))
    response = post("/v1/messages/count_tokens", {"model": "claude", "messages": BODY["messages"]},
                    **{"anthropic-beta": ASKED})
    assert response.status_code == 200
    [sent] = sim.received("claude-sim")
    assert sent["headers"]["anthropic-beta"] == "prompt-caching-2024-07-31"
    assert response["X-GoModel-Dropped-Betas"] == "context-1m-2025-08-07,interleaved-thinking-2025-05-14"


def test_the_routing_table_holds_no_beta_for_a_provider_without_allowed_betas() -> None:
    assert RoutingTable.build(version=1, providers=[ProviderSpec("a", "anthropic", "http://x")]
                              ).providers["a"].allowed_betas == frozenset()

"""The few client headers a provider's API reads reach it on chat requests, and no other header does:
``anthropic-beta`` from an Anthropic client to an Anthropic provider, OpenRouter's attribution headers."""

from __future__ import annotations

import dataclasses

import pytest

from routing.core.table import RoutingTable
from routing.simulator import SimulatorServer
from tests.gateway import support
from tests.gateway.support import answer, request, run

simulator = support.simulator
sim = support.sim
table = support.table
fresh_state = support.fresh_state

BETA = {"anthropic-beta": "interleaved-thinking-2025-05-14", "x-private-note": "never forwarded"}


@pytest.mark.parametrize("stream", [False, True])
def test_an_anthropic_clients_beta_header_reaches_an_anthropic_provider(
        table: RoutingTable, sim: SimulatorServer, stream: bool) -> None:
    allowing = dataclasses.replace(table.providers["sim-anthropic"],
                                   allowed_betas=frozenset({"interleaved-thinking-2025-05-14"}))
    table = dataclasses.replace(table, providers={**table.providers, "sim-anthropic": allowing})
    reply = run(answer(request(table, "claude", inbound="anthropic", headers=BETA, stream=stream)))

    assert reply.status == 200
    [sent] = sim.received("claude-sim")
    assert sent["headers"]["anthropic-beta"] == "interleaved-thinking-2025-05-14"
    assert "x-private-note" not in sent["headers"]


def test_the_beta_header_of_an_openai_client_or_to_another_format_is_not_passed_on(
        table: RoutingTable, sim: SimulatorServer) -> None:
    from_openai = run(answer(request(table, "claude", inbound="openai", headers=BETA)))
    to_openai = run(answer(request(table, "primary", inbound="anthropic", headers=BETA)))

    assert (from_openai.status, to_openai.status) == (200, 200)
    [to_anthropic] = sim.received("claude-sim")
    [to_openai_kind] = sim.received("primary")
    assert "anthropic-beta" not in to_anthropic["headers"]
    assert "anthropic-beta" not in to_openai_kind["headers"]

"""/v1/messages/count_tokens: counted by an Anthropic provider behind the name, the marked estimate otherwise."""

from __future__ import annotations

import uuid
from typing import Any

import pytest

from routing.core.features import extract_features
from routing.core.table import ModelSpec, ProviderSpec, RoutingTable, Secret, TargetRef, VirtualModelSpec
from routing.gateway import count_tokens as counting
from routing.gateway.gateway_error import GatewayError
from routing.gateway.records import Call
from routing.simulator import SimulatorServer
from routing.simulator.count_tokens import counted_tokens
from tests.gateway import support
from tests.gateway.support import Reply, read, run

simulator = support.simulator
fresh_state = support.fresh_state

BODY: dict[str, Any] = {"model": "claude", "system": "Be brief.", "max_tokens": 64,
                        "messages": [{"role": "user", "content": "How many tokens is this?"}]}


@pytest.fixture
def table(simulator: SimulatorServer) -> RoutingTable:
    simulator.reset()
    url = simulator.base_url
    return RoutingTable.build(
        version=1,
        providers=[ProviderSpec("sim", "openai", f"{url}/v1"),
                   ProviderSpec("sim-anthropic", "anthropic", url, api_keys=(Secret("sk-simulated"),))],
        models=[ModelSpec(name="claude", provider="sim-anthropic", upstream="claude-sim"),
                ModelSpec(name="gpt", provider="sim", upstream="gpt-sim"),
                ModelSpec(name="embed", provider="sim", upstream="embed", endpoints=frozenset({"embeddings"}),
                          dimensions=8, family="f")],
        virtual_models=[VirtualModelSpec("mixed", "failover", (TargetRef("gpt"), TargetRef("claude")))],
    )


def call(table: RoutingTable, **changes: Any) -> Call:
    body = {**BODY, **changes}
    return Call(request_id=uuid.uuid4().hex, inbound="anthropic", key=None, body=body,
                features=extract_features(body, "anthropic"), headers={"anthropic-beta": "token-counting-2024"},
                table=table, endpoint="count_tokens")


async def count(request: Call) -> Reply:
    try:
        return await read(await counting.count_tokens(request))
    except GatewayError as exc:
        return Reply(exc.status, exc.headers, exc.message.encode())


def test_an_anthropic_model_counts_with_its_provider(table: RoutingTable, simulator: SimulatorServer,
                                                     audit_events: list[dict[str, Any]]) -> None:
    reply = run(count(call(table)))
    assert reply.status == 200
    sent_fields = {"system": BODY["system"], "messages": BODY["messages"]}
    assert reply.json() == {"input_tokens": counted_tokens(sent_fields)}
    assert reply.headers["X-GoModel-Token-Count"] == "provider"
    assert reply.headers["X-GoModel-Target"] == "claude"
    [sent] = simulator.received("claude-sim")
    assert sent["path"] == "/v1/messages/count_tokens"
    assert sent["body"] == {"model": "claude-sim", **sent_fields}  # max_tokens is not a count's field
    [event] = audit_events
    assert event["endpoint"] == "count_tokens"


def test_a_virtual_model_counts_with_its_anthropic_model(table: RoutingTable) -> None:
    reply = run(count(call(table, model="mixed")))
    assert reply.headers["X-GoModel-Token-Count"] == "provider"
    assert reply.headers["X-GoModel-Target"] == "claude"


def test_another_kind_gets_the_marked_estimate(table: RoutingTable, simulator: SimulatorServer) -> None:
    tools = [{"name": "lookup", "description": "Find a thing", "input_schema": {"type": "object"}}]
    plain = run(count(call(table, model="gpt")))
    with_tools = run(count(call(table, model="gpt", tools=tools)))
    assert plain.status == 200
    assert plain.headers["X-GoModel-Token-Count"] == "estimate"
    assert plain.json()["input_tokens"] == extract_features({**BODY}, "anthropic").estimated_input_tokens
    assert with_tools.json()["input_tokens"] > plain.json()["input_tokens"]
    assert not simulator.received("gpt-sim")  # nothing was sent


def test_a_failing_provider_falls_back_to_the_estimate(table: RoutingTable, simulator: SimulatorServer,
                                                       audit_events: list[dict[str, Any]]) -> None:
    simulator.set_fault("claude-sim", {"kind": "status", "status": 529})
    reply = run(count(call(table)))
    assert reply.status == 200
    assert reply.headers["X-GoModel-Token-Count"] == "estimate"
    [event] = audit_events
    assert [a["action"] for a in event["attempts"]] == ["estimated"]


def test_the_providers_refusal_of_the_body_is_the_clients_400(table: RoutingTable, simulator: SimulatorServer) -> None:
    simulator.set_fault("claude-sim", {"kind": "status", "status": 400, "message": "messages.0: bad role"})
    reply = run(count(call(table)))
    assert reply.status == 400
    assert b"bad role" in reply.body


def test_an_embedding_model_is_a_400_naming_the_endpoint(table: RoutingTable) -> None:
    reply = run(count(call(table, model="embed")))
    assert reply.status == 400
    assert b"does not serve the chat endpoint" in reply.body

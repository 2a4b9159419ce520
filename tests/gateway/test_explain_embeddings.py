"""/v1/routing/explain for embeddings in process: the engine's plan for an embeddings body, each target put
through the translation its attempt would run, no upstream call, and the same answer the real request gets."""

from __future__ import annotations

import uuid
from typing import Any

import pytest

from routing.core.embeddings import parse_embeddings_request
from routing.core.features import extract_features
from routing.core.table import ModelSpec, ProviderSpec, RoutingTable, Secret, TargetRef, VirtualModelSpec
from routing.gateway.gateway_error import GatewayError
from routing.gateway.inspection.explain import explain_call
from routing.gateway.records import Call
from routing.simulator import SimulatorServer
from tests.gateway import support
from tests.gateway.support import answer, run

fresh_state = support.fresh_state


@pytest.fixture(scope="module")
def embed_sim() -> Any:
    with SimulatorServer({"defaults": {"dimensions": 16}}) as server:
        yield server


def _embedder(name: str, provider: str, dimensions: int = 16, family: str = "sim-embed") -> ModelSpec:
    return ModelSpec(name=name, provider=provider, upstream=name, input_price=0.02, output_price=None,
                     endpoints=frozenset({"embeddings"}), dimensions=dimensions, family=family)


@pytest.fixture
def table(embed_sim: SimulatorServer) -> RoutingTable:
    embed_sim.reset()
    url = embed_sim.base_url
    return RoutingTable.build(
        version=7,
        providers=[ProviderSpec("sim", "openai", f"{url}/v1"),
                   ProviderSpec("sim-gemini", "gemini", url, api_keys=(Secret("sk-gemini"),)),
                   ProviderSpec("sim-cohere", "cohere", url, api_keys=(Secret("sk-cohere"),))],
        models=[_embedder("embed-gemini", "sim-gemini"), _embedder("embed-cohere", "sim-cohere"),
                _embedder("embed-a", "sim"), _embedder("embed-small", "sim", dimensions=8, family="small"),
                ModelSpec(name="chat", provider="sim", upstream="chat")],
        virtual_models=[VirtualModelSpec("embed-pool", "failover", (TargetRef("embed-gemini"),
                                                                    TargetRef("embed-cohere"),
                                                                    TargetRef("embed-a")))],
    )


def call(table: RoutingTable, body: dict[str, Any]) -> Call:
    parsed = parse_embeddings_request(body)
    return Call(request_id=uuid.uuid4().hex, inbound="openai", key=None, body=body,
                features=extract_features({"model": parsed.model}, "openai"), headers={}, table=table,
                endpoint="embeddings", embeddings=parsed)


def test_it_explains_a_pool_in_attempt_order_without_calling_upstream(table: RoutingTable,
                                                                      embed_sim: SimulatorServer) -> None:
    explained = run(explain_call(call(table, {"model": "embed-pool", "input": ["hello", "world"],
                                              "input_type": "search_query"})))

    assert explained["endpoint"] == "embeddings"
    assert explained["kind"] == "virtual"
    assert explained["config_version"] == 7
    assert explained["candidates"] == ["embed-gemini", "embed-cohere", "embed-a"]
    assert explained["rejected"] == []
    assert "session" not in explained  # embeddings keep no session
    section = explained["embeddings"]
    assert (section["inputs"], section["token_id_inputs"], section["estimated_input_tokens"]) == (2, 0, 4)
    assert (section["dimensions"], section["input_type"]) == (None, "search_query")
    assert section["targets"][1] == {"target": "embed-cohere", "provider_kind": "cohere", "family": "sim-embed",
                                     "dimensions": 16, "vector_size": 16, "serves": True}
    assert explained["selections"][0]["virtual_model"] == "embed-pool"
    assert embed_sim.received() == []


def test_token_ids_exclude_the_formats_that_embed_text_only_as_the_real_request_does(
        table: RoutingTable, embed_sim: SimulatorServer) -> None:
    body = {"model": "embed-pool", "input": [[1, 2, 3]]}

    explained = run(explain_call(call(table, body)))
    real = run(answer(call(table, body)))

    assert explained["candidates"] == ["embed-a"]
    assert [(r["target"], r["reason"], r["param"]) for r in explained["rejected"]] == [
        ("embed-gemini", "token_input", "input"), ("embed-cohere", "token_input", "input")]
    assert "token id" in explained["rejected"][0]["message"]
    assert [t["serves"] for t in explained["embeddings"]["targets"]] == [False, False, True]
    assert real.status == 200, real.body
    assert real.headers["X-GoModel-Target"] == explained["candidates"][0]
    assert [r["model"] for r in embed_sim.received()] == ["embed-a"]  # the refused targets were never called


def test_dimensions_above_a_model_s_vectors_exclude_it(table: RoutingTable) -> None:
    explained = run(explain_call(call(table, {"model": "embed-small", "input": "x", "dimensions": 12})))

    assert explained["candidates"] == []
    [refused] = explained["rejected"]
    assert (refused["target"], refused["reason"], refused["param"]) == ("embed-small", "dimensions", "dimensions")
    assert explained["embeddings"]["targets"][0]["vector_size"] == 12
    shorter = run(explain_call(call(table, {"model": "embed-small", "input": "x", "dimensions": 4})))
    assert shorter["candidates"] == ["embed-small"]
    assert shorter["embeddings"]["targets"][0]["vector_size"] == 4


def test_a_cooling_target_is_ranked_as_the_engine_ranks_it(table: RoutingTable, embed_sim: SimulatorServer) -> None:
    embed_sim.set_fault("embed-gemini", {"kind": "rate_limit", "retry_after": 30})
    served = run(answer(call(table, {"model": "embed-pool", "input": "warm up"})))
    assert served.headers["X-GoModel-Target"] == "embed-cohere"

    explained = run(explain_call(call(table, {"model": "embed-pool", "input": "x"})))

    assert explained["candidates"] == ["embed-cohere", "embed-a"]
    assert explained["selections"][0]["skipped"] == [{"target": "embed-gemini", "reason": "cooling"}]
    assert [t["target"] for t in explained["embeddings"]["targets"]] == ["embed-cohere", "embed-a"]


def test_a_chat_model_is_refused_for_embeddings_as_the_real_request_is(table: RoutingTable) -> None:
    with pytest.raises(GatewayError) as refused:
        run(explain_call(call(table, {"model": "chat", "input": "x"})))
    real = run(answer(call(table, {"model": "chat", "input": "x"})))

    assert (refused.value.status, refused.value.code) == (400, "unsupported_endpoint")
    assert (real.status, real.error["code"]) == (400, "unsupported_endpoint")

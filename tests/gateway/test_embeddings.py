"""/v1/embeddings through the engine: OpenAI, Azure OpenAI and Gemini formats against the simulator, base64,
batches, a virtual model's fallback after a 5xx, cost and usage, the audit event, and the endpoint rule."""

from __future__ import annotations

import base64
import struct
import uuid
from typing import Any

import pytest

from routing.core.embeddings import parse_embeddings_request
from routing.core.features import extract_features
from routing.core.limits import Limits
from routing.core.table import KeySpec, ModelSpec, ProviderSpec, RoutingTable, Secret, TargetRef, VirtualModelSpec
from routing.gateway.records import Call
from routing.simulator import SimulatorServer
from routing.simulator.wire.embeddings import embedding_vector
from tests.gateway import support
from tests.gateway.support import answer, run

fresh_state = support.fresh_state

SIMULATED = {"defaults": {"dimensions": 16}, "models": {"gem-embed": {"dimensions": 16}}}


@pytest.fixture(scope="module")
def embed_sim() -> Any:
    with SimulatorServer(SIMULATED) as server:
        yield server


def _embedder(name: str, provider: str, upstream: str | None = None) -> ModelSpec:
    return ModelSpec(name=name, provider=provider, upstream=upstream or name, input_price=0.02, output_price=None,
                     endpoints=frozenset({"embeddings"}), dimensions=16, family="sim-embed")


@pytest.fixture
def table(embed_sim: SimulatorServer) -> RoutingTable:
    embed_sim.reset()
    url = embed_sim.base_url
    return RoutingTable.build(
        version=1,
        providers=[ProviderSpec("sim", "openai", f"{url}/v1"),
                   ProviderSpec("sim-azure", "azure_openai", url, api_keys=(Secret("sk-azure"),),
                                api_version="2024-10-21"),
                   ProviderSpec("sim-gemini", "gemini", url, api_keys=(Secret("sk-gemini"),)),
                   ProviderSpec("sim-vllm", "vllm", f"{url}/v1")],
        models=[_embedder("embed-a", "sim"), _embedder("embed-b", "sim"),
                _embedder("embed-azure", "sim-azure", "my-deployment"),
                _embedder("embed-gemini", "sim-gemini", "gem-embed"),
                _embedder("embed-vllm", "sim-vllm", "local-embed"),
                ModelSpec(name="chat", provider="sim", upstream="chat")],
        virtual_models=[VirtualModelSpec("embed-pool", "failover", (TargetRef("embed-a"), TargetRef("embed-gemini"))),
                        VirtualModelSpec("embed-openai", "failover", (TargetRef("embed-a"), TargetRef("embed-b")))],
        keys=[KeySpec(id=3, name="k", secret_hash="x", allowed_models=frozenset({"embed-a"}))],
    )


def call(table: RoutingTable, body: dict[str, Any], key: KeySpec | None = None) -> Call:
    parsed = parse_embeddings_request(body)
    return Call(request_id=uuid.uuid4().hex, inbound="openai", key=key, body=body,
                features=extract_features({"model": parsed.model}, "openai"), headers={}, table=table,
                endpoint="embeddings", embeddings=parsed)


def test_a_list_of_strings_to_an_openai_kind_provider(table: RoutingTable, embed_sim: SimulatorServer,
                                                      audit_events: list[dict[str, Any]]) -> None:
    counted_before = support.counted("gomodel_requests_total", endpoint="embeddings", model="embed-a", status="200")
    reply = run(answer(call(table, {"model": "embed-a", "input": ["hello", "world"]})))
    assert reply.status == 200, reply.body
    body = reply.json()
    assert [item["index"] for item in body["data"]] == [0, 1]
    assert body["data"][0]["embedding"] == embedding_vector("embed-a", "hello", 16)
    assert body["model"] == "embed-a"
    assert body["usage"] == {"prompt_tokens": 4, "total_tokens": 4}  # 2 + 2 tokens, as the simulator counts
    assert reply.headers["X-GoModel-Target"] == "embed-a"
    assert reply.headers["X-GoModel-Attempts"] == "1"
    assert float(reply.headers["X-GoModel-Cost-Usd"]) == pytest.approx(4 * 0.02 / 1_000_000)
    assert "X-GoModel-Usage" not in reply.headers  # the provider counted the tokens
    [sent] = embed_sim.received("embed-a")
    assert sent["body"] == {"model": "embed-a", "input": ["hello", "world"], "encoding_format": "float"}
    [event] = audit_events
    assert event["endpoint"] == "embeddings"
    after = support.counted("gomodel_requests_total", endpoint="embeddings", model="embed-a", status="200")
    assert after == counted_before + 1
    assert event["target"] == "embed-a"
    assert event["status"] == 200


def test_base64_is_the_floats_packed_by_the_gateway(table: RoutingTable) -> None:
    reply = run(answer(call(table, {"model": "embed-a", "input": "hello", "encoding_format": "base64"})))
    assert reply.status == 200, reply.body
    packed = base64.b64decode(reply.json()["data"][0]["embedding"])
    floats = struct.unpack(f"<{len(packed) // 4}f", packed)
    assert floats == pytest.approx(embedding_vector("embed-a", "hello", 16), abs=1e-6)


def test_dimensions_and_user_are_passed_on(table: RoutingTable, embed_sim: SimulatorServer) -> None:
    reply = run(answer(call(table, {"model": "embed-a", "input": [[1, 2, 3]], "dimensions": 4, "user": "u1"})))
    assert reply.status == 200, reply.body
    assert len(reply.json()["data"][0]["embedding"]) == 4
    [sent] = embed_sim.received("embed-a")
    assert sent["body"]["dimensions"] == 4
    assert sent["body"]["user"] == "u1"
    assert sent["body"]["input"] == [[1, 2, 3]]


def test_azure_goes_to_the_deployment_with_the_api_version(table: RoutingTable, embed_sim: SimulatorServer) -> None:
    reply = run(answer(call(table, {"model": "embed-azure", "input": "hi"})))
    assert reply.status == 200, reply.body
    assert reply.json()["model"] == "embed-azure"
    [sent] = embed_sim.received("my-deployment")
    assert sent["path"] == "/openai/deployments/my-deployment/embeddings"
    assert "model" not in sent["body"]


def test_gemini_is_translated_both_ways_and_its_usage_is_an_estimate(table: RoutingTable,
                                                                    embed_sim: SimulatorServer) -> None:
    reply = run(answer(call(table, {"model": "embed-gemini", "input": ["hello", "world!!"], "dimensions": 8})))
    assert reply.status == 200, reply.body
    body = reply.json()
    assert body["data"][1]["embedding"] == embedding_vector("gem-embed", "world!!", 8)
    assert body["usage"]["prompt_tokens"] == 2 + 2  # the gateway's estimate, four characters a token
    assert reply.headers["X-GoModel-Usage"] == "estimate"
    [sent] = embed_sim.received("gem-embed")
    assert sent["path"] == "/v1beta/models/gem-embed:batchEmbedContents"
    assert sent["body"]["requests"][0] == {"model": "models/gem-embed", "content": {"parts": [{"text": "hello"}]},
                                           "outputDimensionality": 8}


def test_token_ids_to_gemini_are_a_400_naming_the_input(table: RoutingTable) -> None:
    reply = run(answer(call(table, {"model": "embed-gemini", "input": [[1, 2]]})))
    assert reply.status == 400
    assert reply.error["param"] == "input"


def test_a_5xx_falls_back_to_the_next_target(table: RoutingTable, embed_sim: SimulatorServer,
                                             audit_events: list[dict[str, Any]]) -> None:
    embed_sim.set_fault("embed-a", {"kind": "status", "status": 503, "times": 1})
    reply = run(answer(call(table, {"model": "embed-openai", "input": "hello"})))
    assert reply.status == 200, reply.body
    assert reply.headers["X-GoModel-Target"] == "embed-b"
    assert reply.headers["X-GoModel-Attempts"] == "2"
    [event] = audit_events
    assert [a["target"] for a in event["attempts"]] == ["embed-a", "embed-b"]


def test_a_malformed_answer_is_not_accepted(table: RoutingTable, embed_sim: SimulatorServer) -> None:
    embed_sim.set_fault("embed-a", {"kind": "malformed_json"})
    reply = run(answer(call(table, {"model": "embed-openai", "input": "hello"})))
    assert reply.status == 200, reply.body
    assert reply.headers["X-GoModel-Target"] == "embed-b"


def test_a_chat_model_is_a_400_naming_the_model_and_the_endpoint(table: RoutingTable) -> None:
    reply = run(answer(call(table, {"model": "chat", "input": "hello"})))
    assert reply.status == 400
    assert reply.error["code"] == "unsupported_endpoint"
    assert "`chat` does not serve the embeddings endpoint" in reply.error["message"]


def test_chat_to_an_embedding_model_is_a_400_in_each_envelope(table: RoutingTable) -> None:
    openai = run(answer(support.request(table, "embed-a")))
    assert openai.status == 400
    assert openai.error["code"] == "unsupported_endpoint"
    assert "`embed-a` does not serve the chat endpoint" in openai.error["message"]
    anthropic = run(answer(support.request(table, "embed-pool", inbound="anthropic")))
    assert anthropic.status == 400
    assert anthropic.json()["type"] == "error"
    assert "does not serve the chat endpoint" in anthropic.json()["error"]["message"]


def test_the_key_may_only_use_its_models(table: RoutingTable) -> None:
    key = table.keys_by_hash["x"]
    assert run(answer(call(table, {"model": "embed-a", "input": "x"}, key=key))).status == 200
    refused = run(answer(call(table, {"model": "embed-b", "input": "x"}, key=key)))
    assert refused.status == 403
    assert refused.error["code"] == "model_not_allowed"


def test_an_openai_compatible_preset_serves_embeddings_without_a_key(table: RoutingTable,
                                                                     embed_sim: SimulatorServer) -> None:
    reply = run(answer(call(table, {"model": "embed-vllm", "input": "hello"})))
    assert reply.status == 200, reply.body
    assert reply.json()["data"][0]["embedding"] == embedding_vector("local-embed", "hello", 16)
    [sent] = embed_sim.received("local-embed")
    assert sent["auth"]["present"] is False


def test_a_target_answering_vectors_of_another_size_is_replaced(table: RoutingTable, embed_sim: SimulatorServer,
                                                                audit_events: list[dict[str, Any]]) -> None:
    narrow = ModelSpec(name="embed-narrow", provider="sim", upstream="narrow", endpoints=frozenset({"embeddings"}),
                       dimensions=32, family="sim-embed")  # the simulator answers 16 numbers: a misconfiguration
    both = RoutingTable.build(version=2, providers=list(table.providers.values()),
                              models=[*table.models.values(), narrow],
                              virtual_models=[VirtualModelSpec("mixed", "failover",
                                                               (TargetRef("embed-narrow"), TargetRef("embed-b")))])
    reply = run(answer(call(both, {"model": "mixed", "input": "hello"})))
    assert reply.status == 200, reply.body
    assert reply.headers["X-GoModel-Target"] == "embed-b"
    [event] = audit_events
    assert [(a["target"], a["reason"]) for a in event["attempts"]] == [("embed-narrow", "malformed"), ("embed-b", "ok")]


def test_key_limits_count_embeddings_requests_and_their_tokens(table: RoutingTable, embed_sim: SimulatorServer,
                                                               audit_events: list[dict[str, Any]]) -> None:
    limited = KeySpec(id=41, name="embed-limited", secret_hash="embed-limited", limits=Limits(rpm=2))

    async def scenario() -> list[Any]:
        return [await answer(call(table, {"model": "embed-a", "input": ["hello", "world"]}, key=limited))
                for _ in range(3)]

    first, second, third = run(scenario())
    assert (first.status, second.status, third.status) == (200, 200, 429)
    assert first.headers["x-ratelimit-remaining-requests"] == "1"
    assert third.error["code"] == "rate_limit_exceeded"
    assert len(embed_sim.received("embed-a")) == 2  # the refused request never went upstream
    assert audit_events[-1]["limit"] == "key:rpm"
    assert audit_events[0]["attempts"][0]["usage"]["input_tokens"] == 4  # the provider's count, for tpm and budgets


def test_embeddings_are_spread_over_an_adaptive_pool_not_pinned_to_a_session(table: RoutingTable) -> None:
    # Every embeddings request of a key looks alike to session detection; kept as a session, the pool's first
    # pick would take them all.
    pool = RoutingTable.build(version=3, providers=list(table.providers.values()), models=list(table.models.values()),
                              virtual_models=[VirtualModelSpec("spread", "adaptive",
                                                               (TargetRef("embed-a"), TargetRef("embed-b")))])

    async def scenario() -> set[str]:
        replies = [await answer(call(pool, {"model": "spread", "input": "same text"})) for _ in range(12)]
        return {reply.headers["X-GoModel-Target"] for reply in replies}

    assert run(scenario()) == {"embed-a", "embed-b"}

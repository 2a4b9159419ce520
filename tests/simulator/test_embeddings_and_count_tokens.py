"""The simulator's embeddings (OpenAI, Azure OpenAI, Gemini) and Anthropic count_tokens: deterministic answers of
the configured size, the providers' checks, and the chat faults."""

from __future__ import annotations

import base64
import struct

import httpx2 as httpx
import pytest

from routing.simulator import SimulatorServer
from routing.simulator.wire.embeddings import embedding_vector
from tests.simulator.wire_helpers import ANTHROPIC_HEADERS, AZURE_HEADERS, GEMINI_HEADERS

AZURE_EMBED = "/openai/deployments/emb/embeddings?api-version=2024-10-21"


def test_openai_vectors_are_deterministic_unit_vectors_of_the_default_size(client: httpx.Client) -> None:
    body = {"model": "gpt-test", "input": ["alpha", "beta"]}
    first = client.post("/v1/embeddings", json=body).json()
    again = client.post("/v1/embeddings", json=body).json()
    assert first["data"] == again["data"]
    [a, b] = [item["embedding"] for item in first["data"]]
    assert len(a) == 8
    assert a != b
    assert sum(x * x for x in a) == pytest.approx(1.0, abs=1e-4)
    assert a == embedding_vector("gpt-test", "alpha", 8)
    assert first["usage"] == {"prompt_tokens": 3, "total_tokens": 3}  # alpha 2, beta 1 (four characters a token)


def test_openai_dimensions_and_base64(client: httpx.Client) -> None:
    answer = client.post("/v1/embeddings", json={"model": "gpt-test", "input": "alpha", "dimensions": 3,
                                                 "encoding_format": "base64"}).json()
    packed = base64.b64decode(answer["data"][0]["embedding"])
    assert struct.unpack("<3f", packed) == pytest.approx(embedding_vector("gpt-test", "alpha", 3), abs=1e-6)


@pytest.mark.parametrize(("body", "param"), [
    ({"model": "gpt-test"}, "input"),
    ({"model": "gpt-test", "input": [1.5]}, "input"),
    ({"model": "gpt-test", "input": "x", "dimensions": 0}, "dimensions"),
    ({"model": "gpt-test", "input": "x", "dimensions": 10**17}, "dimensions"),
    ({"model": "gpt-test", "input": "x", "encoding_format": "int8"}, "encoding_format"),
])
def test_openai_refuses_a_bad_body_naming_the_param(client: httpx.Client, body: dict[str, object], param: str) -> None:
    response = client.post("/v1/embeddings", json=body)
    assert response.status_code == 400
    assert response.json()["error"]["param"] == param


def test_azure_embeds_as_the_deployment_and_needs_its_key(client: httpx.Client) -> None:
    answer = client.post(AZURE_EMBED, json={"input": "alpha"}, headers=AZURE_HEADERS).json()
    assert answer["data"][0]["embedding"] == embedding_vector("emb", "alpha", 8)
    assert client.post(AZURE_EMBED, json={"input": "alpha"}).status_code == 401


def test_gemini_batch_embeds_with_output_dimensionality(client: httpx.Client) -> None:
    body = {"requests": [{"model": "models/gemini-test", "content": {"parts": [{"text": "alpha"}]},
                          "outputDimensionality": 5},
                         {"model": "models/gemini-test", "content": {"parts": [{"text": "beta"}]},
                          "outputDimensionality": 5}]}
    answer = client.post("/v1beta/models/gemini-test:batchEmbedContents", json=body, headers=GEMINI_HEADERS).json()
    assert [e["values"] for e in answer["embeddings"]] == [embedding_vector("gemini-test", "alpha", 5),
                                                           embedding_vector("gemini-test", "beta", 5)]
    assert "usage" not in answer
    assert "usageMetadata" not in answer


def test_the_configured_dimensions_apply() -> None:
    with SimulatorServer({"models": {"wide": {"dimensions": 32}}}) as server, httpx.Client(
            base_url=server.base_url) as client:
        answer = client.post("/v1/embeddings", json={"model": "wide", "input": "x"}).json()
    assert len(answer["data"][0]["embedding"]) == 32


def test_faults_apply_to_embeddings(client: httpx.Client, sim: SimulatorServer) -> None:
    sim.set_fault("gpt-test", [{"kind": "status", "status": 503, "times": 1}, {"kind": "malformed_json", "times": 1}])
    failed = client.post("/v1/embeddings", json={"model": "gpt-test", "input": "x"})
    assert failed.status_code == 503
    corrupt = client.post("/v1/embeddings", json={"model": "gpt-test", "input": "x"})
    assert corrupt.status_code == 200
    with pytest.raises(ValueError):
        corrupt.json()
    assert client.post("/v1/embeddings", json={"model": "gpt-test", "input": "x"}).status_code == 200
    assert [r["fault"] for r in sim.received("gpt-test")] == ["status", "malformed_json", None]
    assert sim.received("gpt-test")[0]["endpoint"] == "embeddings"


def test_count_tokens_counts_deterministically_and_refuses_extra_fields(client: httpx.Client,
                                                                       sim: SimulatorServer) -> None:
    body = {"model": "claude-test", "messages": [{"role": "user", "content": "Hello there"}]}
    short = client.post("/v1/messages/count_tokens", json=body, headers=ANTHROPIC_HEADERS).json()
    longer = client.post("/v1/messages/count_tokens", headers=ANTHROPIC_HEADERS,
                         json={**body, "system": "A much longer system prompt than before."}).json()
    assert short["input_tokens"] > 0
    assert longer["input_tokens"] > short["input_tokens"]
    extra = client.post("/v1/messages/count_tokens", json={**body, "max_tokens": 5}, headers=ANTHROPIC_HEADERS)
    assert extra.status_code == 400
    no_key = client.post("/v1/messages/count_tokens", json=body, headers={"anthropic-version": "2023-06-01"})
    assert no_key.status_code == 401
    sim.set_fault("claude-test", {"kind": "rate_limit", "times": 1})
    limited = client.post("/v1/messages/count_tokens", json=body, headers=ANTHROPIC_HEADERS)
    assert limited.status_code == 429
    assert limited.json()["type"] == "error"

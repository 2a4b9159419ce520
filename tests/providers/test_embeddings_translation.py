"""Embeddings and count_tokens translation, both ways, for each provider format; malformed answers refused."""

from __future__ import annotations

import base64
import dataclasses
import json
import struct
from typing import Any

import pytest

from routing.core.embeddings import parse_embeddings_request
from routing.core.table import ModelSpec, ProviderSpec
from routing.providers import CapabilityError, MalformedResponse
from routing.providers.anthropic.count_tokens import build_count_tokens_request, parse_count_tokens
from routing.providers.embeddings import build_embeddings_request, parse_embeddings_response, serves_embeddings

OPENAI = ProviderSpec("o", "openai", "https://api.openai.com/v1")
AZURE = ProviderSpec("a", "azure_openai", "https://res.openai.azure.com/openai", api_version="2024-06-01")
GEMINI = ProviderSpec("g", "gemini", "https://generativelanguage.googleapis.com")
ANTHROPIC = ProviderSpec("an", "anthropic", "https://api.anthropic.com")
MODEL = ModelSpec(name="public", provider="o", upstream="text-embedding-3-small", endpoints=frozenset({"embeddings"}),
                  dimensions=4, family="te3")


def request(**body: Any) -> Any:
    return parse_embeddings_request({"model": "public", **body})


def test_openai_request_carries_every_field_and_always_asks_for_floats() -> None:
    built = build_embeddings_request(OPENAI, MODEL, request(input=["a", [1, 2]], dimensions=2,
                                                            encoding_format="base64", user="u"), "sk-x")
    assert built.url == "https://api.openai.com/v1/embeddings"
    assert built.headers["Authorization"] == "Bearer sk-x"
    assert built.json == {"model": "text-embedding-3-small", "input": ["a", [1, 2]], "encoding_format": "float",
                          "dimensions": 2, "user": "u"}
    assert "sk-x" not in repr(built)


def test_azure_request_goes_to_the_deployment_without_a_model() -> None:
    built = build_embeddings_request(AZURE, MODEL, request(input="a"), "az-key")
    assert built.url == ("https://res.openai.azure.com/openai/deployments/text-embedding-3-small/embeddings"
                         "?api-version=2024-06-01")
    assert built.headers["api-key"] == "az-key"
    assert "model" not in built.json


def test_gemini_request_is_one_entry_per_input() -> None:
    built = build_embeddings_request(GEMINI, MODEL, request(input=["a", "b"], dimensions=3), "g-key")
    assert built.url == ("https://generativelanguage.googleapis.com/v1beta/models/text-embedding-3-small"
                         ":batchEmbedContents")
    assert built.headers["x-goog-api-key"] == "g-key"
    assert built.json["requests"][1] == {"model": "models/text-embedding-3-small",
                                         "content": {"parts": [{"text": "b"}]}, "outputDimensionality": 3}


def test_token_ids_to_gemini_and_any_input_to_anthropic_are_refused_before_sending() -> None:
    with pytest.raises(CapabilityError) as refused:
        build_embeddings_request(GEMINI, MODEL, request(input=["a", [1, 2]]), "k")
    assert refused.value.param == "input[1]"
    with pytest.raises(CapabilityError) as no_endpoint:
        build_embeddings_request(ANTHROPIC, MODEL, request(input="a"), "k")
    assert no_endpoint.value.param == "model"
    assert not serves_embeddings("anthropic")


def openai_answer(*vectors: list[float], usage: Any = None, order: list[int] | None = None) -> bytes:
    indexes = order or list(range(len(vectors)))
    data = [{"object": "embedding", "index": i, "embedding": vectors[i]} for i in indexes]
    body: dict[str, Any] = {"object": "list", "data": data, "model": "text-embedding-3-small"}
    if usage is not None:
        body["usage"] = usage
    return json.dumps(body).encode()


def test_openai_answer_is_reordered_by_index_renamed_and_its_usage_kept() -> None:
    data = openai_answer([0.1, 0.2], [0.3, 0.4], usage={"prompt_tokens": 7, "total_tokens": 7}, order=[1, 0])
    parsed = parse_embeddings_response("openai", data, request(input=["a", "b"]), "public")
    assert [item["embedding"] for item in parsed.client_body["data"]] == [[0.1, 0.2], [0.3, 0.4]]
    assert parsed.client_body["model"] == "public"
    assert parsed.usage.input_tokens == 7
    assert not parsed.usage_estimated


def test_base64_is_little_endian_float32() -> None:
    parsed = parse_embeddings_response("openai", openai_answer([0.5, -1.0], usage={"prompt_tokens": 1}),
                                       request(input="a", encoding_format="base64"), "public")
    raw = base64.b64decode(parsed.client_body["data"][0]["embedding"])
    assert struct.unpack("<2f", raw) == (0.5, -1.0)


def test_gemini_answer_becomes_openai_with_an_estimated_usage() -> None:
    data = json.dumps({"embeddings": [{"values": [1, 2]}, {"values": [3, 4]}]}).encode()
    parsed = parse_embeddings_response("gemini", data, request(input=["12345678", "1234"]), "public")
    assert parsed.client_body == {"object": "list", "model": "public",
                                  "data": [{"object": "embedding", "index": 0, "embedding": [1.0, 2.0]},
                                           {"object": "embedding", "index": 1, "embedding": [3.0, 4.0]}],
                                  "usage": {"prompt_tokens": 3, "total_tokens": 3}}
    assert parsed.usage_estimated


@pytest.mark.parametrize(("kind", "data"), [
    ("openai", b"not json"),
    ("openai", openai_answer([0.1])),  # one vector for two inputs
    ("openai", json.dumps({"data": [{"index": 0, "embedding": [0.1]}, {"index": 0, "embedding": [0.2]}]}).encode()),
    ("openai", json.dumps({"data": [{"index": 0, "embedding": [0.1]}, {"index": 1, "embedding": ["x"]}]}).encode()),
    ("openai", json.dumps({"data": [{"index": 0, "embedding": [0.1]}, {"index": 1, "embedding": []}]}).encode()),
    ("openai", b'{"data": [{"index": 0, "embedding": [0.1]}, {"index": 1, "embedding": [NaN]}]}'),
    ("openai", b'{"data": [{"index": 0, "embedding": [0.1]}, {"index": 1, "embedding": [1, -Infinity]}]}'),
    ("openai", json.dumps({"data": [{"index": 0, "embedding": [0.1]}, {"index": 1, "embedding": [True]}]}).encode()),
    ("gemini", json.dumps({"embeddings": [{"values": [1]}]}).encode()),
    ("gemini", json.dumps({"embeddings": [{"values": [1]}, {"nothing": 1}]}).encode()),
])
def test_a_malformed_answer_is_refused(kind: str, data: bytes) -> None:
    with pytest.raises(MalformedResponse):
        parse_embeddings_response(kind, data, request(input=["a", "b"]), "public")


def test_count_tokens_sends_only_the_fields_the_endpoint_takes() -> None:
    claude = ModelSpec(name="c", provider="an", upstream="claude-x")
    body = {"model": "c", "max_tokens": 10, "stream": True, "system": "s", "tools": [],
            "messages": [{"role": "user", "content": "hi"}]}
    allowing = dataclasses.replace(ANTHROPIC, allowed_betas=frozenset({"b1"}))
    built = build_count_tokens_request(allowing, claude, body, "sk-ant", {"anthropic-beta": "b1", "other": "x"})
    assert built.url == "https://api.anthropic.com/v1/messages/count_tokens"
    assert built.json == {"model": "claude-x", "system": "s", "tools": [], "messages": body["messages"]}
    assert built.headers["x-api-key"] == "sk-ant"
    assert built.headers["anthropic-beta"] == "b1"
    assert "other" not in built.headers
    assert parse_count_tokens(b'{"input_tokens": 12}') == 12
    with pytest.raises(MalformedResponse):
        parse_count_tokens(b'{"tokens": 12}')


def test_more_dimensions_than_the_model_makes_are_refused_before_sending() -> None:
    with pytest.raises(CapabilityError) as refused:
        build_embeddings_request(OPENAI, MODEL, request(input="a", dimensions=5), "k")
    assert refused.value.param == "dimensions"
    assert build_embeddings_request(OPENAI, MODEL, request(input="a", dimensions=4), "k").json["dimensions"] == 4


def test_openai_compatible_presets_use_their_base_url_and_rules() -> None:
    mistral = ProviderSpec("m", "mistral", "")
    built = build_embeddings_request(mistral, MODEL, request(input="a", dimensions=2, user="u"), "mk")
    assert built.url == "https://api.mistral.ai/v1/embeddings"
    assert built.headers["Authorization"] == "Bearer mk"
    assert built.json == {"model": "text-embedding-3-small", "input": ["a"], "encoding_format": "float",
                          "output_dimension": 2}
    local = build_embeddings_request(ProviderSpec("l", "ollama", ""), MODEL, request(input="a"), "")
    assert local.url == "http://localhost:11434/v1/embeddings"
    assert "Authorization" not in local.headers
    parsed = parse_embeddings_response("vllm", openai_answer([0.1], usage={"prompt_tokens": 2}), request(input="a"),
                                       "public")
    assert parsed.usage.input_tokens == 2
    assert not serves_embeddings("groq")
    assert serves_embeddings("together")


def test_a_vector_of_another_size_than_expected_is_refused() -> None:
    data = openai_answer([0.1, 0.2], [0.3, 0.4, 0.5], usage={"prompt_tokens": 1})
    with pytest.raises(MalformedResponse):
        parse_embeddings_response("openai", data, request(input=["a", "b"]), "public", dimensions=2)
    fitting = openai_answer([0.1, 0.2], [0.3, 0.4], usage={"prompt_tokens": 1})
    assert parse_embeddings_response("openai", fitting, request(input=["a", "b"]), "public", dimensions=2).usage

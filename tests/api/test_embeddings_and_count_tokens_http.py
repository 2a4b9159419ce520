"""Through Django's test client: /v1/embeddings and /v1/messages/count_tokens refuse bad bodies naming the field
in the client's envelope, and /v1/models lists the endpoints each name serves."""

from __future__ import annotations

import json
from typing import Any

import pytest
from django.test import Client

from routing.config.runtime import runtime
from routing.core.table import KeySpec, ModelSpec, ProviderSpec, RoutingTable, TargetRef, VirtualModelSpec
from routing.models import hash_secret

pytestmark = pytest.mark.django_db

SECRET = "gm-embeddings-test-key-0123456789"
AUTH = {"HTTP_AUTHORIZATION": f"Bearer {SECRET}"}


@pytest.fixture(autouse=True)
def table() -> RoutingTable:
    built = RoutingTable.build(
        version=1,
        providers=[ProviderSpec("p", "openai", "http://127.0.0.1:9/v1")],
        models=[ModelSpec(name="chat", provider="p", upstream="c"),
                ModelSpec(name="embed", provider="p", upstream="e", endpoints=frozenset({"embeddings"}),
                          dimensions=8, family="f")],
        virtual_models=[VirtualModelSpec("embed-pool", "failover", (TargetRef("embed"),))],
        keys=[KeySpec(id=1, name="k", secret_hash=hash_secret(SECRET))],
    )
    runtime.swap(built)
    return built


def post(client: Client, path: str, body: Any, **extra: Any) -> Any:
    return client.post(path, json.dumps(body), content_type="application/json", **AUTH, **extra)


@pytest.mark.parametrize(("body", "param"), [
    ({"input": "x"}, "model"),
    ({"model": "embed"}, "input"),
    ({"model": "embed", "input": []}, "input"),
    ({"model": "embed", "input": ["ok", 3]}, "input[1]"),
    ({"model": "embed", "input": ["ok", ""]}, "input[1]"),
    ({"model": "embed", "input": "x", "encoding_format": "int8"}, "encoding_format"),
    ({"model": "embed", "input": "x", "dimensions": 0}, "dimensions"),
    ({"model": "embed", "input": "x", "dimensions": True}, "dimensions"),
    ({"model": "embed", "input": "x", "user": 5}, "user"),
])
def test_a_bad_embeddings_body_is_a_400_naming_the_field(client: Client, body: dict[str, Any], param: str) -> None:
    response = post(client, "/v1/embeddings", body)
    assert response.status_code == 400
    error = response.json()["error"]
    assert error["param"] == param
    assert error["type"] == "invalid_request_error"


def test_embeddings_needs_a_key(client: Client) -> None:
    response = client.post("/v1/embeddings", json.dumps({"model": "embed", "input": "x"}),
                           content_type="application/json")
    assert response.status_code == 401


def test_a_chat_model_asked_for_embeddings_is_a_400(client: Client) -> None:
    response = post(client, "/v1/embeddings", {"model": "chat", "input": "x"})
    assert response.status_code == 400
    assert response.json()["error"]["code"] == "unsupported_endpoint"
    assert response["X-Request-Id"]


def test_count_tokens_refuses_a_bad_body_in_anthropics_envelope(client: Client) -> None:
    response = post(client, "/v1/messages/count_tokens", {"model": "chat", "messages": []})
    assert response.status_code == 400
    body = response.json()
    assert body["type"] == "error"
    assert "messages" in body["error"]["message"]


def test_count_tokens_estimates_for_an_openai_kind_model(client: Client) -> None:
    response = post(client, "/v1/messages/count_tokens",
                    {"model": "chat", "messages": [{"role": "user", "content": "x" * 40}]})
    assert response.status_code == 200
    assert response.json() == {"input_tokens": 10}
    assert response["X-GoModel-Token-Count"] == "estimate"


def test_models_lists_the_endpoints_each_name_serves(client: Client) -> None:
    openai = {m["id"]: m["endpoints"] for m in client.get("/v1/models", **AUTH).json()["data"]}
    assert openai == {"chat": ["chat"], "embed": ["embeddings"], "embed-pool": ["embeddings"]}
    anthropic = client.get("/v1/models", HTTP_ANTHROPIC_VERSION="2023-06-01", **AUTH).json()["data"]
    assert {m["id"]: m["endpoints"] for m in anthropic} == openai

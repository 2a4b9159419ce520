"""Through Django's test client: /v1/routing/explain answers for an embeddings body (``?endpoint=embeddings``, or
a body without ``messages`` whose model serves embeddings), refuses a bad one naming the field, and still explains
chat bodies as before."""

from __future__ import annotations

import json
from typing import Any

import pytest
from django.test import Client

from routing.config.runtime import runtime
from routing.core.table import KeySpec, ModelSpec, ProviderSpec, RoutingTable, TargetRef, VirtualModelSpec
from routing.models import hash_secret

pytestmark = pytest.mark.django_db

SECRET = "gm-explain-embeddings-key-0123456789"
AUTH = {"HTTP_AUTHORIZATION": f"Bearer {SECRET}"}


@pytest.fixture(autouse=True)
def table() -> RoutingTable:
    built = RoutingTable.build(
        version=1,
        providers=[ProviderSpec("p", "openai", "http://127.0.0.1:9/v1"),
                   ProviderSpec("co", "cohere", "http://127.0.0.1:9")],
        models=[ModelSpec(name="chat", provider="p", upstream="c"),
                ModelSpec(name="embed", provider="p", upstream="e", endpoints=frozenset({"embeddings"}),
                          dimensions=8, family="f"),
                ModelSpec(name="co-embed", provider="co", upstream="embed-v4.0", endpoints=frozenset({"embeddings"}),
                          dimensions=8, family="f")],
        virtual_models=[VirtualModelSpec("embed-pool", "failover", (TargetRef("co-embed"), TargetRef("embed")))],
        keys=[KeySpec(id=1, name="k", secret_hash=hash_secret(SECRET))],
    )
    runtime.swap(built)
    return built


def post(client: Client, path: str, body: Any, **extra: Any) -> Any:
    return client.post(path, json.dumps(body), content_type="application/json", **AUTH, **extra)


@pytest.mark.parametrize("path", ["/v1/routing/explain?endpoint=embeddings", "/v1/routing/explain"])
def test_it_explains_an_embeddings_body(client: Client, path: str) -> None:
    response = post(client, path, {"model": "embed-pool", "input": ["a", [1, 2]]})

    assert response.status_code == 200
    explained = response.json()
    assert explained["endpoint"] == "embeddings"
    assert explained["candidates"] == ["embed"]
    assert [(r["target"], r["reason"], r["param"]) for r in explained["rejected"]] == [
        ("co-embed", "token_input", "input[1]")]
    assert explained["embeddings"]["token_id_inputs"] == 1


@pytest.mark.parametrize(("body", "param"), [
    ({"model": "embed", "input": []}, "input"),
    ({"model": "embed", "input": "x", "dimensions": 0}, "dimensions"),
    ({"model": "embed", "input": "x", "input_type": 5}, "input_type"),
])
def test_a_bad_embeddings_body_is_a_400_naming_the_field(client: Client, body: dict[str, Any], param: str) -> None:
    response = post(client, "/v1/routing/explain?endpoint=embeddings", body)

    assert response.status_code == 400
    assert response.json()["error"]["param"] == param
    assert response.json()["error"]["type"] == "invalid_request_error"


def test_an_unknown_endpoint_is_a_400_naming_it(client: Client) -> None:
    response = post(client, "/v1/routing/explain?endpoint=images", {"model": "embed", "input": "x"})

    assert response.status_code == 400
    assert response.json()["error"]["param"] == "endpoint"


def test_a_chat_model_asked_for_embeddings_is_refused_naming_the_endpoint(client: Client) -> None:
    response = post(client, "/v1/routing/explain?endpoint=embeddings", {"model": "chat", "input": "x"})

    assert response.status_code == 400
    assert response.json()["error"]["code"] == "unsupported_endpoint"


def test_a_chat_body_is_still_explained_as_chat(client: Client) -> None:
    response = post(client, "/v1/routing/explain", {"model": "chat", "messages": [{"role": "user", "content": "hi"}]})

    assert response.status_code == 200
    assert response.json()["endpoint"] == "chat"
    assert response.json()["candidates"] == ["chat"]
    assert "embeddings" not in response.json()


def test_an_embeddings_explanation_needs_a_key(client: Client) -> None:
    response = client.post("/v1/routing/explain?endpoint=embeddings", json.dumps({"model": "embed", "input": []}),
                           content_type="application/json")

    assert response.status_code == 401

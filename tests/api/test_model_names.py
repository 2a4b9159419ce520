"""Help with model names on /v1: a 404 suggests the nearest names the key may use (in the client's envelope),
slash-free aliases are listed by /v1/models, and strengths are listed as the tags they are."""

from __future__ import annotations

import json
from typing import Any

import pytest
from django.test import Client

from routing.config.runtime import runtime
from routing.core.table import KeySpec, ModelSpec, ProviderSpec, RoutingTable, TierRouteSpec
from routing.models import hash_secret

pytestmark = pytest.mark.django_db

SECRET = "gm-names-test-key-0123456789"
LIMITED_SECRET = "gm-names-limited-key-0123456789"
KEY = KeySpec(id=21, name="full", secret_hash=hash_secret(SECRET))
LIMITED = KeySpec(id=22, name="limited", secret_hash=hash_secret(LIMITED_SECRET),
                  allowed_models=frozenset({"sim-openai/gpt-4o"}))


@pytest.fixture(autouse=True)
def table() -> RoutingTable:
    compiled = RoutingTable.build(
        version=1,
        providers=[ProviderSpec("sim-openai", "openai", "http://127.0.0.1:9/v1"),
                   ProviderSpec("sim-anthropic", "anthropic", "http://127.0.0.1:9")],
        models=[ModelSpec(name="sim-openai/gpt-4o", provider="sim-openai", upstream="gpt-4o",
                          strengths=frozenset({"fast", "code", "reasoning", "general"})),
                ModelSpec(name="sim-anthropic/claude", provider="sim-anthropic", upstream="claude")],
        tier_routes=[TierRouteSpec("normal", "sim-openai/gpt-4o", "sim-anthropic/claude")],
        keys=[KEY, LIMITED],
    )
    runtime.swap(compiled)
    return compiled


def post(client: Client, path: str, model: str, secret: str = SECRET) -> Any:
    body = {"model": model, "max_tokens": 8, "messages": [{"role": "user", "content": "hi"}]}
    return client.post(path, json.dumps(body), content_type="application/json",
                       HTTP_AUTHORIZATION=f"Bearer {secret}")


def test_it_suggests_the_nearest_name_for_a_misspelt_model_in_the_openai_envelope(client: Client) -> None:
    response = post(client, "/v1/chat/completions", "nomral")
    assert response.status_code == 404
    error = response.json()["error"]
    assert error["message"] == ("The model `nomral` does not exist or you do not have access to it. "
                                "Did you mean `normal`?")
    assert (error["code"], error["param"]) == ("model_not_found", "model")


def test_it_suggests_in_the_anthropic_envelope_on_messages(client: Client) -> None:
    response = post(client, "/v1/messages", "sim-anthropic/cluade")
    assert response.status_code == 404
    body = response.json()
    assert body["type"] == "error"
    assert body["error"]["type"] == "not_found_error"
    assert body["error"]["message"].endswith("Did you mean `sim-anthropic/claude`?")


def test_it_never_suggests_a_name_the_key_may_not_use(client: Client) -> None:
    response = post(client, "/v1/chat/completions", "sim-anthropic/claud", secret=LIMITED_SECRET)
    assert response.status_code == 404
    message = response.json()["error"]["message"]
    assert "claude" not in message.replace("claud`", "")
    assert "normal" not in message
    allowed = post(client, "/v1/chat/completions", "sim-openai/gpt4o", secret=LIMITED_SECRET)
    assert allowed.json()["error"]["message"].endswith("Did you mean `sim-openai/gpt-4o`?")


def test_it_says_nothing_more_when_no_name_is_close(client: Client) -> None:
    response = post(client, "/v1/chat/completions", "zzzzzzzz")
    assert response.json()["error"]["message"] == (
        "The model `zzzzzzzz` does not exist or you do not have access to it.")


def test_models_lists_each_slash_free_alias_as_the_model(client: Client) -> None:
    response = client.get("/v1/models", HTTP_AUTHORIZATION=f"Bearer {SECRET}")
    entries = {entry["id"]: entry for entry in response.json()["data"]}
    assert list(entries) == ["normal", "sim-openai/gpt-4o", "sim-anthropic/claude", "sim-openai--gpt-4o",
                             "sim-anthropic--claude"]
    alias = entries["sim-anthropic--claude"]
    assert alias["owned_by"] == "sim-anthropic"
    assert alias["endpoints"] == ["chat"]


def test_a_key_sees_only_the_aliases_of_the_models_it_may_use(client: Client) -> None:
    response = client.get("/v1/models", HTTP_AUTHORIZATION=f"Bearer {LIMITED_SECRET}")
    assert [entry["id"] for entry in response.json()["data"]] == ["sim-openai/gpt-4o", "sim-openai--gpt-4o"]


def test_models_lists_strengths_as_tags_categories_first(client: Client) -> None:
    response = client.get("/v1/models", HTTP_AUTHORIZATION=f"Bearer {SECRET}")
    entries = {entry["id"]: entry for entry in response.json()["data"]}
    assert entries["sim-openai/gpt-4o"]["strengths"] == ["code", "general", "fast", "reasoning"]
    assert entries["sim-openai--gpt-4o"]["strengths"] == ["code", "general", "fast", "reasoning"]

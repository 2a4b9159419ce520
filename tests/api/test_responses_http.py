"""Through Django's test client: /v1/responses refuses bad input naming the field in OpenAI's envelope, keeps
previous_response_id to the key that stored the response and to its retention, and the purge removes only
expired responses. Nothing here reaches a provider: the one provider listens nowhere.

The tests of stored responses use a transactional test database: the store reads from a worker thread.
"""

from __future__ import annotations

import datetime as dt
import io
import json
from typing import Any

import pytest
from django.core.management import call_command
from django.test import Client

from routing.config.runtime import runtime
from routing.core.table import KeySpec, ModelSpec, ProviderSpec, RoutingTable
from routing.gateway.stored_responses import issue_response_id
from routing.models import StoredResponse, hash_secret
from routing.simulator import unused_loopback_url
from routing.tasks import purge_expired_responses

pytestmark = pytest.mark.django_db
stores = pytest.mark.django_db(transaction=True)  # the store reads in a worker thread: rows must be committed

ALICE, BOB = "gm-responses-alice-0123456789", "gm-responses-bob-0123456789"


@pytest.fixture(autouse=True)
def table() -> RoutingTable:
    built = RoutingTable.build(
        version=1,
        providers=[ProviderSpec("p", "anthropic", unused_loopback_url())],
        models=[ModelSpec(name="chat", provider="p", upstream="c"),
                ModelSpec(name="embed", provider="p", upstream="e", endpoints=frozenset({"embeddings"}),
                          dimensions=8, family="f")],
        keys=[KeySpec(id=1, name="alice", secret_hash=hash_secret(ALICE)),
              KeySpec(id=2, name="bob", secret_hash=hash_secret(BOB))],
    )
    runtime.swap(built)
    return built


def post(client: Client, body: Any, secret: str = ALICE) -> Any:
    return client.post("/v1/responses", json.dumps(body), content_type="application/json",
                       HTTP_AUTHORIZATION=f"Bearer {secret}")


def stored(key_id: int, *, expires_in: dt.timedelta = dt.timedelta(days=1)) -> str:
    now = dt.datetime.now(tz=dt.UTC)
    # Made an hour ago, for this key: no wait for a write under way.
    response_id = issue_response_id(key_scope=key_id, stored=True, now_unix=now.timestamp() - 3600)
    StoredResponse.objects.create(
        response_id=response_id, key_scope=str(key_id), model="chat", instructions=None,
        input_items=[{"type": "message", "role": "user", "content": "earlier"}],
        output_items=[{"type": "message", "role": "assistant", "content": [{"type": "output_text", "text": "ok"}]}],
        created_at=now - dt.timedelta(hours=1), expires_at=now + expires_in)
    return response_id


@pytest.mark.parametrize(("body", "param"), [
    ({"input": "x"}, "model"),
    ({"model": "chat"}, "input"),
    ({"model": "chat", "input": "x", "tools": [{"type": "web_search_preview"}]}, "tools[0].type"),
    ({"model": "chat", "input": "x", "background": True}, "background"),
    ({"model": "chat", "input": "x", "conversation": {"id": "conv_1"}}, "conversation"),
    ({"model": "chat", "input": [{"type": "computer_call_output", "call_id": "c"}]}, "input[0].type"),
    ({"model": "chat", "input": "x", "text": {"format": {"type": "json_schema", "schema": {}}}}, "text.format.name"),
    ({"model": "chat", "input": [{"type": "reasoning", "summary": []}]}, "input"),
    ({"model": "embed", "input": "x"}, "model"),
])
def test_bad_input_is_a_400_naming_the_field(client: Client, body: dict[str, Any], param: str) -> None:
    response = post(client, body)
    assert response.status_code == 400
    error = response.json()["error"]
    assert (error["param"], error["type"]) == (param, "invalid_request_error")
    assert response["X-Request-Id"]


def test_it_needs_a_key_post_and_json(client: Client) -> None:
    assert client.post("/v1/responses", "{}", content_type="application/json").status_code == 401
    assert client.get("/v1/responses", HTTP_AUTHORIZATION=f"Bearer {ALICE}").status_code == 405
    broken = client.post("/v1/responses", "{not json", content_type="application/json",
                         HTTP_AUTHORIZATION=f"Bearer {ALICE}")
    assert (broken.status_code, broken.json()["error"]["code"]) == (400, "invalid_json")
    unknown = post(client, {"model": "nope", "input": "x"})
    assert (unknown.status_code, unknown.json()["error"]["code"]) == (404, "model_not_found")


@stores
def test_a_previous_response_belongs_to_the_key_that_stored_it(client: Client) -> None:
    mine = stored(1)
    refused = post(client, {"model": "chat", "input": "more", "previous_response_id": mine}, secret=BOB)
    assert refused.status_code == 400
    assert refused.json()["error"]["param"] == "previous_response_id"
    assert refused.json()["error"]["code"] == "previous_response_not_found"
    # Its owner gets past the lookup: the request goes on to the provider (which listens nowhere).
    accepted = post(client, {"model": "chat", "input": "more", "previous_response_id": mine}, secret=ALICE)
    assert accepted.status_code in (502, 503, 504)


@stores
def test_an_unknown_or_expired_previous_response_is_the_same_400(client: Client) -> None:
    expired = stored(1, expires_in=-dt.timedelta(seconds=1))
    for response_id in (expired, "resp_unknown", issue_response_id(key_scope=1, stored=True, now_unix=0)):
        refused = post(client, {"model": "chat", "input": "x", "previous_response_id": response_id})
        assert refused.status_code == 400
        assert refused.json()["error"]["param"] == "previous_response_id"


@stores
def test_the_purge_deletes_only_expired_responses() -> None:
    live, old = stored(1), stored(1, expires_in=-dt.timedelta(minutes=1))
    out = io.StringIO()
    call_command("purge_responses", stdout=out)
    assert "deleted 1 stored responses" in out.getvalue()
    assert list(StoredResponse.objects.values_list("response_id", flat=True)) == [live]
    stored(2, expires_in=-dt.timedelta(minutes=1))
    assert purge_expired_responses() == 1
    assert not StoredResponse.objects.filter(response_id=old).exists()


def test_models_keep_listing_chat_for_the_models_that_serve_responses(client: Client) -> None:
    listed = client.get("/v1/models", HTTP_AUTHORIZATION=f"Bearer {ALICE}").json()["data"]
    assert {entry["id"]: entry["endpoints"] for entry in listed} == {"chat": ["chat"], "embed": ["embeddings"]}


def test_explain_reads_a_responses_body_as_its_chat_equivalent(client: Client) -> None:
    body = {"model": "chat", "input": [{"role": "user", "content": [
        {"type": "input_text", "text": "what is this?"}, {"type": "input_image", "image_url": "https://x/y.png"}]}],
        "tools": [{"type": "function", "name": "lookup", "parameters": {"type": "object"}}]}
    explained = client.post("/v1/routing/explain?endpoint=responses", json.dumps(body),
                            content_type="application/json", HTTP_AUTHORIZATION=f"Bearer {ALICE}")
    assert explained.status_code == 200
    data = explained.json()
    assert (data["endpoint"], data["model"], data["kind"]) == ("responses", "chat", "model")
    refused = client.post("/v1/routing/explain?endpoint=responses", json.dumps({**body, "background": True}),
                          content_type="application/json", HTTP_AUTHORIZATION=f"Bearer {ALICE}")
    assert (refused.status_code, refused.json()["error"]["param"]) == (400, "background")

"""/v1/routing/explain?endpoint=responses reads a body's previous_response_id and item references as the engine
does: after the key's access to the model, refused at once when the id is not this key's, and with the stored
conversation in front (the referenced items in place) when it is. Nothing here reaches a provider.

A transactional test database: the store reads in a worker thread.
"""

from __future__ import annotations

import asyncio
import json
import time
from typing import Any

import pytest
from django.test import Client

from routing.clients import responses_store
from routing.config.runtime import runtime
from routing.core.table import KeySpec, ModelSpec, ProviderSpec, RoutingTable, TierRouteSpec
from routing.gateway.stored_responses import issue_response_id
from routing.models import hash_secret
from routing.simulator import unused_loopback_url
from tests import unreachable_database

pytestmark = pytest.mark.django_db(transaction=True)
database_unreachable = unreachable_database.database_unreachable

ALICE, BOB = "gm-explain-alice-0123456789", "gm-explain-bob-0123456789"


@pytest.fixture(autouse=True)
def table() -> RoutingTable:
    built = RoutingTable.build(
        version=1,
        providers=[ProviderSpec("p", "anthropic", unused_loopback_url())],
        models=[ModelSpec(name="chat", provider="p", upstream="c"),
                ModelSpec(name="other", provider="p", upstream="o")],
        tier_routes=[TierRouteSpec("normal", easy="chat", hard="other")],
        keys=[KeySpec(id=1, name="alice", secret_hash=hash_secret(ALICE)),
              KeySpec(id=2, name="bob", secret_hash=hash_secret(BOB), allowed_models=frozenset({"chat"}))],
    )
    runtime.swap(built)
    return built


def explain(client: Client, body: dict[str, Any], secret: str = ALICE) -> Any:
    return client.post("/v1/routing/explain?endpoint=responses", json.dumps(body), content_type="application/json",
                       HTTP_AUTHORIZATION=f"Bearer {secret}")


def test_it_refuses_model_access_before_reading_the_previous_response(client: Client,
                                                                      database_unreachable: None) -> None:
    previous = issue_response_id(key_scope=2, stored=True, now_unix=time.time() - 3600)
    refused = explain(client, {"model": "other", "input": "x", "previous_response_id": previous}, secret=BOB)
    assert (refused.status_code, refused.json()["error"]["code"]) == (403, "model_not_allowed")
    forged = explain(client, {"model": "chat", "input": "x", "previous_response_id": "resp_" + "A" * 40})
    assert (forged.status_code, forged.json()["error"]["param"]) == (400, "previous_response_id")


def test_it_explains_the_stored_conversation_in_front_of_the_body(client: Client) -> None:
    previous = issue_response_id(key_scope=1, stored=True, now_unix=time.time() - 3600)

    async def store() -> None:
        responses_store.save_soon(
            response_id=previous, key_scope="1", model="chat", instructions=None,
            input_items=[{"type": "message", "role": "user", "content": "lookup " * 3000}],
            output_items=[{"type": "message", "role": "assistant", "content": [{"type": "output_text",
                                                                                "text": "ok"}]}],
            created_unix=time.time() - 3600)
        await asyncio.gather(*(asyncio.all_tasks() - {asyncio.current_task()}))

    asyncio.run(store())
    alone = explain(client, {"model": "normal", "input": "and now?"})
    continued = explain(client, {"model": "normal", "input": "and now?", "previous_response_id": previous})
    assert (alone.status_code, continued.status_code) == (200, 200)
    theirs = explain(client, {"model": "chat", "input": "and now?", "previous_response_id": previous}, secret=BOB)
    assert (theirs.status_code, theirs.json()["error"]["code"]) == (400, "previous_response_not_found")
    # The long stored turn is read in front of the body: the tier verdict counts its tokens.
    assert continued.json()["tier"]["score"] > alone.json()["tier"]["score"]


def test_it_explains_referenced_items_as_the_items_themselves(client: Client) -> None:
    async def store() -> None:
        responses_store.save_soon(
            response_id=issue_response_id(key_scope=1, stored=True, now_unix=time.time()), key_scope="1",
            model="chat", instructions=None, input_items=[{"type": "message", "role": "user", "content": "hi"}],
            output_items=[{"type": "message", "role": "assistant",
                           "content": [{"type": "output_text", "text": "lookup " * 3000}]}],
            created_unix=time.time(), item_positions=[("msg_long_answer", 0)])
        await asyncio.gather(*(asyncio.all_tasks() - {asyncio.current_task()}))

    asyncio.run(store())
    alone = explain(client, {"model": "normal", "input": "and now?"})
    referenced = explain(client, {"model": "normal", "input": [
        {"type": "item_reference", "id": "msg_long_answer"}, {"role": "user", "content": "and now?"}]})
    assert (alone.status_code, referenced.status_code) == (200, 200)
    assert referenced.json()["tier"]["score"] > alone.json()["tier"]["score"]  # the long item was read in
    unknown = explain(client, {"model": "chat", "input": [{"type": "item_reference", "id": "msg_long_answer"},
                                                          {"role": "user", "content": "and now?"}]}, secret=BOB)
    assert unknown.status_code == 400
    assert (unknown.json()["error"]["param"], unknown.json()["error"]["code"]) == ("input[0].id", "item_not_found")

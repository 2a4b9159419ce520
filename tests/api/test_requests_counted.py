"""Requests that call no model still count toward the key's requests: ``/v1/routing/explain``,
``/v1/messages/count_tokens`` and the ledger endpoints are admitted against rpm and concurrency (never tokens or
budget), with the ``x-ratelimit-*`` headers, and refused with a 429 in the client's envelope when over."""

from __future__ import annotations

import json
from collections.abc import Iterator
from typing import Any

import pytest
from django.test import Client

from routing.config.runtime import runtime
from routing.core.limits import Limits
from routing.core.table import KeySpec, ModelSpec, ProviderSpec, RoutingTable
from routing.gateway.state import state
from routing.models import hash_secret

pytestmark = pytest.mark.django_db

SECRET = "gm-counted-requests-key-0123456789"
AUTH = {"HTTP_AUTHORIZATION": f"Bearer {SECRET}"}
CHAT = {"model": "chat", "messages": [{"role": "user", "content": "hi"}]}


@pytest.fixture(autouse=True)
def limited_table(settings: Any) -> Iterator[RoutingTable]:
    settings.REDIS_URL = ""
    state.renew()
    built = RoutingTable.build(
        version=1,
        providers=[ProviderSpec("p", "openai", "http://127.0.0.1:9/v1")],
        models=[ModelSpec(name="chat", provider="p", upstream="c", input_price=1.0, output_price=1.0)],
        keys=[KeySpec(id=41, name="counted-requests", secret_hash=hash_secret(SECRET),
                      limits=Limits(rpm=2, tpm=1, budget_usd=0.0))],
    )
    runtime.swap(built)
    yield built
    state.renew()


def post(client: Client, path: str, body: Any) -> Any:
    return client.post(path, json.dumps(body), content_type="application/json", **AUTH)


@pytest.mark.parametrize(("path", "body"), [
    ("/v1/routing/explain", CHAT),
    ("/v1/messages/count_tokens", CHAT),
    ("/v1/ledger/claim", {"execution_key": "tool-1", "owner": "agent-a"}),
])
def test_the_third_request_in_a_minute_is_refused(client: Client, path: str, body: dict[str, Any]) -> None:
    first, second, third = (post(client, path, body) for _ in range(3))
    assert first.status_code in (200, 409)  # a second ledger claim of one key is a 409, and still a request
    assert first["x-ratelimit-remaining-requests"] == "1"
    assert second["x-ratelimit-remaining-requests"] == "0"
    assert third.status_code == 429
    assert int(third["Retry-After"]) >= 1
    error = third.json()["error"]
    assert error["code"] == "rate_limit_exceeded"
    assert "2 requests per minute" in error["message"]


def test_they_are_never_charged_tokens_or_spend(client: Client) -> None:
    """The key's tpm of 1 and budget of 0 would refuse any model call; these requests reserve and spend nothing."""
    assert post(client, "/v1/routing/explain", CHAT).status_code == 200
    assert post(client, "/v1/messages/count_tokens", CHAT).status_code == 200


def test_a_ledger_read_counts_too(client: Client) -> None:
    replies = [client.get("/v1/ledger/entry/nothing-here", **AUTH) for _ in range(3)]
    assert [r.status_code for r in replies] == [404, 404, 429]
    assert replies[1]["x-ratelimit-remaining-requests"] == "0"

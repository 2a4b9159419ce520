"""What PostgreSQL cannot store is the client's 400 on the ledger API, never a 503 or a page of HTML."""

from __future__ import annotations

import json

import pytest
from django.test import Client

from routing.config.runtime import runtime
from routing.core.table import KeySpec, RoutingTable
from routing.models import hash_secret

pytestmark = pytest.mark.django_db(transaction=True)

SECRET = "gm-ledger-inputs-test-key-0123456789"


@pytest.fixture(autouse=True)
def keyed_table() -> None:
    key = KeySpec(id=1, name="ledger", secret_hash=hash_secret(SECRET))
    runtime.swap(RoutingTable(version=1, keys_by_hash={key.secret_hash: key}))


def post(client: Client, action: str, body: dict[str, object]) -> tuple[int, dict[str, object]]:
    response = client.post(f"/v1/ledger/{action}", json.dumps(body), content_type="application/json",
                           HTTP_AUTHORIZATION=f"Bearer {SECRET}")
    return response.status_code, response.json()


@pytest.mark.parametrize(
    ("field", "value", "problem"),
    [("owner", "worker\x00one", "must not contain NUL characters"),
     ("execution_key", "key\x00", "must not contain NUL characters"),
     ("owner", "worker\ud800", "lone surrogate")],
)
def test_it_refuses_text_postgresql_cannot_hold(client: Client, field: str, value: str, problem: str) -> None:
    body = {"execution_key": "op_1.tool.abc", "owner": "worker-1", field: value}
    status, answer = post(client, "claim", body)
    assert status == 400
    assert answer["error"]["param"] == field
    assert problem in answer["error"]["message"]


def test_it_refuses_a_result_with_a_nul_character(client: Client) -> None:
    assert post(client, "claim", {"execution_key": "op_2.tool.abc", "owner": "w"})[0] == 200
    status, answer = post(client, "complete", {"execution_key": "op_2.tool.abc", "owner": "w", "result": "a\x00b"})
    assert (status, answer["error"]["param"]) == (400, "result")


def test_it_answers_a_key_with_a_newline_or_nul_in_the_json_envelope(client: Client) -> None:
    for path in ("/v1/ledger/entry/a%0Ab", "/v1/ledger/entry/a%00b", "/v1/no%0Asuch"):
        response = client.get(path, HTTP_AUTHORIZATION=f"Bearer {SECRET}")
        assert response.status_code in (400, 404), path
        assert response["Content-Type"] == "application/json"
        assert "error" in response.json()

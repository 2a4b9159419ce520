"""The tool-execution ledger API in process, against PostgreSQL: claim, complete, fail, unknown and read.

Requests go through Django's test client to ``routing.api.ledger`` with a gateway key; the entries are real
rows, written from the API's worker threads (hence a transactional test database).
"""

from __future__ import annotations

import asyncio
import json
import time
import uuid
from collections.abc import Iterator
from typing import Any

import pytest
from django.http import HttpResponse
from django.test import AsyncClient, Client

from routing.config.runtime import runtime
from routing.core.table import KeySpec, RoutingTable
from routing.models import ToolExecution, hash_secret
from tests import unreachable_database

pytestmark = pytest.mark.django_db(transaction=True)

database_unreachable = unreachable_database.database_unreachable

SECRET = "gm-ledger-api-test-key-0123456789abcdef"
AUTH = {"HTTP_AUTHORIZATION": f"Bearer {SECRET}"}
OTHER_SECRET = "gm-ledger-api-other-key-0123456789abcdef"
OTHER = {"HTTP_AUTHORIZATION": f"Bearer {OTHER_SECRET}"}
NO_KEY: dict[str, str] = {}


@pytest.fixture(autouse=True)
def keyed_table() -> Iterator[None]:
    """The gateway's key snapshot holds two keys; the previous table comes back afterwards."""
    previous = runtime.table()
    keys = [KeySpec(id=41, name="executor", secret_hash=hash_secret(SECRET)),
            KeySpec(id=42, name="another-team", secret_hash=hash_secret(OTHER_SECRET))]
    runtime.swap(RoutingTable.build(version=previous.version + 1, keys=keys))
    yield
    runtime.swap(previous)


@pytest.fixture
def key() -> str:
    return f"op_{uuid.uuid4().hex}:send_email:{uuid.uuid4().hex[:12]}"


def post(client: Client, action: str, *, auth: dict[str, str] = AUTH, **body: Any) -> HttpResponse:
    return client.post(f"/v1/ledger/{action}", json.dumps(body), content_type="application/json", **auth)


def read(client: Client, key: str, *, auth: dict[str, str] = AUTH) -> HttpResponse:
    return client.get(f"/v1/ledger/entry/{key}", **auth)


def test_a_claim_is_granted_once_and_a_completion_is_handed_to_later_claimants(client: Client, key: str) -> None:
    first = post(client, "claim", execution_key=key, owner="worker-1", lease_seconds=120)
    assert first.status_code == 200
    granted = first.json()
    assert (granted["decision"], granted["state"], granted["owner"], granted["attempts"]) == (
        "claimed", "claimed", "worker-1", 1)
    assert granted["lease_until"] > time.time() + 100

    second = post(client, "claim", execution_key=key, owner="worker-2")
    assert second.status_code == 409
    assert (second.json()["decision"], second.json()["owner"]) == ("conflict", "worker-1")

    done = post(client, "complete", execution_key=key, owner="worker-1", result={"message_id": 7})
    assert done.status_code == 200
    assert (done.json()["state"], done.json()["result"]) == ("completed", '{"message_id": 7}')

    later = post(client, "claim", execution_key=key, owner="worker-2")
    assert later.status_code == 409
    assert (later.json()["decision"], later.json()["result"]) == ("completed", '{"message_id": 7}')

    entry = read(client, key)
    assert entry.status_code == 200
    assert (entry.json()["state"], entry.json()["attempts"], entry.json()["lease_until"]) == ("completed", 1, None)
    assert ToolExecution.objects.filter(execution_key=key).count() == 1


def test_a_retryable_failure_may_be_claimed_again_and_a_final_one_may_not(client: Client, key: str) -> None:
    post(client, "claim", execution_key=key, owner="a")
    pending = post(client, "fail", execution_key=key, owner="a", error="smtp 451", retryable=True)
    assert (pending.status_code, pending.json()["state"], pending.json()["error"]) == (200, "pending", "smtp 451")

    again = post(client, "claim", execution_key=key, owner="b")
    assert (again.json()["decision"], again.json()["attempts"]) == ("claimed", 2)
    failed = post(client, "fail", execution_key=key, owner="b", error="mailbox does not exist")
    assert failed.json()["state"] == "failed"

    refused = post(client, "claim", execution_key=key, owner="c")
    assert (refused.status_code, refused.json()["decision"]) == (409, "failed")


def test_an_unknown_outcome_is_refused_unless_the_claimant_takes_it_over(client: Client, key: str) -> None:
    post(client, "claim", execution_key=key, owner="a")
    unknown = post(client, "unknown", execution_key=key, owner="a", detail="timed out after sending")
    assert (unknown.status_code, unknown.json()["state"], unknown.json()["error"]) == (
        200, "unknown", "timed out after sending")

    blocked = post(client, "claim", execution_key=key, owner="b")
    assert (blocked.status_code, blocked.json()["decision"]) == (409, "unknown")
    taken = post(client, "claim", execution_key=key, owner="b", takeover_unknown=True)
    assert (taken.status_code, taken.json()["decision"], taken.json()["attempts"]) == (200, "claimed", 2)


def test_a_lapsed_lease_reads_as_unknown_and_its_claimant_may_still_report(client: Client, key: str) -> None:
    post(client, "claim", execution_key=key, owner="a")
    ToolExecution.objects.filter(execution_key=key).update(lease_until=time.time() - 1)
    assert read(client, key).json()["state"] == "unknown"
    assert post(client, "claim", execution_key=key, owner="b").json()["decision"] == "unknown"
    late = post(client, "complete", execution_key=key, owner="a", result="sent")  # a late truth beats unknown
    assert (late.status_code, late.json()["state"]) == (200, "completed")


def test_only_the_claimant_may_settle(client: Client, key: str) -> None:
    nobody = post(client, "complete", execution_key=key, owner="a", result="done")
    assert (nobody.status_code, nobody.json()["error"]["code"]) == (409, "ledger_conflict")
    post(client, "claim", execution_key=key, owner="a")
    for action, extra in (("complete", {"result": "done"}), ("fail", {"error": "x"}), ("unknown", {"detail": "x"})):
        intruder = post(client, action, execution_key=key, owner="intruder", **extra)
        assert (intruder.status_code, intruder.json()["error"]["code"]) == (409, "ledger_conflict"), action
    assert read(client, key).json()["state"] == "claimed"


def test_an_entry_nobody_made_or_that_expired_is_404(client: Client, key: str) -> None:
    missing = read(client, key)
    assert (missing.status_code, missing.json()["error"]["code"]) == (404, "not_found")
    post(client, "claim", execution_key=key, owner="a")
    ToolExecution.objects.filter(execution_key=key).update(expires_at=time.time() - 1)
    assert read(client, key).status_code == 404
    assert post(client, "claim", execution_key=key, owner="b").json()["attempts"] == 1  # a new entry


@pytest.mark.parametrize(("body", "param"), [
    ({"owner": "a"}, "execution_key"),
    ({"execution_key": "k", "owner": ""}, "owner"),
    ({"execution_key": "k", "owner": 5}, "owner"),
    ({"execution_key": "k", "owner": "a", "lease_seconds": -1}, "lease_seconds"),
    ({"execution_key": "k", "owner": "a", "lease_seconds": 0}, "lease_seconds"),
    ({"execution_key": "k", "owner": "a", "lease_seconds": 86_401}, "lease_seconds"),
    ({"execution_key": "k", "owner": "a", "lease_seconds": True}, "lease_seconds"),
    ({"execution_key": "k", "owner": "a", "lease_seconds": "60"}, "lease_seconds"),
])
def test_a_bad_claim_is_400_naming_the_field(client: Client, body: dict[str, Any], param: str) -> None:
    response = post(client, "claim", **body)
    assert response.status_code == 400
    assert (response.json()["error"]["param"], response.json()["error"]["code"]) == (param, "invalid_request")
    assert not ToolExecution.objects.exists()


def test_a_report_without_its_reason_is_400(client: Client, key: str) -> None:
    post(client, "claim", execution_key=key, owner="a")
    assert post(client, "fail", execution_key=key, owner="a").json()["error"]["param"] == "error"
    assert post(client, "unknown", execution_key=key, owner="a").json()["error"]["param"] == "detail"
    assert read(client, key).json()["state"] == "claimed"


@pytest.mark.parametrize("raw", [b"", b"{not json", b"[1, 2]", b'"text"'])
def test_a_body_that_is_not_a_json_object_is_400_in_the_openai_envelope(client: Client, raw: bytes) -> None:
    response = client.post("/v1/ledger/claim", raw, content_type="application/json", **AUTH)
    assert response.status_code == 400
    assert response.json()["error"]["code"] == "invalid_json"


def test_wrong_methods_and_actions_are_answered_in_the_envelope(client: Client, key: str) -> None:
    wrong_method = client.get("/v1/ledger/claim", **AUTH)
    assert (wrong_method.status_code, wrong_method.json()["error"]["code"]) == (405, "method_not_allowed")
    wrong_action = post(client, "explode", execution_key=key, owner="a")
    assert (wrong_action.status_code, wrong_action.json()["error"]["code"]) == (404, "unknown_endpoint")


def test_a_caller_without_a_valid_key_is_401(client: Client, key: str) -> None:
    for headers in ({}, {"HTTP_AUTHORIZATION": "Bearer not-the-key"}):
        response = client.post("/v1/ledger/claim", json.dumps({"execution_key": key, "owner": "a"}),
                               content_type="application/json", REMOTE_ADDR="10.0.0.9", **headers)
        assert response.status_code == 401
        assert response["WWW-Authenticate"].startswith("Bearer")
        assert "error" in response.json()
    assert not ToolExecution.objects.exists()


def test_concurrent_claims_grant_exactly_one(key: str) -> None:
    async def race() -> list[str]:
        client = AsyncClient()
        body = json.dumps({"execution_key": key, "owner": "w"})
        responses = await asyncio.gather(*(
            client.post("/v1/ledger/claim", body.replace('"w"', f'"w{i}"'), content_type="application/json",
                        headers={"Authorization": f"Bearer {SECRET}"}) for i in range(12)))
        return [r.json()["decision"] for r in responses]

    decisions = asyncio.run(race())
    assert decisions.count("claimed") == 1, decisions
    assert set(decisions) == {"claimed", "conflict"}


def test_without_its_database_the_ledger_is_503_and_says_nothing_was_recorded(
        client: Client, key: str, database_unreachable: None) -> None:
    response = post(client, "claim", execution_key=key, owner="a")
    assert (response.status_code, response.json()["error"]["code"]) == (503, "ledger_unavailable")
    assert response["Retry-After"] == "5"
    assert read(client, key).status_code == 503


# ---------------------------------------------------------------------------------------------------------
# Scopes: an entry belongs to the key that created it; requests served without a key have their own scope.
# ---------------------------------------------------------------------------------------------------------


def test_it_hides_an_entry_from_another_key(client: Client, key: str) -> None:
    assert post(client, "claim", execution_key=key, owner="worker").status_code == 200
    hidden = read(client, key, auth=OTHER)
    assert (hidden.status_code, hidden.json()["error"]["code"]) == (404, "not_found")
    assert read(client, key).json()["state"] == "claimed"


@pytest.mark.parametrize(("action", "extra"), [("complete", {"result": "sent"}), ("fail", {"error": "smtp down"}),
                                               ("unknown", {"detail": "timed out"})])
def test_it_refuses_another_key_settling_an_entry_even_under_the_same_owner_name(
        client: Client, key: str, action: str, extra: dict[str, Any]) -> None:
    post(client, "claim", execution_key=key, owner="worker")
    intruder = post(client, action, auth=OTHER, execution_key=key, owner="worker", **extra)
    assert (intruder.status_code, intruder.json()["error"]["code"]) == (409, "ledger_conflict")
    entry = read(client, key).json()
    assert (entry["state"], entry["result"], entry["error"]) == ("claimed", None, None)


def test_it_gives_another_key_its_own_entry_for_the_same_execution_key(client: Client, key: str) -> None:
    post(client, "claim", execution_key=key, owner="mine")
    post(client, "complete", execution_key=key, owner="mine", result="my result")
    # The other key's claim neither sees the completed entry nor changes it.
    theirs = post(client, "claim", auth=OTHER, execution_key=key, owner="theirs")
    assert (theirs.status_code, theirs.json()["decision"], theirs.json()["attempts"]) == (200, "claimed", 1)
    post(client, "complete", auth=OTHER, execution_key=key, owner="theirs", result="their result")
    assert read(client, key).json()["result"] == "my result"
    assert read(client, key, auth=OTHER).json()["result"] == "their result"
    scopes = ToolExecution.objects.filter(execution_key=key).values_list("key_scope", flat=True)
    assert sorted(scopes) == ["41", "42"]


def test_it_keeps_entries_made_without_a_key_apart_from_every_key(client: Client, key: str, settings: Any) -> None:
    settings.GOMODEL_AUTH = "open"  # a loopback caller without a key is served
    assert post(client, "claim", auth=NO_KEY, execution_key=key, owner="local").status_code == 200
    assert read(client, key).status_code == 404
    assert post(client, "complete", execution_key=key, owner="local", result="x").status_code == 409
    assert post(client, "claim", execution_key=key, owner="keyed").json()["decision"] == "claimed"
    assert read(client, key, auth=NO_KEY).json()["owner"] == "local"
    assert ToolExecution.objects.get(execution_key=key, key_scope="open").owner == "local"

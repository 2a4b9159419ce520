"""The tool-execution ledger API: a side effect is claimed once, whatever the number of callers."""

from __future__ import annotations

import uuid
from concurrent.futures import ThreadPoolExecutor

import httpx2
import pytest

from tests.gateway_process import Gateway

pytestmark = pytest.mark.services


def post(gateway: Gateway, action: str, **body: object) -> httpx2.Response:
    return httpx2.post(f"{gateway.base_url}/v1/ledger/{action}", json=body, timeout=30)


def test_claim_complete_and_replay(gateway: Gateway) -> None:
    key = f"op_{uuid.uuid4().hex}:send_email:abc"
    first = post(gateway, "claim", execution_key=key, owner="worker-1")
    assert first.status_code == 200
    assert first.json()["decision"] == "claimed"
    second = post(gateway, "claim", execution_key=key, owner="worker-2")
    assert second.status_code == 409
    assert second.json()["decision"] == "conflict"
    done = post(gateway, "complete", execution_key=key, owner="worker-1", result={"message_id": 7})
    assert done.status_code == 200
    assert done.json()["state"] == "completed"
    replay = post(gateway, "claim", execution_key=key, owner="worker-2")
    assert replay.status_code == 409
    assert replay.json()["decision"] == "completed"
    assert replay.json()["result"] == '{"message_id": 7}'
    got = httpx2.get(f"{gateway.base_url}/v1/ledger/entry/{key}").json()
    assert got["state"] == "completed"
    assert got["attempts"] == 1


def test_a_retryable_failure_can_be_claimed_again_and_an_unknown_one_cannot(gateway: Gateway) -> None:
    key = f"op_{uuid.uuid4().hex}:charge:def"
    post(gateway, "claim", execution_key=key, owner="a")
    assert post(gateway, "fail", execution_key=key, owner="a", error="smtp 451", retryable=True).json()["state"] \
        == "pending"
    assert post(gateway, "claim", execution_key=key, owner="b").json()["decision"] == "claimed"
    assert post(gateway, "unknown", execution_key=key, owner="b", detail="timeout").json()["state"] == "unknown"
    blocked = post(gateway, "claim", execution_key=key, owner="c")
    assert blocked.status_code == 409
    assert blocked.json()["decision"] == "unknown"
    taken = post(gateway, "claim", execution_key=key, owner="c", takeover_unknown=True)
    assert taken.json()["decision"] == "claimed"


def test_only_the_claimant_may_settle(gateway: Gateway) -> None:
    key = f"op_{uuid.uuid4().hex}:x:y"
    post(gateway, "claim", execution_key=key, owner="a")
    response = post(gateway, "complete", execution_key=key, owner="intruder", result="done")
    assert response.status_code == 409
    assert response.json()["error"]["code"] == "ledger_conflict"


def test_concurrent_claims_grant_exactly_one(gateway: Gateway) -> None:
    key = f"op_{uuid.uuid4().hex}:pay:z"
    with ThreadPoolExecutor(12) as pool:
        results = list(pool.map(lambda i: post(gateway, "claim", execution_key=key, owner=f"w{i}"), range(24)))
    decisions = [r.json()["decision"] for r in results]
    assert decisions.count("claimed") == 1, decisions


def test_bad_ledger_requests_are_400(gateway: Gateway) -> None:
    assert post(gateway, "claim", owner="a").status_code == 400
    assert post(gateway, "claim", execution_key="k", owner="a", lease_seconds=-1).status_code == 400
    assert httpx2.get(f"{gateway.base_url}/v1/ledger/entry/nothing-here").status_code == 404

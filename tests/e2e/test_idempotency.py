"""Idempotency-Key: a repeat gets the stored answer, never a second generation."""

from __future__ import annotations

import threading
import time
import uuid

import httpx2
import pytest

from tests.gateway_process import Gateway

pytestmark = pytest.mark.services

BODY = {"model": "ge/ge-model", "messages": [{"role": "user", "content": "once only"}]}


def post(gateway: Gateway, key: str, body: dict | None = None) -> httpx2.Response:
    return httpx2.post(f"{gateway.base_url}/v1/chat/completions", json=body or BODY,
                       headers={"Idempotency-Key": key}, timeout=30)


def test_a_repeat_returns_the_stored_answer(gateway: Gateway, sim) -> None:  # type: ignore[no-untyped-def]
    key = uuid.uuid4().hex
    before = len(sim.received(model="ge-model"))
    first = post(gateway, key)
    second = post(gateway, key)
    assert first.status_code == second.status_code == 200
    assert second.json() == first.json()
    assert second.headers["x-gomodel-idempotent-replay"] == "true"
    assert second.headers["x-gomodel-operation-id"] == first.headers["x-gomodel-operation-id"]
    assert len(sim.received(model="ge-model")) == before + 1  # generated once


def test_the_same_key_for_another_request_is_422(gateway: Gateway) -> None:
    key = uuid.uuid4().hex
    assert post(gateway, key).status_code == 200
    other = post(gateway, key, {**BODY, "messages": [{"role": "user", "content": "something else"}]})
    assert other.status_code == 422
    assert other.json()["error"]["code"] == "idempotency_key_reused"


def test_a_repeat_while_the_first_runs_is_409(gateway: Gateway, sim) -> None:  # type: ignore[no-untyped-def]
    sim.set_fault("ge-model", {"kind": "slow", "ms": 1500, "times": 1})
    key = uuid.uuid4().hex
    before = len(sim.received(model="ge-model"))
    results: list[httpx2.Response] = []
    first = threading.Thread(target=lambda: results.append(post(gateway, key)))
    first.start()
    # Once the first request reached the provider it holds the operation: only then is the repeat sent.
    give_up = time.monotonic() + 10
    while len(sim.received(model="ge-model")) == before:
        assert time.monotonic() < give_up, "the first request never reached the provider"
        time.sleep(0.01)
    second = post(gateway, key)
    first.join()
    assert second.status_code == 409
    assert second.json()["error"]["code"] == "idempotency_key_in_use"
    assert results[0].status_code == 200


def test_a_streamed_answer_is_replayed(gateway: Gateway, sim) -> None:  # type: ignore[no-untyped-def]
    key = uuid.uuid4().hex
    body = {**BODY, "stream": True}
    first = post(gateway, key, body)
    second = post(gateway, key, body)
    assert first.status_code == second.status_code == 200
    assert second.text == first.text
    assert second.text.rstrip().endswith("data: [DONE]")

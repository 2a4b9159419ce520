"""The model calls a prober uses: each format's list and one-model lookup, with keys, strict models and faults."""

from __future__ import annotations

from collections.abc import Iterator

import httpx2
import pytest

from routing.simulator.server import SimulatorServer

CONFIG = {"strict_models": True, "models": {"open-model": {}, "keyed": {"api_keys": ["good-key"]}}}
ANTHROPIC = {"anthropic-version": "2023-06-01"}


@pytest.fixture(scope="module")
def sim() -> Iterator[SimulatorServer]:
    with SimulatorServer(CONFIG) as server:
        yield server


@pytest.fixture(autouse=True)
def clean(sim: SimulatorServer) -> Iterator[None]:
    sim.reset()
    yield
    sim.clear_faults()


def get(sim: SimulatorServer, path: str, headers: dict[str, str]) -> httpx2.Response:
    return httpx2.get(sim.base_url + path, headers=headers, timeout=10)


@pytest.mark.parametrize(("path", "headers", "named"), [
    ("/v1/models/keyed", {"x-api-key": "good-key", **ANTHROPIC}, lambda b: b["id"] == "keyed" and b["type"] == "model"),
    ("/v1beta/models/keyed", {"x-goog-api-key": "good-key"}, lambda b: b["name"] == "models/keyed"),
    ("/v1/models/keyed", {"authorization": "Bearer good-key"}, lambda b: b["id"] == "keyed"),
])
def test_it_answers_one_model_in_each_format(sim: SimulatorServer, path: str, headers: dict[str, str],
                                             named: object) -> None:
    response = get(sim, path, headers)
    assert response.status_code == 200, response.text
    assert named(response.json())  # type: ignore[operator]
    record = sim.received("keyed")[-1]
    assert (record["action"], record["status"], record["auth"]["key_index"]) == ("models", 200, 0)


def test_it_refuses_a_key_the_model_does_not_accept_as_the_format_does(sim: SimulatorServer) -> None:
    assert get(sim, "/v1/models/keyed", {"x-api-key": "bad-key", **ANTHROPIC}).status_code == 401
    gemini = get(sim, "/v1beta/models/keyed", {"x-goog-api-key": "bad-key"})  # Google answers 400 API_KEY_INVALID
    assert gemini.status_code == 400
    assert "API key" in gemini.json()["error"]["message"]
    assert get(sim, "/v1/models/open-model", {"x-api-key": "any", **ANTHROPIC}).status_code == 200


def test_an_unknown_model_is_a_404_under_strict_models(sim: SimulatorServer) -> None:
    assert get(sim, "/v1/models/nope", {"x-api-key": "k", **ANTHROPIC}).status_code == 404
    assert get(sim, "/v1beta/models/nope", {"x-goog-api-key": "k"}).status_code == 404


def test_a_fault_keyed_by_the_model_applies_to_its_lookup_until_cleared(sim: SimulatorServer) -> None:
    sim.set_fault("open-model", {"kind": "status", "status": 503})
    assert get(sim, "/v1/models/open-model", {"x-api-key": "k", **ANTHROPIC}).status_code == 503
    assert sim.received("open-model")[-1]["fault"] == "status"
    sim.clear_faults("open-model")
    assert get(sim, "/v1/models/open-model", {"x-api-key": "k", **ANTHROPIC}).status_code == 200


def test_a_rate_limit_fault_answers_429_with_its_retry_after(sim: SimulatorServer) -> None:
    sim.set_fault("open-model", {"kind": "rate_limit", "retry_after": 30})
    response = get(sim, "/v1beta/models/open-model", {"x-goog-api-key": "k"})
    assert (response.status_code, response.headers.get("retry-after")) == (429, "30")


def test_the_list_is_recorded_and_lists_every_model(sim: SimulatorServer) -> None:
    listing = get(sim, "/v1/models", {"authorization": "Bearer anything"}).json()
    assert {m["id"] for m in listing["data"]} == {"open-model", "keyed"}
    assert sim.received()[-1]["action"] == "models"

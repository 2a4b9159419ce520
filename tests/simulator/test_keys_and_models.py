"""Per-model keys (api_keys), strict model lists, unknown models, fixed and padded replies."""

from __future__ import annotations

from collections.abc import Iterator
from typing import Any

import httpx2 as httpx
import pytest

from routing.simulator import SimulatorServer
from tests.simulator.wire_helpers import WIRES, answer_of, request_for

KEY_HEADER = {"openai": "authorization", "azure": "api-key", "anthropic": "x-api-key", "gemini": "x-goog-api-key"}


def with_key(wire: str, key: str) -> dict[str, str]:
    value = f"Bearer {key}" if wire == "openai" else key
    return {KEY_HEADER[wire]: value, **({"anthropic-version": "2023-06-01"} if wire == "anthropic" else {})}


def send(client: httpx.Client, wire: str, model: str, headers: dict[str, str] | None = None) -> httpx.Response:
    path, default_headers, body = request_for(wire, model)
    return client.post(path, json=body, headers=default_headers if headers is None else headers)


@pytest.mark.parametrize("wire", WIRES)
def test_a_model_with_api_keys_accepts_each_of_them(client: httpx.Client, wire: str) -> None:
    assert send(client, wire, "locked", with_key(wire, "sk-first")).status_code == 200
    assert send(client, wire, "locked", with_key(wire, "sk-second")).status_code == 200


@pytest.mark.parametrize(
    ("wire", "status", "check"),
    [
        ("openai", 401, lambda e: e["error"]["code"] == "invalid_api_key"),
        ("azure", 401, lambda e: e["error"]["code"] == "401"),
        ("anthropic", 401, lambda e: e["error"] == {"type": "authentication_error", "message": "invalid x-api-key"}),
        ("gemini", 400, lambda e: e["error"]["details"][0]["reason"] == "API_KEY_INVALID"),
    ],
)
def test_a_model_with_api_keys_refuses_another_key_as_the_provider_does(client: httpx.Client, wire: str,
                                                                        status: int, check: Any) -> None:
    response = send(client, wire, "locked", with_key(wire, "sk-stolen"))

    assert response.status_code == status
    assert check(response.json())


def test_a_model_with_api_keys_refuses_a_request_without_one(client: httpx.Client) -> None:
    response = send(client, "openai", "locked", {})

    assert response.status_code == 401
    assert response.json()["error"]["message"].startswith("You didn't provide an API key.")


def test_an_openai_compatible_model_without_api_keys_needs_no_key(client: httpx.Client) -> None:
    assert send(client, "openai", "anything", {}).status_code == 200


@pytest.fixture(scope="module")
def strict() -> Iterator[SimulatorServer]:
    with SimulatorServer({"strict_models": True, "models": {"known": {}}}) as server:
        yield server


@pytest.mark.parametrize(
    ("wire", "check"),
    [
        ("openai", lambda e: e["error"]["code"] == "model_not_found"),
        ("azure", lambda e: e["error"]["code"] == "DeploymentNotFound"),
        ("anthropic", lambda e: e["error"] == {"type": "not_found_error", "message": "model: unknown-model"}),
        ("gemini", lambda e: e["error"]["status"] == "NOT_FOUND" and "models/unknown-model" in e["error"]["message"]),
    ],
)
def test_strict_models_answer_an_unknown_model_with_the_providers_404(strict: SimulatorServer, wire: str,
                                                                      check: Any) -> None:
    with httpx.Client(base_url=strict.base_url) as http:
        unknown = send(http, wire, "unknown-model")
        known = send(http, wire, "known")

    assert unknown.status_code == 404
    assert check(unknown.json())
    assert known.status_code == 200


@pytest.mark.parametrize("wire", WIRES)
def test_an_unlisted_model_is_served_by_default(client: httpx.Client, wire: str) -> None:
    response = send(client, wire, "never-configured")

    assert response.status_code == 200
    assert "Simulated answer 1 from never-configured" in answer_of(wire, response.text, stream=False)["text"]


def test_a_model_with_a_fixed_reply_always_says_it(client: httpx.Client) -> None:
    for wire in WIRES:
        assert answer_of(wire, send(client, wire, "fixed").text, stream=False)["text"] == "A fixed reply."


def test_reply_tokens_pads_the_answer_to_a_length() -> None:
    with SimulatorServer({"models": {"long": {"reply_tokens": 500}}}) as sim, \
            httpx.Client(base_url=sim.base_url) as http:
        answer = send(http, "openai", "long").json()

    assert len(answer["choices"][0]["message"]["content"]) == 2000
    assert answer["usage"]["completion_tokens"] == 500

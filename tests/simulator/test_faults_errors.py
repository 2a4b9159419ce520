"""Faults answered with the provider's own error: rate_limit, status, context_overflow (and the automatic one)."""

from __future__ import annotations

from typing import Any

import httpx2 as httpx
import pytest

from routing.simulator import SimulatorServer
from tests.simulator.wire_helpers import WIRES, request_for


def send(client: httpx.Client, wire: str, model: str, **extra: Any) -> httpx.Response:
    path, headers, body = request_for(wire, model, **extra)
    return client.post(path, json=body, headers=headers)


def error_label(wire: str, body: dict[str, Any]) -> str:
    """The field a gateway classifies an error by: type (OpenAI, Anthropic), code (Azure), status (Gemini)."""
    error = body["error"]
    if wire == "openai":
        return str(error["type"])
    if wire == "azure":
        return str(error["code"] if "type" not in error else error["type"])
    if wire == "anthropic":
        assert body["type"] == "error"
        return str(error["type"])
    return str(error["status"])


@pytest.mark.parametrize(
    ("wire", "label"),
    [("openai", "requests"), ("azure", "429"), ("anthropic", "rate_limit_error"), ("gemini", "RESOURCE_EXHAUSTED")],
)
def test_it_rate_limits_with_retry_after_in_the_providers_shape(sim: SimulatorServer, client: httpx.Client,
                                                                wire: str, label: str) -> None:
    sim.set_fault("m", {"kind": "rate_limit", "retry_after": 3, "retry_after_ms": 2500})

    response = send(client, wire, "m")

    assert response.status_code == 429
    assert response.headers["retry-after"] == "3"
    assert response.headers["retry-after-ms"] == "2500"
    assert error_label(wire, response.json()) == label


def test_it_rate_limits_without_retry_after_when_told(sim: SimulatorServer, client: httpx.Client) -> None:
    sim.set_fault("m", {"kind": "rate_limit", "retry_after": None})

    response = send(client, "openai", "m")

    assert response.status_code == 429
    assert "retry-after" not in response.headers
    assert "retry-after-ms" not in response.headers
    assert response.json()["error"]["code"] == "rate_limit_exceeded"


def test_gemini_carries_the_retry_delay_in_the_body(sim: SimulatorServer, client: httpx.Client) -> None:
    sim.set_fault("m", {"kind": "rate_limit", "retry_after": 29})

    details = send(client, "gemini", "m").json()["error"]["details"]

    assert {"@type": "type.googleapis.com/google.rpc.RetryInfo", "retryDelay": "29s"} in details


@pytest.mark.parametrize(
    ("wire", "status", "check"),
    [
        ("openai", 429, lambda e: e["error"]["code"] == "insufficient_quota"),
        ("azure", 429, lambda e: e["error"]["code"] == "insufficient_quota"),
        ("anthropic", 400, lambda e: "credit balance is too low" in e["error"]["message"]),
        ("gemini", 429, lambda e: "PerDay" in e["error"]["details"][0]["violations"][0]["quotaId"]),
    ],
)
def test_it_answers_an_exhausted_quota_as_the_provider_does(sim: SimulatorServer, client: httpx.Client, wire: str,
                                                           status: int, check: Any) -> None:
    sim.set_fault("m", {"kind": "rate_limit", "insufficient_quota": True})

    response = send(client, wire, "m")

    assert response.status_code == status
    assert check(response.json())


STATUS_TABLE = [
    # wire, status, label the provider uses for it
    ("openai", 401, "invalid_request_error"), ("openai", 403, "invalid_request_error"),
    ("openai", 404, "invalid_request_error"), ("openai", 500, "server_error"), ("openai", 502, "cf_bad_gateway"),
    ("openai", 503, "server_error"), ("openai", 529, "server_error"),
    ("azure", 401, "401"), ("azure", 403, "PermissionDenied"), ("azure", 404, "DeploymentNotFound"),
    ("azure", 500, "InternalServerError"), ("azure", 502, "BadGateway"), ("azure", 503, "ServiceUnavailable"),
    ("azure", 529, "ServiceUnavailable"),
    ("anthropic", 401, "authentication_error"), ("anthropic", 403, "permission_error"),
    ("anthropic", 404, "not_found_error"), ("anthropic", 500, "api_error"), ("anthropic", 502, "api_error"),
    ("anthropic", 503, "overloaded_error"), ("anthropic", 529, "overloaded_error"),
    ("gemini", 401, "UNAUTHENTICATED"), ("gemini", 403, "PERMISSION_DENIED"), ("gemini", 404, "NOT_FOUND"),
    ("gemini", 500, "INTERNAL"), ("gemini", 502, "UNAVAILABLE"), ("gemini", 503, "UNAVAILABLE"),
    ("gemini", 529, "UNAVAILABLE"),
]


@pytest.mark.parametrize(("wire", "status", "label"), STATUS_TABLE)
def test_it_answers_a_scripted_status_with_the_providers_error_body(sim: SimulatorServer, client: httpx.Client,
                                                                    wire: str, status: int, label: str) -> None:
    sim.set_fault("m", {"kind": "status", "status": status})

    response = send(client, wire, "m")

    assert response.status_code == status
    assert response.headers["content-type"] == "application/json"
    assert error_label(wire, response.json()) == label
    assert response.json()["error"]["message"]


def test_openai_names_the_model_and_the_key_in_its_errors(sim: SimulatorServer, client: httpx.Client) -> None:
    sim.set_fault("m", {"kind": "status", "status": 404, "times": 1})
    sim.set_fault("k", {"kind": "status", "status": 401, "times": 1})

    missing = send(client, "openai", "m").json()["error"]
    refused = client.post("/v1/chat/completions", json=request_for("openai", "k")[2],
                          headers={"authorization": "Bearer sk-proj-abcdefghijklmnop"}).json()["error"]

    assert missing["code"] == "model_not_found"
    assert "`m`" in missing["message"]
    assert refused["code"] == "invalid_api_key"
    assert "sk-" + "*" * 17 + "mnop" in refused["message"]
    assert "abcdefghijklmnop" not in refused["message"]


def test_a_status_fault_can_carry_its_own_message_and_retry_after(sim: SimulatorServer, client: httpx.Client) -> None:
    sim.set_fault("m", {"kind": "status", "status": 503, "message": "Down for maintenance", "retry_after": 10})

    response = send(client, "anthropic", "m")

    assert response.status_code == 503
    assert response.headers["retry-after"] == "10"
    assert response.json()["error"] == {"type": "overloaded_error", "message": "Down for maintenance"}


@pytest.mark.parametrize(
    ("wire", "check"),
    [
        ("openai", lambda e: e["error"]["code"] == "context_length_exceeded" and e["error"]["param"] == "messages"),
        ("azure", lambda e: e["error"]["code"] == "context_length_exceeded"),
        ("anthropic", lambda e: e["error"]["type"] == "invalid_request_error"
         and e["error"]["message"].startswith("prompt is too long: ")
         and e["error"]["message"].endswith(" tokens > 8000 maximum")),
        ("gemini", lambda e: e["error"]["status"] == "INVALID_ARGUMENT"
         and "exceeds the maximum number of tokens allowed (8000)" in e["error"]["message"]),
    ],
)
def test_it_answers_context_overflow_with_the_providers_error(sim: SimulatorServer, client: httpx.Client,
                                                              wire: str, check: Any) -> None:
    model = "gpt-test"  # context_window 8000 in the shared configuration
    sim.set_fault(model, {"kind": "context_overflow"})

    response = send(client, wire, model)

    assert response.status_code == 400
    assert check(response.json())


@pytest.mark.parametrize("wire", WIRES)
def test_a_prompt_over_the_context_window_overflows_without_a_fault(client: httpx.Client, wire: str) -> None:
    long_text = "word " * 7000  # 35,000 characters: about 8,750 tokens, over the 8,000-token window

    fits = send(client, wire, "gpt-test", text="short")
    overflows = send(client, wire, "gpt-test", text=long_text)

    assert fits.status_code == 200
    assert overflows.status_code == 400
    assert "8000" in overflows.text


def test_a_stream_request_gets_a_json_error_not_a_stream(sim: SimulatorServer, client: httpx.Client) -> None:
    sim.set_fault("m", {"kind": "status", "status": 500})

    response = send(client, "openai", "m", stream=True)

    assert response.status_code == 500
    assert response.headers["content-type"] == "application/json"
    assert response.json()["error"]["type"] == "server_error"

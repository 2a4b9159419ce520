"""Bad input gets a 4xx in the client's own envelope; keys are checked; nothing leaks a provider key."""

from __future__ import annotations

from collections.abc import Iterator
from pathlib import Path

import httpx2
import pytest
import yaml

from routing.simulator.server import SimulatorServer
from tests.e2e.conftest import SIM_KEY, fresh_database, gateway_config, manage
from tests.gateway_process import Gateway, run_gateway

pytestmark = pytest.mark.services

CHAT = "/v1/chat/completions"
MESSAGES = "/v1/messages"
ANTHROPIC = {"anthropic-version": "2023-06-01"}


def openai_error(response: httpx2.Response) -> dict:
    body = response.json()
    assert set(body) == {"error"}, body
    assert set(body["error"]) >= {"message", "type", "param", "code"}, body
    return body["error"]


def anthropic_error(response: httpx2.Response) -> dict:
    body = response.json()
    assert body["type"] == "error", body
    assert set(body["error"]) == {"type", "message"}, body
    return body["error"]


@pytest.mark.parametrize(
    ("body", "status", "code", "param"),
    [
        (b"{not json", 400, "invalid_json", None),
        (b"", 400, "invalid_json", None),
        (b"[1, 2]", 400, "invalid_json", None),
        (b'{"messages": [{"role": "user", "content": "hi"}]}', 400, "invalid_request", "model"),
        (b'{"model": "oa/oa-model"}', 400, "invalid_request", "messages"),
        (b'{"model": "oa/oa-model", "messages": [{"role": "robot", "content": "hi"}]}', 400, "invalid_request",
         "messages[0].role"),
        (b'{"model": "oa/oa-model", "messages": [{"role": "user", "content": "hi"}], "n": 0}', 400,
         "invalid_request", "n"),
        (b'{"model": "oa/oa-model", "messages": [{"role": "user", "content": "hi"}], "stream": "yes"}', 400,
         "invalid_request", "stream"),
        (b'{"model": "no-such-model", "messages": [{"role": "user", "content": "hi"}]}', 404, "model_not_found",
         "model"),
    ],
)
def test_openai_route_errors_use_openai_envelope(gateway: Gateway, body: bytes, status: int, code: str,
                                                 param: str | None) -> None:
    response = httpx2.post(gateway.base_url + CHAT, content=body, headers={"content-type": "application/json"})
    assert response.status_code == status
    error = openai_error(response)
    assert error["code"] == code
    assert error["param"] == param
    assert "x-request-id" in response.headers


@pytest.mark.parametrize(
    ("body", "status", "words"),
    [
        (b"{not json", 400, "not valid JSON"),
        (b'{"model": "oa/oa-model", "messages": [{"role": "user", "content": "hi"}]}', 400, "max_tokens"),
        (b'{"model": "oa/oa-model", "max_tokens": 10, "messages": [{"role": "system", "content": "x"}]}', 400,
         "messages[0].role"),
        (b'{"model": "missing", "max_tokens": 10, "messages": [{"role": "user", "content": "hi"}]}', 404,
         "does not exist"),
    ],
)
def test_anthropic_route_errors_use_anthropic_envelope(gateway: Gateway, body: bytes, status: int,
                                                       words: str) -> None:
    response = httpx2.post(gateway.base_url + MESSAGES, content=body,
                           headers={"content-type": "application/json", **ANTHROPIC})
    assert response.status_code == status
    assert words in anthropic_error(response)["message"]


def test_a_body_over_the_limit_is_413(gateway: Gateway) -> None:
    huge = b'{"model": "oa/oa-model", "messages": [{"role": "user", "content": "' + b"x" * (11 * 1024 * 1024) + b'"}]}'
    response = httpx2.post(gateway.base_url + CHAT, content=huge, headers={"content-type": "application/json"},
                           timeout=60)
    assert response.status_code == 413
    assert openai_error(response)["code"] == "request_too_large"


def test_a_body_under_the_limit_but_over_djangos_default_is_served(gateway: Gateway) -> None:
    # 3 MiB of JSON whitespace: a large body with a short prompt (the model's context window is not the point).
    large = b'{"model": "oa/oa-model",' + b" " * (3 * 1024 * 1024) + b'"messages": [{"role": "user", "content": "hi"}]}'
    response = httpx2.post(gateway.base_url + CHAT, content=large, headers={"content-type": "application/json"},
                           timeout=60)
    assert response.status_code == 200, response.text[:300]


def test_unknown_endpoints_and_methods_answer_in_the_envelope(gateway: Gateway) -> None:
    response = httpx2.get(gateway.base_url + "/v1/embeddingz")
    assert response.status_code == 404
    assert openai_error(response)["code"] == "unknown_endpoint"
    response = httpx2.get(gateway.base_url + CHAT)
    assert response.status_code == 405
    assert openai_error(response)["code"] == "method_not_allowed"


def test_an_upstream_client_error_is_relayed_without_cooling_the_target(gateway: Gateway, sim) -> None:  # type: ignore[no-untyped-def]
    sim.set_fault("ge-model", {"kind": "status", "status": 400, "message": "temperature is out of range",
                               "times": 1})
    response = httpx2.post(gateway.base_url + CHAT, json={
        "model": "ge/ge-model", "messages": [{"role": "user", "content": "hi"}]})
    assert response.status_code == 400
    assert "temperature" in openai_error(response)["message"]
    again = httpx2.post(gateway.base_url + CHAT, json={
        "model": "ge/ge-model", "messages": [{"role": "user", "content": "hi"}]})
    assert again.status_code == 200


def test_no_provider_key_appears_in_responses_or_logs(gateway: Gateway, sim) -> None:  # type: ignore[no-untyped-def]
    # A 401 from the provider (our key refused, for the probe the gateway sends at once too) cools its model for
    # the maximum: a model of its own here.
    sim.set_fault("leak-check", {"kind": "status", "status": 401})
    statuses = []
    for path, body, headers in [
        (CHAT, {"model": "oa/oa-model", "messages": [{"role": "user", "content": "hi"}]}, {}),
        (CHAT, {"model": "an/leak-check", "messages": [{"role": "user", "content": "hi"}]}, {}),
        (MESSAGES, {"model": "an/leak-check", "max_tokens": 5, "messages": [{"role": "user", "content": "x"}]},
         ANTHROPIC),
    ]:
        response = httpx2.post(gateway.base_url + path, json=body, headers=headers)
        statuses.append(response.status_code)
        assert SIM_KEY not in response.text
        assert SIM_KEY not in str(response.headers)
    assert SIM_KEY not in gateway.log()
    # The refused key made a 502; the model then cools down, and says so with 503 and Retry-After.
    assert statuses == [200, 502, 503]


# ---------------------------------------------------------------------------------------------------------
# Keys: a gateway with a master key and a restricted key.
# ---------------------------------------------------------------------------------------------------------


@pytest.fixture(scope="module")
def keyed(tmp_path_factory: pytest.TempPathFactory, simulator: SimulatorServer) -> Iterator[tuple[Gateway, str]]:
    tmp = tmp_path_factory.mktemp("keyed")
    config = tmp / "config.yaml"
    config.write_text(yaml.safe_dump(gateway_config(simulator.base_url)))
    with fresh_database("keyed") as url:
        manage(url, "loadconfig", str(config), env={"E2E_SIM_KEY": SIM_KEY})
        restricted = manage(url, "createkey", "restricted", "--model", "oa/oa-model").strip()
        env = {"DATABASE_URL": url, "E2E_SIM_KEY": SIM_KEY, "GOMODEL_MASTER_KEY": "master-key-for-tests"}
        with run_gateway(Path(tmp), env) as gateway:
            yield gateway, restricted


def test_a_missing_or_wrong_key_is_401_in_both_envelopes(keyed: tuple[Gateway, str]) -> None:
    gateway, _ = keyed
    body = {"model": "oa/oa-model", "messages": [{"role": "user", "content": "hi"}]}
    response = httpx2.post(gateway.base_url + CHAT, json=body)
    assert response.status_code == 401
    assert openai_error(response)["type"] == "authentication_error"
    response = httpx2.post(gateway.base_url + CHAT, json=body, headers={"Authorization": "Bearer wrong"})
    assert response.status_code == 401
    response = httpx2.post(gateway.base_url + MESSAGES, json={**body, "max_tokens": 5},
                           headers={"x-api-key": "wrong", **ANTHROPIC})
    assert response.status_code == 401
    assert anthropic_error(response)["type"] == "authentication_error"


def test_the_master_key_and_a_restricted_key(keyed: tuple[Gateway, str]) -> None:
    gateway, restricted = keyed
    body = {"model": "oa/oa-model", "messages": [{"role": "user", "content": "hi"}]}
    assert httpx2.post(gateway.base_url + CHAT, json=body,
                       headers={"Authorization": "Bearer master-key-for-tests"}).status_code == 200
    assert httpx2.post(gateway.base_url + CHAT, json=body,
                       headers={"Authorization": f"Bearer {restricted}"}).status_code == 200
    response = httpx2.post(gateway.base_url + MESSAGES, json={**body, "model": "an/an-model", "max_tokens": 5},
                           headers={"x-api-key": restricted, **ANTHROPIC})
    assert response.status_code == 403
    assert anthropic_error(response)["type"] == "permission_error"
    models = httpx2.get(gateway.base_url + "/v1/models", headers={"Authorization": f"Bearer {restricted}"}).json()
    assert [m["id"] for m in models["data"]] == ["oa/oa-model", "oa--oa-model"]  # and its slash-free alias

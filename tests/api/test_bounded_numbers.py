"""Numbers a provider could bill for or never parse: ``n`` past GOMODEL_MAX_N and non-finite numbers (``1e999``,
``NaN``, ``Infinity``, at any depth) are a 400 naming the field, in the client's envelope, and nothing goes
upstream.
"""

from __future__ import annotations

import json
from typing import Any

import pytest
from django.test import AsyncClient

from routing.config.runtime import runtime
from routing.simulator import SimulatorServer
from tests.gateway import support

simulator = support.simulator
sim = support.sim
fresh_state = support.fresh_state

pytestmark = pytest.mark.django_db

CHAT = "/v1/chat/completions"
MESSAGES = "/v1/messages"
HI = [{"role": "user", "content": "hi"}]


@pytest.fixture(autouse=True)
def served(settings: Any, sim: SimulatorServer) -> SimulatorServer:
    settings.GOMODEL_AUTH = "open"
    runtime.swap(support.routing_table(sim.base_url))
    return sim


def post(path: str, body: str | bytes) -> Any:
    """The answer to one request, on a loop that closes the upstream connections it opened."""
    return support.run(AsyncClient().post(path, body, content_type="application/json"))


def test_it_refuses_n_over_the_limit_and_sends_nothing_upstream(sim: SimulatorServer) -> None:
    response = post(CHAT, json.dumps({"model": "primary", "messages": HI, "n": 100_000}))
    assert response.status_code == 400
    error = response.json()["error"]
    assert error["param"] == "n"
    assert error["code"] == "invalid_request"
    assert "at most 8 (GOMODEL_MAX_N)" in error["message"]
    assert sim.received() == []


def test_it_serves_n_up_to_the_limit_and_the_limit_is_a_setting(sim: SimulatorServer,
                                                                 settings: Any) -> None:
    assert post(CHAT, json.dumps({"model": "primary", "messages": HI, "n": 8})).status_code == 200
    assert sim.received("primary")[0]["body"]["n"] == 8
    settings.GOMODEL_MAX_N = 2
    refused = post(CHAT, json.dumps({"model": "primary", "messages": HI, "n": 3}))
    assert refused.status_code == 400
    assert "at most 2 (GOMODEL_MAX_N)" in refused.json()["error"]["message"]


def test_explain_refuses_n_over_the_limit_too() -> None:
    response = post("/v1/routing/explain", json.dumps({"model": "primary", "messages": HI, "n": 9}))
    assert (response.status_code, response.json()["error"]["param"]) == (400, "n")


@pytest.mark.parametrize(
    ("body", "param"),
    [('{"model": "primary", "messages": [{"role": "user", "content": "hi"}], "temperature": 1e999}', "temperature"),
     ('{"model": "primary", "messages": [{"role": "user", "content": "hi"}], "top_p": -1e999}', "top_p"),
     ('{"model": "primary", "messages": [{"role": "user", "content": "hi"}], "temperature": NaN}', "temperature"),
     ('{"model": "primary", "messages": [{"role": "user", "content": "hi"}], "frequency_penalty": Infinity}',
      "frequency_penalty"),
     ('{"model": "primary", "messages": [{"role": "user", "content": "hi", "x": [1, {"y": -Infinity}]}]}',
      "messages[0].x[1].y"),
     ('{"model": "primary", "messages": [{"role": "user", "content": "hi"}], "logit_bias": {"50256": 1e400}}',
      "logit_bias.50256")],
)
def test_it_refuses_a_non_finite_number_anywhere_naming_its_field(sim: SimulatorServer,
                                                                  body: str, param: str) -> None:
    response = post(CHAT, body)
    assert response.status_code == 400, response.content
    error = response.json()["error"]
    assert error["param"] == param
    assert error["code"] == "invalid_request"
    assert error["message"].startswith(f"{param}: expected a finite number")
    assert sim.received() == []


def test_it_refuses_a_non_finite_number_in_anthropics_envelope(sim: SimulatorServer) -> None:
    body = '{"model": "claude", "max_tokens": 5, "messages": [{"role": "user", "content": "hi"}], "temperature": 1e999}'
    response = post(MESSAGES, body)
    assert response.status_code == 400
    answer = response.json()
    assert answer["type"] == "error"
    assert answer["error"]["type"] == "invalid_request_error"
    assert answer["error"]["message"].startswith("temperature: expected a finite number")
    assert sim.received() == []


@pytest.mark.parametrize("path", ["/v1/embeddings", "/v1/responses", "/v1/messages/count_tokens"])
def test_the_other_endpoints_refuse_a_non_finite_number_too(path: str) -> None:
    response = post(path, '{"model": "primary", "input": "hi", "dimensions": 1e999}')
    assert response.status_code == 400, response.content
    assert "dimensions: expected a finite number" in response.json()["error"]["message"]


def test_large_finite_numbers_and_big_integers_still_pass(sim: SimulatorServer) -> None:
    # 1.5e308 is finite; 2**70 is refused by orjson but is valid JSON, read again with Python's json.
    body = ('{"model": "primary", "messages": [{"role": "user", "content": "hi"}], '
            '"temperature": 0.5, "metadata": {"big": 1.5e308, "huge": 1180591620717411303424}}')
    response = post(CHAT, body)
    assert response.status_code == 200, response.content
    assert len(sim.received("primary")) == 1


def test_it_refuses_a_lone_surrogate_escape_naming_its_field(sim: SimulatorServer) -> None:
    body = '{"model": "primary", "messages": [{"role": "user", "content": "hi \\ud800"}]}'
    response = post(CHAT, body)
    assert response.status_code == 400, response.content
    error = response.json()["error"]
    assert error["param"] == "messages[0].content"
    assert "lone surrogate" in error["message"]
    assert sim.received() == []


def test_invalid_json_is_still_refused_as_such() -> None:
    response = post(CHAT, b'{"model": "primary", "messages": [')
    assert response.status_code == 400
    assert response.json()["error"]["code"] == "invalid_json"
    assert response.json()["error"]["message"].startswith("The request body is not valid JSON: ")

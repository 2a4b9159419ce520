"""Routing policies through a running gateway with the openai and the anthropic SDK.

The virtual model ``trio`` (adaptive) lists ``az/az-model`` (dear, code), ``oa/oa-model`` and ``an/an-model``
(cheap, writing); the tier alias ``normal`` sends hard requests to it. Policies: ``default`` (priority, the
declared order), ``cheap`` (cost), ``writer`` (strength writing), ``penny`` (a cost bound nothing meets, falling
back to ``cheap``), ``seer`` (strength vision, which no model has, falling back to ``default``) and ``strict``
(strength math, no fallback).
"""

from __future__ import annotations

import json
import tempfile
import time
from collections.abc import Iterator
from pathlib import Path
from typing import Any

import anthropic
import httpx2
import openai
import psycopg
import pytest
import yaml
from psycopg.rows import dict_row

from routing.simulator.server import SimulatorServer
from tests.e2e.conftest import SIM_KEY, fresh_database, gateway_config
from tests.gateway_process import Gateway, run_gateway

pytestmark = pytest.mark.services

POLICIES = {
    "default": {"strategy": "priority"},
    "cheap": {"strategy": "cost"},
    "writer": {"strategy": "strength", "strength": "writing"},
    "penny": {"strategy": "cost", "max_cost_usd": 1e-9, "fallback_to": "cheap"},
    "seer": {"strategy": "priority", "strength": "vision", "fallback_to": "default"},
    "strict": {"strategy": "priority", "strength": "math"},
}


@pytest.fixture(scope="module")
def policy_gateway(simulator: SimulatorServer) -> Iterator[Gateway]:
    config = gateway_config(simulator.base_url)
    by_name = {f"{m['provider']}/{m['upstream']}": m for m in config["models"]}
    by_name["az/az-model"].update(input_price=5, output_price=10, strengths=["code"])
    by_name["an/an-model"].update(input_price=0.1, output_price=0.2, strengths=["writing"])
    config["virtual_models"].append({"source": "trio", "strategy": "adaptive", "targets": [
        {"model": "az/az-model"}, {"model": "oa/oa-model"}, {"model": "an/an-model"}]})
    config["tier_routes"]["normal"]["hard"] = "trio"
    config["routing_policies"] = POLICIES
    with tempfile.TemporaryDirectory() as tmp, fresh_database("policies") as url:
        path = Path(tmp) / "config.yaml"
        path.write_text(yaml.safe_dump(config))
        env = {"DATABASE_URL": url, "GOMODEL_CONFIG": str(path), "E2E_SIM_KEY": SIM_KEY, "GOMODEL_MASTER_KEY": "",
               "GOMODEL_AUTH": "open", "CELERY_BROKER_URL": ""}
        with run_gateway(Path(tmp), env) as gateway:
            gateway.database_url = url  # type: ignore[attr-defined]
            yield gateway


@pytest.fixture
def oai(policy_gateway: Gateway) -> Iterator[openai.OpenAI]:
    with openai.OpenAI(base_url=f"{policy_gateway.base_url}/v1", api_key="unused-on-loopback",
                       max_retries=0) as client:
        yield client


@pytest.fixture
def claude(policy_gateway: Gateway) -> Iterator[anthropic.Anthropic]:
    with anthropic.Anthropic(base_url=policy_gateway.base_url, api_key="unused-on-loopback",
                             max_retries=0) as client:
        yield client


def ask(oai: openai.OpenAI, model: str = "trio", policy: str | None = None, **extra: Any) -> Any:
    headers = dict(extra.pop("headers", {}))
    if policy:
        headers["X-Routing-Policy"] = policy
    raw = oai.chat.completions.with_raw_response.create(
        model=model, messages=[{"role": "user", "content": "Hello there"}], extra_headers=headers or None, **extra)
    assert raw.parse().choices[0].message.content
    return raw


def policy_and_target(raw: Any) -> tuple[str, str]:
    return raw.headers["x-gomodel-policy"], raw.headers["x-gomodel-target"]


def audit_row(gateway: Gateway, request_id: str, timeout: float = 10.0) -> dict[str, Any]:
    deadline = time.monotonic() + timeout
    url = gateway.database_url.replace("postgres://", "postgresql://")  # type: ignore[attr-defined]
    with psycopg.connect(url, row_factory=dict_row) as conn:
        while True:
            row = conn.execute("SELECT * FROM audit_auditrevision WHERE request_id = %s", (request_id,)).fetchone()
            if row is not None:
                return row
            if time.monotonic() > deadline:
                raise AssertionError(f"no audit revision for {request_id}")
            time.sleep(0.1)


def test_the_openai_sdk_selects_policies_by_header_and_body(oai: openai.OpenAI, simulator: SimulatorServer) -> None:
    assert policy_and_target(ask(oai)) == ("default", "az/az-model")  # the default policy: declared order
    assert policy_and_target(ask(oai, policy="cheap")) == ("cheap", "an/an-model")
    assert policy_and_target(ask(oai, policy="writer")) == ("writer", "an/an-model")
    by_body = ask(oai, metadata={"routing_policy": "cheap", "team": "docs"})
    assert policy_and_target(by_body) == ("cheap", "an/an-model")
    simulator.wait_until_idle()
    assert "routing_policy" not in json.dumps(simulator.received(model="an-model")[-1]["body"])


def test_a_tier_routes_virtual_model_is_under_the_policy(oai: openai.OpenAI) -> None:
    hard = ask(oai, "normal", "cheap", headers={"X-GoModel-Tier": "hard"})
    assert policy_and_target(hard) == ("cheap", "an/an-model")
    assert hard.headers["x-gomodel-pro-tier-target"] == "trio"


def test_a_fallback_step_is_in_the_header_and_the_audit_row(oai: openai.OpenAI, policy_gateway: Gateway) -> None:
    raw = ask(oai, policy="penny")
    assert policy_and_target(raw) == ("penny>cheap", "an/an-model")
    assert policy_and_target(ask(oai, policy="seer")) == ("seer>default", "az/az-model")
    row = audit_row(policy_gateway, raw.headers["x-request-id"])
    assert (row["policy"], row["policy_chain"]) == ("cheap", "penny>cheap")
    assert row["policy_detail"]["steps"] == [
        {"from": "penny", "to": "cheap", "virtual_model": "trio", "reason": "max_cost_usd"}]
    assert row["policy_detail"]["source"] == "header"


def test_unknown_policies_are_400_and_unmet_ones_503(oai: openai.OpenAI) -> None:
    with pytest.raises(openai.BadRequestError) as caught:
        ask(oai, policy="nope")
    body: Any = caught.value.body
    assert (body["param"], body["code"]) == ("X-Routing-Policy", "unknown_routing_policy")
    with pytest.raises(openai.BadRequestError) as in_body:
        ask(oai, metadata={"routing_policy": "nope"})
    assert in_body.value.body["param"] == "metadata.routing_policy"  # type: ignore[index]
    with pytest.raises(openai.InternalServerError) as unmet:
        ask(oai, policy="strict")
    assert unmet.value.status_code == 503
    assert unmet.value.body["code"] == "routing_policy_unmet"  # type: ignore[index]
    assert "`strict`" in unmet.value.message
    assert "strength=math" in unmet.value.message
    assert unmet.value.response.headers["x-gomodel-policy"] == "strict"


def test_the_anthropic_sdk_selects_policies_and_hears_errors_in_its_envelope(claude: anthropic.Anthropic) -> None:
    raw = claude.messages.with_raw_response.create(
        model="trio", max_tokens=64, messages=[{"role": "user", "content": "Hello"}],
        extra_headers={"X-Routing-Policy": "penny"})
    assert raw.parse().content
    assert (raw.headers["x-gomodel-policy"], raw.headers["x-gomodel-target"]) == ("penny>cheap", "an/an-model")
    by_body = claude.messages.with_raw_response.create(
        model="trio", max_tokens=64, messages=[{"role": "user", "content": "Hello"}],
        extra_body={"metadata": {"routing_policy": "writer"}})
    assert by_body.headers["x-gomodel-policy"] == "writer"
    with pytest.raises(anthropic.BadRequestError) as caught:
        claude.messages.create(model="trio", max_tokens=64, messages=[{"role": "user", "content": "Hello"}],
                               extra_headers={"X-Routing-Policy": "nope"})
    assert "X-Routing-Policy" in caught.value.message
    with pytest.raises(anthropic.InternalServerError) as unmet:
        claude.messages.create(model="trio", max_tokens=64, messages=[{"role": "user", "content": "Hello"}],
                               extra_headers={"X-Routing-Policy": "strict"})
    assert unmet.value.status_code == 503
    assert "strict" in unmet.value.message


def test_explain_shows_the_policy(policy_gateway: Gateway) -> None:
    explained = httpx2.post(f"{policy_gateway.base_url}/v1/routing/explain", headers={"X-Routing-Policy": "penny"},
                            json={"model": "trio", "messages": [{"role": "user", "content": "Hi"}]}, timeout=30).json()
    assert (explained["policy"]["chain"], explained["policy"]["policy"]) == ("penny>cheap", "cheap")
    assert explained["candidates"] == ["an/an-model", "oa/oa-model", "az/az-model"]

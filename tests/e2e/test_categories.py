"""Category routing through a running gateway with the openai SDK: a category route whose code target is a tier alias.

``smart`` sends code to the tier alias ``normal`` (easy ``oa/oa-model``, hard the ``pool``), writing to
``an/an-model`` (the Anthropic adapter) and math to ``ge/ge-model`` (Gemini); anything else to ``az/az-model``.
"""

from __future__ import annotations

import tempfile
import time
from collections.abc import Iterator
from pathlib import Path
from typing import Any

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

ROUTE = {"code": "normal", "writing": "an/an-model", "math": "ge/ge-model", "default": "az/az-model"}


@pytest.fixture(scope="module")
def category_gateway(simulator: SimulatorServer) -> Iterator[Gateway]:
    config = gateway_config(simulator.base_url)
    config["category_routes"] = {"smart": ROUTE}
    config["models"][0]["strengths"] = ["code", "general"]
    with tempfile.TemporaryDirectory() as tmp, fresh_database("categories") as url:
        path = Path(tmp) / "config.yaml"
        path.write_text(yaml.safe_dump(config))
        env = {"DATABASE_URL": url, "GOMODEL_CONFIG": str(path), "E2E_SIM_KEY": SIM_KEY, "GOMODEL_MASTER_KEY": "",
               "GOMODEL_AUTH": "open", "CELERY_BROKER_URL": ""}
        with run_gateway(Path(tmp), env) as gateway:
            gateway.database_url = url  # type: ignore[attr-defined]
            yield gateway


@pytest.fixture
def oai(category_gateway: Gateway) -> Iterator[openai.OpenAI]:
    with openai.OpenAI(base_url=f"{category_gateway.base_url}/v1", api_key="unused-on-loopback",
                       max_retries=0) as client:
        yield client


def ask(oai: openai.OpenAI, text: str, **headers: str) -> Any:
    """The raw response (headers) of a chat completion to ``smart``; its parsed body is checked too."""
    raw = oai.chat.completions.with_raw_response.create(
        model="smart", messages=[{"role": "user", "content": text}], extra_headers=headers or None)
    completion = raw.parse()
    assert completion.choices[0].message.content
    return raw


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


def test_code_goes_through_the_tier_alias_to_its_easy_or_hard_target(
        oai: openai.OpenAI, category_gateway: Gateway, simulator: SimulatorServer) -> None:
    before = len(simulator.received(model="oa-model"))
    easy = ask(oai, "Fix the bug in my Python script")
    headers = easy.headers
    assert (headers["x-gomodel-category"], headers["x-gomodel-category-target"]) == ("code", "normal")
    assert (headers["x-gomodel-pro-tier"], headers["x-gomodel-pro-tier-target"]) == ("easy", "oa/oa-model")
    assert headers["x-gomodel-target"] == "oa/oa-model"
    simulator.wait_until_idle()
    assert len(simulator.received(model="oa-model")) == before + 1
    hard = ask(oai, "Think step by step: refactor this Python module")
    assert hard.headers["x-gomodel-category"] == "code"
    assert (hard.headers["x-gomodel-pro-tier"], hard.headers["x-gomodel-pro-tier-target"]) == ("hard", "pool")
    row = audit_row(category_gateway, hard.headers["x-request-id"])
    assert (row["category"], row["category_rule"], row["category_detail"]) == ("code", "keywords", "refactor*")
    assert (row["category_alias"], row["category_target"], row["tier"], row["tier_alias"]) == (
        "smart", "normal", "hard", "normal")
    assert row["requested_model"] == "smart"


def test_other_categories_reach_their_own_providers(oai: openai.OpenAI, simulator: SimulatorServer) -> None:
    writing = ask(oai, "Schreibe ein Gedicht über den Herbst")
    assert (writing.headers["x-gomodel-category"], writing.headers["x-gomodel-target"]) == ("writing", "an/an-model")
    assert "x-gomodel-pro-tier" not in writing.headers
    math = ask(oai, "求这个积分的值")
    assert (math.headers["x-gomodel-category"], math.headers["x-gomodel-target"]) == ("math", "ge/ge-model")
    general = ask(oai, "Hello!")
    assert (general.headers["x-gomodel-category"], general.headers["x-gomodel-target"]) == ("general", "az/az-model")
    simulator.wait_until_idle()
    assert simulator.received(model="ge-model")[-1]["status"] == 200


def test_the_header_forces_a_category_and_an_unknown_one_is_refused(oai: openai.OpenAI) -> None:
    forced = ask(oai, "Hello!", **{"X-GoModel-Category": "writing"})
    assert (forced.headers["x-gomodel-category"], forced.headers["x-gomodel-target"]) == ("writing", "an/an-model")
    with pytest.raises(openai.BadRequestError) as caught:
        ask(oai, "Hello!", **{"X-GoModel-Category": "poetry"})
    assert caught.value.status_code == 400
    body: Any = caught.value.body
    assert body["param"] == "X-GoModel-Category"
    assert "poetry" in body["message"]


def test_explain_and_models(category_gateway: Gateway) -> None:
    explained = httpx2.post(f"{category_gateway.base_url}/v1/routing/explain", json={
        "model": "smart", "messages": [{"role": "user", "content": "Please debug this"}]}, timeout=30).json()
    assert (explained["category"]["category"], explained["category"]["rule"]) == ("code", "keywords")
    assert explained["tier"]["alias"] == "normal"
    assert explained["target"] == "oa/oa-model"
    listed = httpx2.get(f"{category_gateway.base_url}/v1/models", timeout=30).json()["data"]
    by_id = {entry["id"]: entry for entry in listed}
    assert by_id["smart"]["owned_by"] == "gomodel-category-route"
    assert by_id["oa/oa-model"]["strengths"] == ["code", "general"]
    assert by_id["an/an-model"]["strengths"] == []

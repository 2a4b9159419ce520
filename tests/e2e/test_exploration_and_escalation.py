"""Cold start, exploration and capability escalation through a running gateway, with the openai SDK.

A simulator of its own: ``fast-model`` answers in about 2 ms, ``slow-model`` in about 150 ms. The gateway runs
with a high exploration share (0.5), a cold start of 2 observations and no weight floor, so a slow target is
reached only by the cold-start bonus and by exploration. Tier aliases: ``vision`` (easy: a text-only model,
hard: fast-model with images) and ``blind`` (two text-only tiers).
"""

from __future__ import annotations

import tempfile
import uuid
from collections import Counter
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
from tests.e2e.conftest import SIM_KEY, fresh_database, manage
from tests.gateway_process import Gateway, run_gateway
from tests.waiting import wait_for

pytestmark = pytest.mark.services

CAPS = ["text", "image", "tools", "json_schema"]
IMAGE_MESSAGE = [{"role": "user", "content": [
    {"type": "text", "text": "What is in this picture?"},
    {"type": "image_url", "image_url": {"url": "data:image/png;base64,iVBORw0KGgo="}},
]}]
REQUESTS = 40


def config(sim_url: str, explore_targets: list[str]) -> dict[str, Any]:
    model = lambda upstream, caps: {"provider": "oa", "upstream": upstream, "input_price": 1,  # noqa: E731
                                    "output_price": 2, "capabilities": caps}
    return {
        "providers": [{"name": "oa", "kind": "openai", "base_url": f"{sim_url}/v1", "api_key": "${E2E_SIM_KEY}"}],
        "models": [model("fast-model", CAPS), model("slow-model", CAPS), model("text-only", ["text"]),
                   model("text-two", ["text"])],
        "virtual_models": [{"source": "explore", "strategy": "adaptive", "session_affinity": False,
                            "targets": [{"model": m} for m in explore_targets]}],
        "tier_routes": {"vision": {"easy": "oa/text-only", "hard": "oa/fast-model"},
                        "blind": {"easy": "oa/text-only", "hard": "oa/text-two"}},
        "settings": {"exploration": 0.5, "cold_start_observations": 2, "min_weight_fraction": 0.0},
    }


@pytest.fixture(scope="module")
def own_simulator() -> Iterator[SimulatorServer]:
    models = {"fast-model": {"latency_ms": 2}, "slow-model": {"latency_ms": 150}, "text-only": {"latency_ms": 1},
              "text-two": {"latency_ms": 1}}
    with SimulatorServer(config={"models": models}) as sim:
        yield sim


@pytest.fixture(scope="module")
def gateway(own_simulator: SimulatorServer) -> Iterator[Gateway]:
    with tempfile.TemporaryDirectory() as tmp, fresh_database("explore") as url:
        path = Path(tmp) / "config.yaml"
        path.write_text(yaml.safe_dump(config(own_simulator.base_url, ["oa/fast-model"])))
        env = {"DATABASE_URL": url, "GOMODEL_CONFIG": str(path), "E2E_SIM_KEY": SIM_KEY, "GOMODEL_MASTER_KEY": "",
               "GOMODEL_AUTH": "open", "CELERY_BROKER_URL": "", "GOMODEL_CONFIG_POLL_SECONDS": "0.2"}
        with run_gateway(Path(tmp), env) as running:
            running.database_url = url  # type: ignore[attr-defined]
            running.config_dir = Path(tmp)  # type: ignore[attr-defined]
            yield running


@pytest.fixture
def oai(gateway: Gateway) -> Iterator[openai.OpenAI]:
    with openai.OpenAI(base_url=f"{gateway.base_url}/v1", api_key="unused-on-loopback", max_retries=0) as client:
        yield client


def explain(gateway: Gateway, model: str, messages: list[dict[str, Any]] | None = None,
            headers: dict[str, str] | None = None) -> dict[str, Any]:
    body = {"model": model, "messages": messages or [{"role": "user", "content": "hello"}]}
    response = httpx2.post(f"{gateway.base_url}/v1/routing/explain", json=body, headers=headers, timeout=30)
    assert response.status_code == 200, response.text
    return response.json()  # type: ignore[no-any-return]


def audit_rows(gateway: Gateway, request_ids: list[str]) -> list[dict[str, Any]]:
    """The audit revisions of ``request_ids`` once all are written (the publisher writes in the background)."""
    url = gateway.database_url.replace("postgres://", "postgresql://")  # type: ignore[attr-defined]
    rows: list[dict[str, Any]] = []
    with psycopg.connect(url, row_factory=dict_row, autocommit=True) as conn:
        def written() -> bool:
            nonlocal rows
            rows = conn.execute("SELECT * FROM audit_auditrevision WHERE request_id = ANY(%s)",
                                (request_ids,)).fetchall()
            return len(rows) == len(request_ids)
        wait_for(written, 15, "the audit revisions")
    return rows


def test_a_new_target_is_in_cold_start_and_exploration_sends_it_traffic(
        gateway: Gateway, oai: openai.OpenAI, own_simulator: SimulatorServer) -> None:
    for _ in range(4):  # the only target earns its estimate
        oai.chat.completions.create(model="explore", messages=[{"role": "user", "content": "hi"}])
    path = gateway.config_dir / "grown.yaml"  # type: ignore[attr-defined]
    path.write_text(yaml.safe_dump(config(own_simulator.base_url, ["oa/fast-model", "oa/slow-model"])))
    manage(gateway.database_url, "loadconfig", str(path), env={"E2E_SIM_KEY": SIM_KEY})  # type: ignore[attr-defined]
    wait_for(lambda: len(explain(gateway, "explore")["selections"][0]["candidates"]) == 2, 15, "the hot reload")

    [before] = explain(gateway, "explore")["selections"]
    views = {c["target"]: c for c in before["candidates"]}
    assert (views["oa/slow-model"]["cold_start"], views["oa/slow-model"]["observations"]) == (True, 0)
    assert views["oa/fast-model"]["cold_start"] is False
    assert before["exploration"] == 0.5
    assert before["exploration_targets"] == ["oa/fast-model", "oa/slow-model"]

    own_simulator.reset()
    request_ids = []
    for index in range(REQUESTS):
        raw = oai.chat.completions.with_raw_response.create(
            model="explore", messages=[{"role": "user", "content": f"question {index}"}])
        request_ids.append(raw.headers["x-request-id"])
    served = Counter(record["model"] for record in own_simulator.received())
    assert served["slow-model"] >= 3  # cold start, then about a quarter of the picks by exploration

    [after] = explain(gateway, "explore")["selections"]
    slow = next(c for c in after["candidates"] if c["target"] == "oa/slow-model")
    assert slow["observations"] >= 3
    assert slow["cold_start"] is False

    rows = audit_rows(gateway, request_ids)
    explored = [r for r in rows if r["selection_why"].startswith("exploration: uniform draw among 2 healthy")]
    assert explored
    assert any("cold start: " in r["selection_why"] for r in rows)
    assert all(len(r["candidates"]) == 2 and "cold_start" in r["candidates"][0] for r in rows)


def test_an_image_to_a_text_only_easy_tier_lands_on_hard(gateway: Gateway, oai: openai.OpenAI) -> None:
    raw = oai.chat.completions.with_raw_response.create(model="vision", messages=IMAGE_MESSAGE)
    assert raw.parse().choices[0].message.content
    assert raw.headers["x-gomodel-pro-tier"] == "hard"
    assert raw.headers["x-gomodel-pro-tier-escalated"] == "capability"
    assert raw.headers["x-gomodel-target"] == "oa/fast-model"
    [row] = audit_rows(gateway, [raw.headers["x-request-id"]])
    assert (row["tier"], row["tier_escalated"], row["tier_escalation"]) == ("hard", True, "capability")
    assert {"name": "capability", "points": 0, "detail": "oa/text-only lacks image"} in row["signals"]

    pinned = explain(gateway, "vision", IMAGE_MESSAGE)  # the same session: the escalation raised its pin
    assert (pinned["tier"]["pin_before"], pinned["tier"]["tier"], pinned["tier"]["escalation"]) == ("hard", "hard", "")
    fresh = explain(gateway, "vision", IMAGE_MESSAGE, headers={"X-Session-Id": uuid.uuid4().hex})
    assert (fresh["tier"]["verdict_tier"], fresh["tier"]["tier"], fresh["tier"]["escalation"]) == \
        ("easy", "hard", "capability")


def test_no_tier_can_serve_it_is_a_400_naming_the_capability(gateway: Gateway, oai: openai.OpenAI) -> None:
    with pytest.raises(openai.BadRequestError) as caught:
        oai.chat.completions.create(model="blind", messages=IMAGE_MESSAGE)
    error = caught.value
    assert error.status_code == 400
    assert error.code == "unsupported_capability"
    assert "No tier of `blind` can serve this request" in error.message
    assert "`image`" in error.message
    assert error.param == "messages[0].content[1]"

"""Smart tier routing through a running gateway: verdict headers, overrides, escalate-only session pins."""

from __future__ import annotations

import uuid
from collections.abc import Iterator
from pathlib import Path

import httpx2
import pytest
import redis

from routing.simulator.server import SimulatorServer
from tests.e2e.conftest import SIM_KEY
from tests.gateway_process import Gateway, run_gateway

pytestmark = pytest.mark.services


def ask(gateway: Gateway, text: str, *, session: str | None = None, headers: dict[str, str] | None = None,
        **extra: object) -> httpx2.Response:
    all_headers = dict(headers or {})
    if session:
        all_headers["X-Session-Id"] = session
    body = {"model": "normal", "messages": [{"role": "user", "content": text}], **extra}
    response = httpx2.post(f"{gateway.base_url}/v1/chat/completions", json=body, headers=all_headers, timeout=30)
    assert response.status_code == 200, response.text
    return response


def tier(response: httpx2.Response) -> tuple[str, str, int]:
    h = response.headers
    return h["x-gomodel-pro-tier"], h["x-gomodel-pro-tier-target"], int(h["x-gomodel-pro-tier-score"])


def test_short_chat_is_easy_and_effort_keywords_are_hard(gateway: Gateway) -> None:
    assert tier(ask(gateway, "hi there")) == ("easy", "oa/oa-model", 0)
    hard = ask(gateway, "Think step by step about why this fails")
    assert tier(hard) == ("hard", "pool", 4)
    assert hard.headers["x-gomodel-target"] in ("oa/oa-model", "an/an-model")
    assert tier(ask(gateway, "Bitte Schritt für Schritt erklären"))[0] == "hard"
    assert tier(ask(gateway, "请一步一步分析根本原因"))[0] == "hard"


def test_the_worked_examples(gateway: Gateway) -> None:
    snippet = "```python\nprint('x')\n```"
    assert tier(ask(gateway, snippet)) == ("easy", "oa/oa-model", 3)
    assert tier(ask(gateway, snippet + "\n" + "context " * 260)) == ("hard", "pool", 4)


def test_explicit_reasoning_goes_straight_to_hard(gateway: Gateway) -> None:
    assert tier(ask(gateway, "hi", reasoning_effort="high"))[0] == "hard"
    response = httpx2.post(f"{gateway.base_url}/v1/messages", headers={"anthropic-version": "2023-06-01"}, json={
        "model": "normal", "max_tokens": 2048, "thinking": {"type": "enabled", "budget_tokens": 1024},
        "messages": [{"role": "user", "content": "hi"}]})
    assert response.status_code == 200, response.text
    assert tier(response)[0] == "hard"


def test_the_session_pin_only_escalates(gateway: Gateway) -> None:
    session = uuid.uuid4().hex
    assert tier(ask(gateway, "hello", session=session))[0] == "easy"
    assert tier(ask(gateway, "Now think hard about the root cause", session=session))[0] == "hard"
    thanks = ask(gateway, "thanks!", session=session)
    assert tier(thanks)[:2] == ("hard", "pool")  # pinned: a follow-up never drops to the cheap tier
    assert tier(thanks)[2] == 0


def test_overrides_leave_the_pin_alone(gateway: Gateway) -> None:
    session = uuid.uuid4().hex
    ask(gateway, "think step by step", session=session)
    forced = ask(gateway, "thanks", session=session, headers={"X-GoModel-Tier": "easy"})
    assert tier(forced)[0] == "easy"
    assert tier(ask(gateway, "thanks", session=session))[0] == "hard"  # the forced request changed nothing
    bypassed = ask(gateway, "think step by step", session=uuid.uuid4().hex, headers={"X-GoModel-Smart-Routing": "off"})
    assert tier(bypassed)[0] == "easy"  # not classified, no pin: the easy tier


def test_a_bad_tier_header_is_a_400(gateway: Gateway) -> None:
    response = httpx2.post(f"{gateway.base_url}/v1/chat/completions", headers={"X-GoModel-Tier": "medium"},
                           json={"model": "normal", "messages": [{"role": "user", "content": "x"}]})
    assert response.status_code == 400
    assert response.json()["error"]["param"] == "X-GoModel-Tier"


def test_explain_returns_the_verdict_without_calling_upstream(gateway: Gateway, sim) -> None:  # type: ignore[no-untyped-def]
    sim.reset()
    response = httpx2.post(f"{gateway.base_url}/v1/routing/explain", json={
        "model": "normal", "messages": [{"role": "user", "content": "```py\nx = 1\n```"}],
        "tools": [{"type": "function", "function": {"name": "f", "parameters": {"type": "object"}}}]})
    data = response.json()
    assert data["tier"]["tier"] == "hard"
    assert data["tier"]["score"] == 5
    assert {s["name"]: s["points"] for s in data["tier"]["signals"]} == {"code": 3, "tools": 2}
    assert data["candidates"]
    assert data["selections"][0]["virtual_model"] == "pool"
    assert sim.received() == []


def test_smart_routing_metrics_are_exported(gateway: Gateway) -> None:
    ask(gateway, "think step by step")
    text = httpx2.get(f"{gateway.base_url}/metrics").text
    assert 'gomodel_pro_smartroute_requests_total{alias="normal",tier="hard"}' in text
    assert "gomodel_pro_smartroute_score_bucket" in text
    assert "gomodel_requests_total" in text


# ---------------------------------------------------------------------------------------------------------
# Two worker processes share pins through Redis.
# ---------------------------------------------------------------------------------------------------------


@pytest.fixture
def redis_db() -> Iterator[str]:
    url = "redis://127.0.0.1:6379/14"
    client = redis.Redis.from_url(url)
    client.flushdb()
    yield url
    client.flushdb()
    client.close()


def test_two_workers_share_the_pin_through_redis(tmp_path: Path, simulator: SimulatorServer,
                                                 e2e_database_url: str, gateway: Gateway, redis_db: str) -> None:
    env = {"DATABASE_URL": e2e_database_url, "E2E_SIM_KEY": SIM_KEY, "REDIS_URL": redis_db, "GOMODEL_AUTH": "open"}
    with run_gateway(tmp_path, env) as one, run_gateway(tmp_path, env) as two:
        session = uuid.uuid4().hex
        assert tier(ask(one, "think step by step", session=session))[0] == "hard"
        assert tier(ask(two, "thanks!", session=session))[0] == "hard"
        # Without the shared store the other worker knows nothing of the pin.
        other = uuid.uuid4().hex
        ask(one, "think step by step", session=other)
        assert tier(ask(gateway, "thanks!", session=other))[0] == "easy"

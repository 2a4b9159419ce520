"""The production server: the same client-facing behaviour under granian (2 workers) as under uvicorn.

The rest of the end-to-end suite runs the gateway under uvicorn; the README's production command and the
benchmark use granian, whose ASGI implementation (body messages, disconnects, streaming sends) differs.
"""

from __future__ import annotations

import json
import time
from collections.abc import Iterator
from pathlib import Path

import anthropic
import httpx2
import openai
import pytest
import yaml

from routing.simulator.server import SimulatorServer
from tests.e2e.conftest import SIM_KEY, gateway_config
from tests.gateway_process import Gateway, run_gateway

pytestmark = pytest.mark.services

BODY_LIMIT = 64 * 1024


@pytest.fixture(scope="module")
def granian_gateway(tmp_path_factory: pytest.TempPathFactory, simulator: SimulatorServer,
                    e2e_database_url: str) -> Iterator[Gateway]:
    tmp = tmp_path_factory.mktemp("granian")
    config = tmp / "config.yaml"
    config.write_text(yaml.safe_dump(gateway_config(simulator.base_url)))
    env = {"DATABASE_URL": e2e_database_url, "GOMODEL_CONFIG": str(config), "E2E_SIM_KEY": SIM_KEY,
           "GOMODEL_MASTER_KEY": "", "CELERY_BROKER_URL": "", "GOMODEL_MAX_BODY_BYTES": str(BODY_LIMIT)}
    with run_gateway(Path(tmp), env, server="granian") as running:
        yield running


def test_openai_sdk_plain_and_streamed(granian_gateway: Gateway) -> None:
    with openai.OpenAI(base_url=f"{granian_gateway.base_url}/v1", api_key="unused", max_retries=0) as client:
        raw = client.chat.completions.with_raw_response.create(
            model="oa/oa-model", messages=[{"role": "user", "content": "Hello granian"}])
        assert raw.headers["x-gomodel-target"] == "oa/oa-model"
        assert "Hello granian" in raw.parse().choices[0].message.content
        chunks = list(client.chat.completions.create(
            model="an/an-model", stream=True, stream_options={"include_usage": True},
            messages=[{"role": "user", "content": "Stream through granian"}]))
    assert "Stream through granian" in "".join(c.choices[0].delta.content or "" for c in chunks if c.choices)
    assert chunks[-1].usage is not None and chunks[-1].usage.completion_tokens > 0


def test_anthropic_sdk_plain(granian_gateway: Gateway) -> None:
    with anthropic.Anthropic(base_url=granian_gateway.base_url, api_key="unused", max_retries=0) as client:
        message = client.messages.create(model="ge/ge-model", max_tokens=100,
                                         messages=[{"role": "user", "content": "Hello from Claude's SDK"}])
    assert message.type == "message" and "Hello from Claude's SDK" in message.content[0].text


def test_a_body_over_the_limit_is_a_413_in_the_clients_envelope(granian_gateway: Gateway) -> None:
    huge = json.dumps({"model": "oa/oa-model", "messages": [{"role": "user", "content": "x" * BODY_LIMIT}]})
    response = httpx2.post(f"{granian_gateway.base_url}/v1/messages", content=huge, timeout=30,
                           headers={"content-type": "application/json", "anthropic-version": "2023-06-01"})
    assert response.status_code == 413
    error = response.json()
    assert error["type"] == "error" and f"{BODY_LIMIT} bytes" in error["error"]["message"]


def test_a_client_that_goes_away_cancels_the_upstream_request(granian_gateway: Gateway, sim) -> None:  # type: ignore[no-untyped-def]
    sim.reset()
    body = {"model": "oa/slow-stream", "stream": True, "messages": [{"role": "user", "content": "a long story"}]}
    with httpx2.stream("POST", f"{granian_gateway.base_url}/v1/chat/completions", json=body, timeout=30) as r:
        for line in r.iter_lines():
            if line.startswith("data: {"):
                break  # read the first chunk, then hang up
    deadline = time.monotonic() + 5
    outcome = None
    while time.monotonic() < deadline:
        records = sim.received(model="slow-stream")
        outcome = records[-1].get("outcome") if records else None
        if outcome in ("disconnected", "completed"):
            break
        time.sleep(0.05)
    assert outcome == "disconnected"

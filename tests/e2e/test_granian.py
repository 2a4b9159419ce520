"""The production server: the same client-facing behaviour under granian (2 workers) as under uvicorn.

The rest of the end-to-end suite runs the gateway under uvicorn; the README's production command and the
benchmark use granian, whose ASGI implementation (body messages, disconnects, streaming sends) differs.
"""

from __future__ import annotations

import json
from collections.abc import Iterator
from pathlib import Path

import anthropic
import httpx2
import openai
import pytest

from routing.simulator.server import SimulatorServer
from tests.e2e.conftest import assert_hangup_cancels_upstream, open_gateway
from tests.gateway_process import Gateway

pytestmark = pytest.mark.services

BODY_LIMIT = 64 * 1024


@pytest.fixture(scope="module")
def granian_gateway(tmp_path_factory: pytest.TempPathFactory, simulator: SimulatorServer,
                    e2e_database_url: str) -> Iterator[Gateway]:
    with open_gateway(Path(tmp_path_factory.mktemp("granian")), simulator, e2e_database_url, server="granian",
                      env={"GOMODEL_MAX_BODY_BYTES": str(BODY_LIMIT)}) as running:
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
    assert chunks[-1].usage is not None
    assert chunks[-1].usage.completion_tokens > 0


def test_anthropic_sdk_plain(granian_gateway: Gateway) -> None:
    with anthropic.Anthropic(base_url=granian_gateway.base_url, api_key="unused", max_retries=0) as client:
        message = client.messages.create(model="ge/ge-model", max_tokens=100,
                                         messages=[{"role": "user", "content": "Hello from Claude's SDK"}])
    assert message.type == "message"
    assert "Hello from Claude's SDK" in message.content[0].text


def test_a_body_over_the_limit_is_a_413_in_the_clients_envelope(granian_gateway: Gateway) -> None:
    huge = json.dumps({"model": "oa/oa-model", "messages": [{"role": "user", "content": "x" * BODY_LIMIT}]})
    response = httpx2.post(f"{granian_gateway.base_url}/v1/messages", content=huge, timeout=30,
                           headers={"content-type": "application/json", "anthropic-version": "2023-06-01"})
    assert response.status_code == 413
    error = response.json()
    assert error["type"] == "error"
    assert f"{BODY_LIMIT} bytes" in error["error"]["message"]


def test_a_client_that_goes_away_cancels_the_upstream_request(granian_gateway: Gateway, sim) -> None:  # type: ignore[no-untyped-def]
    assert_hangup_cancels_upstream(granian_gateway, sim)

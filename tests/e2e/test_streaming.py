"""Streams reach the client as the provider sends them, and a client that goes away cancels the upstream."""

from __future__ import annotations

import json

import httpx2
import pytest

from tests.e2e.conftest import assert_hangup_cancels_upstream
from tests.gateway_process import Gateway

pytestmark = pytest.mark.services


def test_chunks_reach_the_client_while_the_provider_is_still_streaming(gateway: Gateway, sim) -> None:  # type: ignore[no-untyped-def]
    # The simulator sends a content chunk every 150 ms. At each chunk the client reads, the provider's
    # stream is still running (its record pending) unless the gateway held the chunks back.
    before = len(sim.received(model="slow-stream"))
    still_streaming: list[bool] = []
    body = {"model": "oa/slow-stream", "stream": True, "messages": [{"role": "user", "content": "tell me"}]}
    with httpx2.stream("POST", f"{gateway.base_url}/v1/chat/completions", json=body, timeout=30) as response:
        assert response.status_code == 200
        assert response.headers["content-type"].startswith("text/event-stream")
        for line in response.iter_lines():
            if line.startswith("data: {"):
                chunk = json.loads(line[6:])
                if chunk["choices"] and chunk["choices"][0]["delta"].get("content"):
                    [record] = sim.received(model="slow-stream")[before:]
                    still_streaming.append(record["outcome"] == "pending")
    assert len(still_streaming) >= 5, still_streaming
    # All but the last chunk (the provider ends right after it) arrive mid-stream; one straggler allowed.
    assert sum(still_streaming[:-1]) >= len(still_streaming) - 2, still_streaming


def test_a_client_that_goes_away_cancels_the_upstream_request(gateway: Gateway, sim) -> None:  # type: ignore[no-untyped-def]
    assert_hangup_cancels_upstream(gateway, sim)


def test_anthropic_stream_events_come_in_anthropic_shape(gateway: Gateway) -> None:
    body = {"model": "oa/oa-model", "max_tokens": 100, "stream": True,
            "messages": [{"role": "user", "content": "hi"}]}
    events = []
    with httpx2.stream("POST", f"{gateway.base_url}/v1/messages", json=body, timeout=30,
                       headers={"anthropic-version": "2023-06-01"}) as response:
        for line in response.iter_lines():
            if line.startswith("event: "):
                events.append(line[7:])
    assert events[0] == "message_start"
    assert events[-1] == "message_stop"
    assert "content_block_delta" in events
    assert "message_delta" in events

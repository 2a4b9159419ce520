"""Streams reach the client as the provider sends them, and a client that goes away cancels the upstream."""

from __future__ import annotations

import json
import time

import httpx2
import pytest

from tests.e2e.conftest import assert_hangup_cancels_upstream
from tests.gateway_process import Gateway

pytestmark = pytest.mark.services


def test_chunks_arrive_spaced_as_the_simulator_sent_them(gateway: Gateway, sim) -> None:  # type: ignore[no-untyped-def]
    arrivals: list[float] = []
    body = {"model": "oa/slow-stream", "stream": True, "messages": [{"role": "user", "content": "tell me"}]}
    with httpx2.stream("POST", f"{gateway.base_url}/v1/chat/completions", json=body, timeout=30) as response:
        assert response.status_code == 200
        assert response.headers["content-type"].startswith("text/event-stream")
        for line in response.iter_lines():
            if line.startswith("data: {"):
                chunk = json.loads(line[6:])
                if chunk["choices"] and chunk["choices"][0]["delta"].get("content"):
                    arrivals.append(time.monotonic())
    gaps = [b - a for a, b in zip(arrivals, arrivals[1:], strict=False)]
    # The simulator waits 150 ms between chunks; a buffering gateway would deliver them all at once.
    assert len(arrivals) >= 5, arrivals
    assert arrivals[-1] - arrivals[0] >= 0.5
    assert sum(1 for gap in gaps if gap >= 0.09) >= len(gaps) - 1, gaps


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
    assert events[0] == "message_start" and events[-1] == "message_stop"
    assert "content_block_delta" in events and "message_delta" in events

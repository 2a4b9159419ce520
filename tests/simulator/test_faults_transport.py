"""Faults in the transport: connection refused or reset, held requests, slow answers, cut, failing and broken streams.

Timing assertions use generous upper margins (the machine may be loaded) and exact lower bounds (asyncio never
wakes early).
"""

from __future__ import annotations

import json
import time
from typing import Any

import httpx2 as httpx
import pytest

from routing.simulator import SimulatorServer, unused_loopback_url
from tests.simulator.wire_helpers import WIRES, request_for, sse_events

FINAL_MARKERS = {"openai": "[DONE]", "azure": "[DONE]", "anthropic": "message_stop", "gemini": "finishReason"}


def send(client: httpx.Client, wire: str, model: str, **extra: Any) -> httpx.Response:
    path, headers, body = request_for(wire, model, **extra)
    return client.post(path, json=body, headers=headers)


def read_until_error(client: httpx.Client, wire: str, model: str, **extra: Any) -> tuple[str, Exception | None]:
    """The streamed text received before the connection failed, and the failure (None if it ended cleanly)."""
    path, headers, body = request_for(wire, model, stream=True, **extra)
    received = []
    try:
        with client.stream("POST", path, json=body, headers=headers) as response:
            for piece in response.iter_text():
                received.append(piece)
    except httpx.HTTPError as exc:
        return "".join(received), exc
    return "".join(received), None


def outcome_of(sim: SimulatorServer, model: str) -> str:
    sim.wait_until_idle()
    return str(sim.received(model)[-1]["outcome"])


@pytest.mark.parametrize("wire", WIRES)
def test_connect_refused_closes_the_connection_without_a_response(sim: SimulatorServer, client: httpx.Client,
                                                                  wire: str) -> None:
    sim.set_fault("m", {"kind": "connect_refused", "times": 1})

    with pytest.raises(httpx.RemoteProtocolError, match="without sending a response"):
        send(client, wire, "m")

    assert send(client, wire, "m").status_code == 200
    sim.wait_until_idle()
    assert [r["outcome"] for r in sim.received("m")] == ["refused", "completed"]
    assert sim.received("m")[0]["status"] is None


def test_connect_refused_with_reset_resets_the_connection(sim: SimulatorServer, client: httpx.Client) -> None:
    sim.set_fault("m", {"kind": "connect_refused", "reset": True})

    with pytest.raises((httpx.ReadError, httpx.RemoteProtocolError)):
        send(client, "openai", "m")


def test_an_unused_loopback_url_refuses_connections() -> None:
    with pytest.raises(httpx.ConnectError):
        httpx.post(unused_loopback_url() + "/v1/chat/completions", json={})


def test_a_timeout_fault_holds_the_request_until_the_client_gives_up(sim: SimulatorServer) -> None:
    sim.set_fault("m", {"kind": "timeout", "seconds": 30})
    path, headers, body = request_for("openai", "m")

    with httpx.Client(base_url=sim.base_url, timeout=0.3) as impatient, pytest.raises(httpx.ReadTimeout):
        impatient.post(path, json=body, headers=headers)

    assert outcome_of(sim, "m") == "disconnected"  # the client left first, the hold did not end


def test_a_timeout_fault_drops_the_connection_after_its_seconds(sim: SimulatorServer, client: httpx.Client) -> None:
    sim.set_fault("m", {"kind": "timeout", "seconds": 0.3})

    started = time.monotonic()
    with pytest.raises(httpx.RemoteProtocolError):
        send(client, "anthropic", "m")

    assert time.monotonic() - started >= 0.3  # a sleep never ends early
    assert outcome_of(sim, "m") == "timeout"  # the hold ended it, not the client's 10 s timeout


@pytest.mark.parametrize("stream", [False, True])
def test_slow_first_byte_delays_the_response_then_answers(sim: SimulatorServer, client: httpx.Client,
                                                          stream: bool) -> None:
    sim.set_fault("m", {"kind": "slow_first_byte", "ms": 300})
    path, headers, body = request_for("openai", "m", stream=stream)

    started = time.monotonic()
    with client.stream("POST", path, json=body, headers=headers) as response:
        first_byte = time.monotonic() - started
        text = response.read().decode()

    assert response.status_code == 200
    assert first_byte >= 0.3
    assert "Simulated" in text


def test_slow_stretches_a_stream_across_its_chunks(sim: SimulatorServer, client: httpx.Client) -> None:
    sim.set_fault("m", {"kind": "slow", "ms": 300})
    path, headers, body = request_for("openai", "m", stream=True)

    started = time.monotonic()
    arrivals = []
    with client.stream("POST", path, json=body, headers=headers) as response:
        for _ in response.iter_raw():
            arrivals.append(time.monotonic() - started)

    assert arrivals[0] < 0.25  # the first chunk is not delayed
    assert 0.3 <= arrivals[-1] < 2.0  # the last one is, by the whole extra time


def test_slow_delays_a_json_answer(sim: SimulatorServer, client: httpx.Client) -> None:
    sim.set_fault("m", {"kind": "slow", "ms": 250})

    started = time.monotonic()
    response = send(client, "gemini", "m")

    assert response.status_code == 200
    assert time.monotonic() - started >= 0.25


@pytest.mark.parametrize("wire", WIRES)
def test_stream_cut_drops_the_connection_before_the_final_event(sim: SimulatorServer, client: httpx.Client,
                                                                wire: str) -> None:
    sim.set_fault("m", {"kind": "stream_cut", "after_chunks": 2})

    received, error = read_until_error(client, wire, "m")

    assert isinstance(error, httpx.RemoteProtocolError)
    assert "Simulated" in received
    assert FINAL_MARKERS[wire] not in received
    assert outcome_of(sim, "m") == "cut"
    assert sim.received("m")[-1]["chunks_sent"] == 2


def test_stream_cut_after_no_chunks_sends_only_the_opening(sim: SimulatorServer, client: httpx.Client) -> None:
    sim.set_fault("m", {"kind": "stream_cut", "after_chunks": 0})

    received, error = read_until_error(client, "anthropic", "m")

    assert isinstance(error, httpx.RemoteProtocolError)
    assert [name for name, _ in sse_events(received)] == ["message_start", "content_block_start", "ping"]


def test_stream_cut_on_a_json_answer_sends_half_the_body(sim: SimulatorServer, client: httpx.Client) -> None:
    sim.set_fault("m", {"kind": "stream_cut"})

    with pytest.raises(httpx.RemoteProtocolError):
        send(client, "openai", "m")


@pytest.mark.parametrize(
    ("wire", "check"),
    [
        ("openai", lambda events: json.loads(events[-1][1])["error"]["type"] == "server_error"),
        ("azure", lambda events: "error" in json.loads(events[-1][1])),
        ("anthropic", lambda events: events[-1][0] == "error"
         and json.loads(events[-1][1])["error"]["type"] == "overloaded_error"),
        ("gemini", lambda events: json.loads(events[-1][1])["error"]["status"] == "UNAVAILABLE"),
    ],
)
def test_stream_error_ends_the_stream_with_the_providers_error_event(sim: SimulatorServer, client: httpx.Client,
                                                                     wire: str, check: Any) -> None:
    sim.set_fault("m", {"kind": "stream_error", "after_chunks": 1})

    received, error = read_until_error(client, wire, "m")

    assert error is None
    assert check(sse_events(received))
    assert FINAL_MARKERS[wire] not in received
    assert outcome_of(sim, "m") == "stream_error"


def test_stream_error_on_a_json_request_is_an_error_status(sim: SimulatorServer, client: httpx.Client) -> None:
    sim.set_fault("m", {"kind": "stream_error", "status": 500})

    response = send(client, "anthropic", "m")

    assert response.status_code == 500
    assert response.json()["error"]["type"] == "api_error"


@pytest.mark.parametrize("wire", WIRES)
def test_malformed_json_answers_200_with_a_body_that_does_not_parse(sim: SimulatorServer, client: httpx.Client,
                                                                    wire: str) -> None:
    sim.set_fault("m", {"kind": "malformed_json"})

    response = send(client, wire, "m")

    assert response.status_code == 200
    with pytest.raises(ValueError):
        json.loads(response.text)


@pytest.mark.parametrize("wire", WIRES)
def test_malformed_json_breaks_one_data_line_of_a_stream(sim: SimulatorServer, client: httpx.Client,
                                                         wire: str) -> None:
    sim.set_fault("m", {"kind": "malformed_json"})

    response = send(client, wire, "m", stream=True)

    broken = []
    for _, data in sse_events(response.text):
        try:
            json.loads(data) if data != "[DONE]" else None
        except ValueError:
            broken.append(data)
    assert response.status_code == 200
    assert len(broken) == 1

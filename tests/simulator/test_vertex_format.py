"""Vertex AI in the simulator: Gemini and Claude under the publisher paths, bearer tokens only, Google's errors
for authentication and quota (Anthropic's for Claude's own checks), :predict embeddings and Claude's token count."""

from __future__ import annotations

import json
from typing import Any

import httpx2 as httpx
import pytest

from routing.simulator import SimulatorServer
from routing.simulator.count_tokens import counted_tokens
from routing.simulator.wire.embeddings import embedding_vector

BASE = "/v1/projects/sim-project/locations/us-central1/publishers"
BEARER = {"Authorization": "Bearer ya29.simulated-access-token"}
CLAUDE_BODY: dict[str, Any] = {"anthropic_version": "vertex-2023-10-16", "max_tokens": 64,
                               "messages": [{"role": "user", "content": "Hello Claude"}]}
GEMINI_BODY: dict[str, Any] = {"contents": [{"role": "user", "parts": [{"text": "Hello Gemini"}]}]}


def sse_events(text: str) -> list[tuple[str, dict[str, Any]]]:
    """(event name, data) pairs of an SSE body; the name is "" when the event has none."""
    events = []
    for block in text.replace("\r\n", "\n").split("\n\n"):
        name, data = "", None
        for line in block.splitlines():
            if line.startswith("event: "):
                name = line[7:]
            elif line.startswith("data: "):
                data = json.loads(line[6:])
        if data is not None:
            events.append((name, data))
    return events


def test_it_answers_gemini_generate_content_for_a_bearer_token(client: httpx.Client) -> None:
    response = client.post(f"{BASE}/google/models/gemini-test:generateContent", json=GEMINI_BODY, headers=BEARER)

    assert response.status_code == 200
    assert response.json()["candidates"][0]["content"]["parts"][0]["text"].endswith("Hello Gemini")


def test_it_streams_gemini_as_sse_events_with_alt_sse(client: httpx.Client) -> None:
    response = client.post(f"{BASE}/google/models/gemini-test:streamGenerateContent?alt=sse", json=GEMINI_BODY,
                           headers=BEARER)

    events = [data for _, data in sse_events(response.text)]
    assert len(events) > 1
    assert events[-1]["candidates"][0]["finishReason"] == "STOP"


@pytest.mark.parametrize("headers", [{}, {"x-goog-api-key": "an-api-key"}, {"Authorization": "Basic abc"}])
def test_it_answers_401_unauthenticated_without_a_bearer_token(client: httpx.Client, headers: dict[str, str]) -> None:
    for path, body in ((f"{BASE}/google/models/gemini-test:generateContent", GEMINI_BODY),
                       (f"{BASE}/anthropic/models/claude-test:rawPredict", CLAUDE_BODY)):
        response = client.post(path, json=body, headers=headers)

        assert response.status_code == 401
        assert response.json()["error"]["status"] == "UNAUTHENTICATED"


def test_it_answers_claude_raw_predict_as_anthropic_does(sim: SimulatorServer, client: httpx.Client) -> None:
    response = client.post(f"{BASE}/anthropic/models/claude-test:rawPredict", json=CLAUDE_BODY, headers=BEARER)

    assert response.status_code == 200
    message = response.json()
    assert message["type"] == "message"
    assert message["model"] == "claude-test"
    assert message["content"][0]["text"].endswith("Hello Claude")
    record = sim.received(model="claude-test")[-1]
    assert (record["wire"], record["stream"], record["auth"]["header"]) == ("vertex_anthropic", False, "authorization")


def test_it_streams_claude_events_on_stream_raw_predict(client: httpx.Client) -> None:
    response = client.post(f"{BASE}/anthropic/models/claude-test:streamRawPredict", json={**CLAUDE_BODY,
                                                                                          "stream": True},
                           headers=BEARER)

    names = [name for name, _ in sse_events(response.text)]
    assert names[0] == "message_start"
    assert names[-1] == "message_stop"
    assert "content_block_delta" in names


@pytest.mark.parametrize(("body", "message"), [
    ({k: v for k, v in CLAUDE_BODY.items() if k != "anthropic_version"}, "anthropic_version: Field required"),
    ({**CLAUDE_BODY, "anthropic_version": "2023-06-01"}, "anthropic_version: Input should be 'vertex-2023-10-16'"),
])
def test_it_refuses_claude_without_the_vertex_anthropic_version(client: httpx.Client, body: dict[str, Any],
                                                                message: str) -> None:
    response = client.post(f"{BASE}/anthropic/models/claude-test:rawPredict", json=body, headers=BEARER)

    assert response.status_code == 400
    assert response.json()["error"] == {"type": "invalid_request_error", "message": message}


def test_quota_comes_in_google_s_envelope_and_overload_in_anthropic_s(sim: SimulatorServer,
                                                                       client: httpx.Client) -> None:
    path = f"{BASE}/anthropic/models/claude-test:rawPredict"
    sim.set_fault("claude-test", {"kind": "rate_limit", "times": 1})
    limited = client.post(path, json=CLAUDE_BODY, headers=BEARER)
    sim.set_fault("claude-test", {"kind": "status", "status": 529, "times": 1})
    overloaded = client.post(path, json=CLAUDE_BODY, headers=BEARER)

    assert limited.status_code == 429
    assert limited.json()["error"]["status"] == "RESOURCE_EXHAUSTED"
    assert overloaded.status_code == 529
    assert overloaded.json()["error"]["type"] == "overloaded_error"


def test_gemini_faults_are_drawn_for_the_model_in_the_path(sim: SimulatorServer, client: httpx.Client) -> None:
    sim.set_fault("gemini-test", {"kind": "status", "status": 403, "times": 1})

    response = client.post(f"{BASE}/google/models/gemini-test:generateContent", json=GEMINI_BODY, headers=BEARER)

    assert response.status_code == 403
    assert response.json()["error"]["status"] == "PERMISSION_DENIED"


def test_it_embeds_with_predict_and_counts_tokens(client: httpx.Client) -> None:
    body = {"instances": [{"content": "first text"}, {"content": "a second, longer text", "task_type": "RETRIEVAL"}],
            "parameters": {"outputDimensionality": 8}}

    response = client.post(f"{BASE}/google/models/gemini-test:predict", json=body, headers=BEARER)

    assert response.status_code == 200
    predictions = response.json()["predictions"]
    assert [p["embeddings"]["values"] for p in predictions] == [
        embedding_vector("gemini-test", "first text", 8), embedding_vector("gemini-test", "a second, longer text", 8)]
    assert [p["embeddings"]["statistics"]["token_count"] for p in predictions] == [3.0, 6.0]


def test_predict_names_a_missing_content(client: httpx.Client) -> None:
    response = client.post(f"{BASE}/google/models/gemini-test:predict", json={"instances": [{"text": "x"}]},
                           headers=BEARER)

    assert response.status_code == 400
    assert response.json()["error"]["status"] == "INVALID_ARGUMENT"
    assert response.json()["error"]["message"].startswith("instances[0].content")


def test_it_counts_claude_tokens_on_count_tokens_raw_predict(client: httpx.Client) -> None:
    body = {"anthropic_version": "vertex-2023-10-16", "model": "claude-test",
            "messages": [{"role": "user", "content": "count me"}]}

    response = client.post(f"{BASE}/anthropic/models/count-tokens:rawPredict", json=body, headers=BEARER)

    assert response.status_code == 200
    assert response.json() == {"input_tokens": counted_tokens(body)}

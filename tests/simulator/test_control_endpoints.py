"""The /_sim/ control endpoints: faults over HTTP, recorded requests, stats, reset."""

from __future__ import annotations

import httpx2 as httpx
import pytest

from routing.simulator import SimulatorServer
from tests.simulator.wire_helpers import request_for


def chat(client: httpx.Client, model: str = "m", wire: str = "openai") -> httpx.Response:
    path, headers, body = request_for(wire, model)
    return client.post(path, json=body, headers=headers)


def test_it_sets_a_fault_over_http_and_reports_it(client: httpx.Client) -> None:
    response = client.post("/_sim/faults", json={"model": "m", "fault": {"kind": "status", "status": 502, "times": 2}})

    assert response.status_code == 200
    assert response.json()["key"] == "m"
    assert client.get("/_sim/faults").json()["faults"]["m"][0]["remaining"] == 2
    assert chat(client).status_code == 502
    assert client.get("/_sim/faults").json()["faults"]["m"][0]["remaining"] == 1


def test_it_sets_a_script_and_keys_by_deployment_or_path(client: httpx.Client) -> None:
    script = [{"kind": "rate_limit", "times": 1}, {"kind": "status", "status": 500, "times": 1}]
    client.post("/_sim/faults", json={"deployment": "dep", "faults": script})
    client.post("/_sim/faults", json={"path": "/v1/messages", "fault": {"kind": "status", "status": 529}})

    assert [chat(client, "dep", "azure").status_code for _ in range(3)] == [429, 500, 200]
    assert chat(client, "claude-test", "anthropic").status_code == 529


def test_it_clears_faults_by_model_or_all(client: httpx.Client) -> None:
    for model in ("a", "b"):
        client.post("/_sim/faults", json={"model": model, "fault": {"kind": "status", "status": 500}})

    assert client.delete("/_sim/faults", params={"model": "a"}).json() == {"cleared": "a"}
    assert set(client.get("/_sim/faults").json()["faults"]) == {"b"}
    assert client.delete("/_sim/faults").json() == {"cleared": "all"}
    assert client.get("/_sim/faults").json()["faults"] == {}


@pytest.mark.parametrize(
    ("payload", "message"),
    [
        ({"fault": {"kind": "empty"}}, "name exactly one of"),
        ({"model": "m", "path": "/x", "fault": {"kind": "empty"}}, "name exactly one of"),
        ({"model": "m"}, "fault: required"),
        ({"model": "m", "fault": {"kind": "melt"}}, "unknown fault kind 'melt'"),
        ([1, 2], "expected"),
    ],
)
def test_it_refuses_a_bad_fault_request_with_a_message(client: httpx.Client, payload: object, message: str) -> None:
    response = client.post("/_sim/faults", json=payload)

    assert response.status_code == 400
    assert message in response.json()["error"]


def test_it_lists_recorded_requests_filtered_and_limited(client: httpx.Client) -> None:
    for model in ("a", "b", "a", "a"):
        chat(client, model)

    everything = client.get("/_sim/requests").json()["requests"]
    only_a = client.get("/_sim/requests", params={"model": "a", "limit": 2}).json()["requests"]

    assert [r["model"] for r in everything] == ["a", "b", "a", "a"]
    assert [r["seq"] for r in only_a] == [3, 4]


def test_it_counts_requests_per_model(sim: SimulatorServer, client: httpx.Client) -> None:
    client.post("/_sim/faults", json={"model": "gpt-test", "fault": {"kind": "rate_limit", "times": 1}})
    for _ in range(3):
        chat(client, "gpt-test")
    sim.wait_until_idle()

    stats = client.get("/_sim/stats").json()

    model = stats["models"]["gpt-test"]
    assert stats["requests_total"] == 3
    assert stats["in_flight"] == 0
    assert model["requests"] == 3
    assert model["statuses"] == {"429": 1, "200": 2}
    assert model["faults"] == {"rate_limit": 1}
    assert model["output_tokens"] > 0
    assert model["cost_usd"] > 0  # gpt-test has prices in the shared configuration


def test_reset_forgets_records_faults_and_counters(client: httpx.Client) -> None:
    chat(client)
    client.post("/_sim/faults", json={"model": "m", "fault": {"kind": "empty"}})

    assert client.post("/_sim/reset").json() == {"reset": True}
    assert client.get("/_sim/requests").json()["requests"] == []
    assert client.get("/_sim/faults").json()["faults"] == {}
    assert client.get("/_sim/stats").json()["models"] == {}
    assert "Simulated answer 1 " in chat(client).text  # the counter starts again


def test_it_answers_unknown_control_paths_and_wrong_methods(client: httpx.Client) -> None:
    assert client.get("/_sim/nothing").status_code == 404
    assert client.put("/_sim/faults").status_code == 405
    assert client.get("/_sim/health").json() == {"status": "ok"}
    assert client.get("/health").json() == {"status": "ok"}

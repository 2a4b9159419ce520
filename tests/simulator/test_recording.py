"""What the simulator records: masked keys with fingerprints, bodies, outcomes, usage, a bounded buffer."""

from __future__ import annotations

import threading
import time

import httpx2 as httpx
import pytest

from routing.simulator import SimulatorServer, key_fingerprint
from tests.simulator.wire_helpers import gemini_body, gemini_path, openai_body, request_for


def test_it_masks_every_key_and_keeps_a_fingerprint(sim: SimulatorServer, client: httpx.Client) -> None:
    client.post("/v1/chat/completions", json=openai_body(), headers={"authorization": "Bearer sk-secret-one"})
    client.post(gemini_path() + "?key=gm-secret-two&alt=json", json=gemini_body())
    sim.wait_until_idle()

    openai_record, gemini_record = sim.received()

    assert openai_record["headers"]["authorization"] == "***"
    assert openai_record["auth"] == {"header": "authorization", "present": True,
                                     "fingerprint": key_fingerprint("sk-secret-one"), "key_index": None}
    assert gemini_record["query"] == "key=%2A%2A%2A&alt=json"
    assert gemini_record["auth"]["fingerprint"] == key_fingerprint("gm-secret-two")
    recorded = repr(sim.received())
    assert "sk-secret-one" not in recorded
    assert "gm-secret-two" not in recorded


def test_it_tells_which_configured_key_was_used(sim: SimulatorServer, client: httpx.Client) -> None:
    client.post("/v1/chat/completions", json=openai_body(model="locked"), headers={"authorization": "Bearer sk-second"})
    client.post("/v1/chat/completions", json=openai_body(model="locked"), headers={"authorization": "Bearer sk-wrong"})
    sim.wait_until_idle()

    second, wrong = sim.received("locked")

    assert second["auth"]["key_index"] == 1
    assert second["status"] == 200
    assert wrong["auth"]["key_index"] is None
    assert wrong["status"] == 401
    assert wrong["error"] == "invalid_key"


def test_it_records_the_body_usage_cost_and_outcome(sim: SimulatorServer, client: httpx.Client) -> None:
    body = openai_body("Price me", model="gpt-test", stream=True)
    client.post("/v1/chat/completions", json=body, headers={"x-custom": "kept"})
    sim.wait_until_idle()

    record = sim.received("gpt-test")[0]

    assert record["body"] == body
    assert record["headers"]["x-custom"] == "kept"
    assert (record["method"], record["path"], record["wire"]) == ("POST", "/v1/chat/completions", "openai")
    assert record["stream"] is True
    assert record["status"] == 200
    assert record["outcome"] == "completed"
    assert record["fault"] is None
    assert record["finish"] == "stop"
    usage = record["usage"]
    expected_cost = (usage["input_tokens"] * 1.0 + usage["output_tokens"] * 2.0) / 1_000_000
    assert record["cost_usd"] == pytest.approx(expected_cost)
    assert record["chunks_sent"] == 4
    assert record["duration_ms"] >= 0
    assert abs(record["time"] - time.time()) < 60


def test_it_records_a_body_that_is_not_json_as_text(sim: SimulatorServer, client: httpx.Client) -> None:
    client.post("/v1/chat/completions", content=b"{broken", headers={"content-type": "application/json"})
    sim.wait_until_idle()

    record = sim.received()[0]

    assert record["body"] is None
    assert record["body_text"] == "{broken"
    assert record["status"] == 400
    assert record["error"] == "invalid_json"


def test_it_records_a_client_that_leaves_mid_stream() -> None:
    config = {"models": {"slowpoke": {"chunk_count": 20, "chunk_interval_ms": 50}}}
    with SimulatorServer(config) as slow, httpx.Client(base_url=slow.base_url) as http:
        path, headers, body = request_for("openai", "slowpoke", stream=True)
        with http.stream("POST", path, json=body, headers=headers) as response:
            next(response.iter_raw())  # the opening and the first chunk, then hang up
        slow.wait_until_idle()
        record = slow.received("slowpoke")[0]

    assert record["outcome"] == "disconnected"
    assert 1 <= record["chunks_sent"] < 20
    assert record["duration_ms"] < 900  # it stopped instead of streaming the remaining second


def test_a_held_request_is_visible_while_it_waits(sim: SimulatorServer) -> None:
    sim.set_fault("m", {"kind": "timeout", "seconds": 5})
    path, headers, body = request_for("openai", "m")

    def hold() -> None:
        with httpx.Client(base_url=sim.base_url, timeout=0.5) as impatient, pytest.raises(httpx.ReadTimeout):
            impatient.post(path, json=body, headers=headers)

    holder = threading.Thread(target=hold)
    holder.start()
    deadline = time.monotonic() + 2
    while not sim.received("m") and time.monotonic() < deadline:
        time.sleep(0.01)
    pending = sim.received("m")[0]
    holder.join()

    assert pending["outcome"] == "pending"
    assert pending["fault"] == "timeout"
    assert sim.stats()["in_flight"] in (0, 1)


def test_it_keeps_only_the_newest_records_up_to_the_limit() -> None:
    with SimulatorServer({"record_limit": 5}) as sim, httpx.Client(base_url=sim.base_url) as http:
        for _ in range(8):
            http.post("/v1/chat/completions", json=openai_body(model="m"))
        sim.wait_until_idle()
        records = sim.received()
        stats = sim.stats()

    assert [r["seq"] for r in records] == [4, 5, 6, 7, 8]
    assert stats["requests_total"] == 8
    assert stats["models"]["m"]["requests"] == 8

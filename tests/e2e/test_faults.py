"""Fault injection against a running gateway: the client's outcome, the attempts made and what the upstream saw.

Each test uses its own simulated models, so one test's cooldowns never leak into another's. Cooldowns are
short here (PRO_ROUTING_COOLDOWN_BASE=1s, MAX=4s) so recovery can be observed.
"""

from __future__ import annotations

import json
import time
from collections.abc import Iterator
from pathlib import Path
from typing import Any

import httpx2
import psycopg
import pytest
import yaml
from psycopg.rows import dict_row

from routing.simulator.server import SimulatorServer
from tests.e2e.conftest import SIM_KEY, fresh_database
from tests.gateway_process import Gateway, run_gateway

pytestmark = pytest.mark.services

MODELS = {
    # name: (simulator behaviour, gateway model fields)
    "to-a": {}, "to-b": {},
    "rl-a": {}, "rl-b": {},
    "rn-a": {}, "rn-b": {},
    "se-a": {}, "se-b": {},
    "mj-a": {}, "mj-b": {},
    "co-a": {}, "co-b": {},
    "tr-a": {}, "tr-b": {},
    "sv-a": {}, "sv-b": {},
    "ut-a": {}, "ut-b": {},
    "ss-a": {}, "ss-b": {},
    "cb-a": {}, "cb-b": {},
    "ca-a": {"chunk_count": 6, "chunk_interval_ms": 30}, "ca-b": {},
    "au-a": {}, "au-b": {},
    "sl-a": {"latency_ms": 250}, "sl-b": {"latency_ms": 2},
    "shed-a": {}, "shed-b": {},
    "ses-a": {}, "ses-b": {},
    "st-a": {}, "st-b": {},
    "wl-a": {}, "wl-b": {},
}
PAIRS = ["to", "rl", "rn", "se", "mj", "co", "tr", "sv", "ut", "ss", "cb", "ca", "au", "st", "wl"]
CAPS = ["text", "tools", "json_schema"]
SCHEMA = {"type": "object", "properties": {"name": {"type": "string"}}, "required": ["name"]}
TOOL = {"type": "function", "function": {"name": "lookup", "parameters": {
    "type": "object", "properties": {"q": {"type": "string"}}, "required": ["q"]}}}


def config(sim_url: str) -> dict[str, Any]:
    models = [{"provider": "sim", "upstream": name, "name": name, "input_price": 1.0, "output_price": 2.0,
               "capabilities": CAPS} for name in MODELS]
    virtual = [{"source": f"{p}-pool", "strategy": "failover", "targets": [f"{p}-a", f"{p}-b"]} for p in PAIRS]
    virtual += [
        {"source": "slow-pool", "strategy": "adaptive", "targets": ["sl-a", "sl-b"]},
        {"source": "shed-pool", "strategy": "adaptive", "targets": ["shed-a", "shed-b"]},
        {"source": "ses-pool", "strategy": "adaptive", "targets": ["ses-a", "ses-b"]},
    ]
    contracts = [{"workload": "extract", "structured_output": {"required": True, "schema": SCHEMA},
                   "deadline_ms": 5000}]
    return {"providers": [{"name": "sim", "kind": "openai", "base_url": f"{sim_url}/v1",
                           "api_key": "${E2E_SIM_KEY}"}],
            "models": models, "virtual_models": virtual, "contracts": contracts}


@pytest.fixture(scope="module")
def fault_sim() -> Iterator[SimulatorServer]:
    with SimulatorServer(config={"models": {k: v for k, v in MODELS.items() if v}}) as sim:
        yield sim


def _gateway(tmp_path_factory: pytest.TempPathFactory, sim: SimulatorServer, tag: str,
             env: dict[str, str]) -> Iterator[Gateway]:
    tmp = tmp_path_factory.mktemp(tag)
    path = tmp / "config.yaml"
    path.write_text(yaml.safe_dump(config(sim.base_url)))
    with fresh_database(tag) as url:
        env = {"DATABASE_URL": url, "GOMODEL_CONFIG": str(path), "E2E_SIM_KEY": SIM_KEY,
               "PRO_ROUTING_COOLDOWN_BASE": "1s", "PRO_ROUTING_COOLDOWN_MAX": "4s", "CELERY_BROKER_URL": "",
               "GOMODEL_AUTH": "open", **env}
        with run_gateway(Path(tmp), env) as gateway:
            gateway.database_url = url  # type: ignore[attr-defined]
            yield gateway


def audit_of(gateway: Gateway, response: httpx2.Response, timeout: float = 10.0) -> dict[str, Any]:
    """The audit revision of a response's request, with its attempts in order (written asynchronously)."""
    request_id = response.headers["x-request-id"]
    deadline = time.monotonic() + timeout
    with psycopg.connect(gateway.database_url.replace("postgres://", "postgresql://"),  # type: ignore[attr-defined]
                         row_factory=dict_row) as conn:
        while True:
            revision = conn.execute("SELECT * FROM audit_auditrevision WHERE request_id = %s",
                                    (request_id,)).fetchone()
            if revision is not None:
                revision["attempts"] = conn.execute(
                    "SELECT * FROM audit_attemptrecord WHERE revision_id = %s ORDER BY seq", (revision["id"],)
                ).fetchall()
                return revision
            if time.monotonic() > deadline:
                raise AssertionError(f"no audit revision for {request_id}")
            time.sleep(0.1)


def attempts_of(revision: dict[str, Any]) -> list[tuple[str, str, str, str]]:
    return [(a["target"], a["reason"], a["action"], a["validation"]) for a in revision["attempts"]]


@pytest.fixture(scope="module")
def fault_gateway(tmp_path_factory: pytest.TempPathFactory, fault_sim: SimulatorServer) -> Iterator[Gateway]:
    # The gateway-wide retry budget would make these tests depend on each other's fallbacks; it has its
    # own test below, against a gateway with the default budget.
    yield from _gateway(tmp_path_factory, fault_sim, "faults", {"GOMODEL_RETRY_BUDGET": "1.0"})


@pytest.fixture(scope="module")
def budget_gateway(tmp_path_factory: pytest.TempPathFactory, fault_sim: SimulatorServer) -> Iterator[Gateway]:
    yield from _gateway(tmp_path_factory, fault_sim, "budget", {})


@pytest.fixture
def sim(fault_sim: SimulatorServer) -> Iterator[SimulatorServer]:
    fault_sim.clear_faults()
    yield fault_sim
    fault_sim.clear_faults()


_turn = iter(range(10**9))


def chat(gateway: Gateway, model: str, *, headers: dict[str, str] | None = None, timeout: float = 30,
         **extra: Any) -> httpx2.Response:
    """One request. Each carries a new opening message, so each is a session of its own (no pin) unless
    the caller names a session in a header."""
    body = {"model": model, "messages": [{"role": "user", "content": f"hello #{next(_turn)}"}], **extra}
    return httpx2.post(f"{gateway.base_url}/v1/chat/completions", json=body, headers=headers or {},
                       timeout=timeout)


def served_by(response: httpx2.Response) -> tuple[int, str | None, int]:
    return response.status_code, response.headers.get("x-gomodel-target"), int(response.headers["x-gomodel-attempts"])


def count(sim: SimulatorServer, model: str) -> int:
    return len(sim.received(model=model))


def outcomes_since(sim: SimulatorServer, seen: dict[str, int]) -> list[str]:
    """How the simulator's requests to each model in ``seen`` ended, past the first ``seen[model]`` of them."""
    sim.wait_until_idle()
    return [record["outcome"] for model, before in seen.items() for record in sim.received(model=model)[before:]]


def status_in_explain(gateway: Gateway, pool: str, target: str) -> str:
    """The health status of ``target`` as /v1/routing/explain shows it among ``pool``'s candidates."""
    body = {"model": pool, "messages": [{"role": "user", "content": "x"}]}
    explained = httpx2.post(f"{gateway.base_url}/v1/routing/explain", json=body, timeout=10).json()
    return next(str(c["status"]) for c in explained["selections"][0]["candidates"] if c["target"] == target)


def test_it_falls_back_when_the_primary_times_out_within_the_deadline(fault_gateway: Gateway, sim) -> None:  # type: ignore[no-untyped-def]
    sim.set_fault("to-a", {"kind": "timeout", "seconds": 30})
    seen = {"to-a": count(sim, "to-a")}
    response = chat(fault_gateway, "to-pool", headers={"X-GoModel-Deadline-Ms": "4000"})
    # The primary's attempt was cut short enough for the fallback to answer inside the deadline ...
    assert served_by(response) == (200, "to-b", 2)
    # ... by the gateway hanging up, not by the simulator's 30 s hold running out.
    assert outcomes_since(sim, seen) == ["disconnected"]
    revision = audit_of(fault_gateway, response)
    assert attempts_of(revision) == [("to-a", "timeout", "fallback", "not_run"),
                                     ("to-b", "ok", "accepted", "accepted")]
    assert revision["status"] == 200
    assert revision["deadline_ms"] == 4000
    assert revision["fell_back"]


def test_it_answers_504_when_the_deadline_runs_out(fault_gateway: Gateway, sim) -> None:  # type: ignore[no-untyped-def]
    sim.set_fault("to-a", {"kind": "timeout", "seconds": 30})
    sim.set_fault("to-b", {"kind": "timeout", "seconds": 30})
    seen = {"to-a": count(sim, "to-a"), "to-b": count(sim, "to-b")}
    response = chat(fault_gateway, "to-pool", headers={"X-GoModel-Deadline-Ms": "1500"})
    assert response.status_code == 504
    # Either an attempt timed out, or (after the previous test taught the gateway that to-a is slow)
    # no attempt could have finished in time and none was launched.
    assert response.json()["error"]["code"] in ("timeout", "deadline_exceeded")
    # Whatever was sent, the gateway gave up on it at the deadline instead of waiting out the holds.
    assert set(outcomes_since(sim, seen)) <= {"disconnected"}
    revision = audit_of(fault_gateway, response)
    assert revision["status"] == 504
    assert revision["deadline_ms"] == 1500


@pytest.mark.parametrize("retry_after", [2, None])
def test_it_falls_back_on_429_and_cools_the_target(fault_gateway: Gateway, sim, retry_after) -> None:  # type: ignore[no-untyped-def]
    pair = "rl" if retry_after else "rn"
    sim.set_fault(f"{pair}-a", {"kind": "rate_limit", "retry_after": retry_after, "times": 1})
    response = chat(fault_gateway, f"{pair}-pool")
    assert served_by(response) == (200, f"{pair}-b", 2)
    assert attempts_of(audit_of(fault_gateway, response))[0][:3] == (f"{pair}-a", "rate_limited", "fallback")
    # The 429 cooled the primary: the next request does not try it, though the fault is gone.
    before = count(sim, f"{pair}-a")
    response = chat(fault_gateway, f"{pair}-pool")
    assert served_by(response) == (200, f"{pair}-b", 1)
    assert count(sim, f"{pair}-a") == before
    # After the cooldown (base 1s, or the longer Retry-After) it gets traffic again.
    back_by = time.monotonic() + 10
    while status_in_explain(fault_gateway, f"{pair}-pool", f"{pair}-a") == "cooling":
        assert time.monotonic() < back_by, "the cooldown never ended"
        time.sleep(0.05)
    response = chat(fault_gateway, f"{pair}-pool")
    assert served_by(response) == (200, f"{pair}-a", 1)


def test_it_falls_back_on_a_5xx(fault_gateway: Gateway, sim) -> None:  # type: ignore[no-untyped-def]
    sim.set_fault("se-a", {"kind": "status", "status": 503, "times": 1})
    response = chat(fault_gateway, "se-pool")
    assert served_by(response) == (200, "se-b", 2)


def test_it_refuses_a_malformed_answer_and_falls_back(fault_gateway: Gateway, sim) -> None:  # type: ignore[no-untyped-def]
    sim.set_fault("mj-a", {"kind": "malformed_json", "times": 1})
    response = chat(fault_gateway, "mj-pool")
    assert served_by(response) == (200, "mj-b", 2)
    revision = audit_of(fault_gateway, response)
    assert attempts_of(revision)[0] == ("mj-a", "malformed", "fallback", "rejected:malformed")
    assert revision["attempts"][0]["error_class"] == "invalid_response"
    assert response.json()["choices"][0]["message"]["content"]


def test_it_falls_back_on_context_overflow_without_cooling_the_target(fault_gateway: Gateway, sim) -> None:  # type: ignore[no-untyped-def]
    sim.set_fault("co-a", {"kind": "context_overflow", "times": 1})
    response = chat(fault_gateway, "co-pool")
    assert served_by(response) == (200, "co-b", 2)
    revision = audit_of(fault_gateway, response)
    assert revision["attempts"][0]["error_class"] == "incompatible"
    assert revision["attempts"][0]["reason"] == "context_overflow"
    response = chat(fault_gateway, "co-pool")
    assert served_by(response) == (200, "co-a", 1)  # a request that does not fit says nothing about the target


def test_it_refuses_truncation_when_the_answer_must_be_complete(fault_gateway: Gateway, sim) -> None:  # type: ignore[no-untyped-def]
    sim.set_fault("tr-a", {"kind": "truncate"})
    schema_format = {"type": "json_schema", "json_schema": {"name": "p", "schema": SCHEMA}}
    response = chat(fault_gateway, "tr-pool", response_format=schema_format)
    assert served_by(response) == (200, "tr-b", 2)
    # A plain chat answer cut at the client's own limit is what the client asked for.
    response = chat(fault_gateway, "tr-a")
    assert response.status_code == 200
    assert response.json()["choices"][0]["finish_reason"] == "length"


def test_it_refuses_an_answer_that_breaks_the_schema(fault_gateway: Gateway, sim) -> None:  # type: ignore[no-untyped-def]
    sim.set_fault("sv-a", {"kind": "schema_violation"})
    schema_format = {"type": "json_schema", "json_schema": {"name": "p", "schema": SCHEMA}}
    response = chat(fault_gateway, "sv-pool", response_format=schema_format)
    assert served_by(response) == (200, "sv-b", 2)
    assert attempts_of(audit_of(fault_gateway, response))[0] == ("sv-a", "schema", "fallback", "rejected:schema")
    assert "name" in json.loads(response.json()["choices"][0]["message"]["content"])


def test_it_refuses_a_call_to_an_undeclared_tool(fault_gateway: Gateway, sim) -> None:  # type: ignore[no-untyped-def]
    sim.set_fault("ut-a", {"kind": "unknown_tool"})
    response = chat(fault_gateway, "ut-pool", tools=[TOOL], tool_choice="required")
    assert served_by(response) == (200, "ut-b", 2)
    calls = response.json()["choices"][0]["message"]["tool_calls"]
    assert [c["function"]["name"] for c in calls] == ["lookup"]
    keys = json.loads(response.headers["x-gomodel-execution-keys"])
    assert keys[0]["name"] == "lookup"
    assert keys[0]["execution_key"].count(":") >= 2


def test_a_slow_success_within_the_deadline_is_accepted(fault_gateway: Gateway, sim) -> None:  # type: ignore[no-untyped-def]
    sim.set_fault("ss-a", {"kind": "slow", "ms": 600, "times": 1})
    response = chat(fault_gateway, "ss-pool")
    assert served_by(response) == (200, "ss-a", 1)
    assert sim.received(model="ss-a")[-1]["fault"] == "slow"  # the slow answer itself was accepted


def test_a_stream_cut_before_the_first_byte_falls_back(fault_gateway: Gateway, sim) -> None:  # type: ignore[no-untyped-def]
    sim.set_fault("cb-a", {"kind": "stream_cut", "after_chunks": 0, "times": 1})
    body = {"model": "cb-pool", "stream": True, "messages": [{"role": "user", "content": "hi"}]}
    with httpx2.stream("POST", f"{fault_gateway.base_url}/v1/chat/completions", json=body, timeout=30) as r:
        assert r.status_code == 200
        assert r.headers["x-gomodel-target"] == "cb-b"
        lines = [line for line in r.iter_lines() if line.startswith("data: ")]
    assert lines[-1] == "data: [DONE]"


def test_a_stream_cut_after_the_first_byte_ends_with_an_error_event(fault_gateway: Gateway, sim) -> None:  # type: ignore[no-untyped-def]
    sim.set_fault("ca-a", {"kind": "stream_cut", "after_chunks": 3, "times": 1})
    body = {"model": "ca-pool", "stream": True, "messages": [{"role": "user", "content": "hi"}]}
    with httpx2.stream("POST", f"{fault_gateway.base_url}/v1/chat/completions", json=body, timeout=30) as r:
        assert r.status_code == 200
        assert r.headers["x-gomodel-target"] == "ca-a"
        lines = [line for line in r.iter_lines() if line.startswith("data: ")]
    last = json.loads(lines[-1][6:])
    assert "error" in last  # a well-formed error event in OpenAI's stream format
    assert count(sim, "ca-b") == 0  # bytes reached the client: nothing may replace the stream
    revision = audit_of(fault_gateway, r)
    assert revision["error_class"] == "ambiguous"
    assert revision["stream"]
    assert attempts_of(revision) == [("ca-a", "stream_cut", "gave_up", "not_run")]


def test_a_401_the_gateways_own_probe_confirms_cools_the_target_for_the_maximum(  # type: ignore[no-untyped-def]
        fault_gateway: Gateway, sim) -> None:
    # The request sees the 401; the immediate probe with the gateway's own credentials sees it again and confirms
    # it, so the lockout holds for every caller.
    sim.set_fault("au-a", {"kind": "status", "status": 401, "times": 50})
    try:
        response = chat(fault_gateway, "au-pool")
        assert served_by(response) == (200, "au-b", 2)
        deadline = time.monotonic() + 10
        while True:
            explained = httpx2.post(f"{fault_gateway.base_url}/v1/routing/explain",
                                    json={"model": "au-pool", "messages": [{"role": "user", "content": "x"}]}).json()
            states = {c["target"]: c for c in explained["selections"][0]["candidates"]}
            if states["au-a"]["status"] == "cooling" or time.monotonic() > deadline:
                break
            time.sleep(0.05)
        assert states["au-a"]["status"] == "cooling"
        assert states["au-a"]["cooldown_until"] - time.time() > 3.0  # the maximum (4s), not the base (1s)
    finally:
        sim.clear_faults("au-a")


def test_a_slow_target_gets_little_traffic_but_not_none(fault_gateway: Gateway, sim) -> None:  # type: ignore[no-untyped-def]
    for _ in range(3):  # both measured
        chat(fault_gateway, "sl-a")
        chat(fault_gateway, "sl-b")
    before = count(sim, "sl-a")
    for _ in range(150):
        response = chat(fault_gateway, "slow-pool")
        assert response.status_code == 200
    slow_share = (count(sim, "sl-a") - before) / 150
    # 250 ms vs 2 ms: the floor (5% of the heaviest weight) is all the slow one keeps; tolerance for 150 draws.
    assert 0.0 < slow_share < 0.2, slow_share


def test_a_target_that_returns_429_sheds_its_traffic_and_gets_it_back(fault_gateway: Gateway, sim) -> None:  # type: ignore[no-untyped-def]
    sim.set_fault("shed-a", {"kind": "rate_limit", "retry_after": 1})
    statuses = [chat(fault_gateway, "shed-pool").status_code for _ in range(20)]
    assert statuses == [200] * 20  # clients keep getting 200
    tried_while_failing = count(sim, "shed-a")
    assert tried_while_failing <= 3  # shed within a few requests
    sim.clear_faults("shed-a")
    # Traffic is back once the cooldown (Retry-After 1 s, doubled on repeats) is over: poll, do not guess.
    back_by = time.monotonic() + 10.0
    while count(sim, "shed-a") <= tried_while_failing and time.monotonic() < back_by:
        chat(fault_gateway, "shed-pool")
        time.sleep(0.05)
    assert count(sim, "shed-a") > tried_while_failing


def test_a_session_stays_on_its_target_until_that_target_cools(fault_gateway: Gateway, sim) -> None:  # type: ignore[no-untyped-def]
    headers = {"X-Session-Id": "conversation-42"}
    first = chat(fault_gateway, "ses-pool", headers=headers).headers["x-gomodel-target"]
    other = "ses-b" if first == "ses-a" else "ses-a"
    for _ in range(10):
        assert chat(fault_gateway, "ses-pool", headers=headers).headers["x-gomodel-target"] == first
    sim.set_fault(first, {"kind": "rate_limit", "retry_after": 3})
    response = chat(fault_gateway, "ses-pool", headers=headers)
    assert served_by(response) == (200, other, 2)
    sim.clear_faults(first)
    for _ in range(5):  # re-pinned to the new target, even after the old one recovers
        assert chat(fault_gateway, "ses-pool", headers=headers).headers["x-gomodel-target"] == other


def test_attempts_stay_within_the_retry_budget_when_everything_fails(budget_gateway: Gateway, sim) -> None:  # type: ignore[no-untyped-def]
    sim.set_fault("st-a", {"kind": "status", "status": 500})
    sim.set_fault("st-b", {"kind": "status", "status": 500})
    requests = 60
    for _ in range(requests):
        response = chat(budget_gateway, "st-pool")
        assert response.status_code in (502, 503)
    attempts = count(sim, "st-a") + count(sim, "st-b")
    # One attempt per request, plus retries/fallbacks within 20% of requests over the window (floor: 10).
    assert attempts <= requests + max(0.2 * requests, 10) + 1, attempts


def test_a_workload_contract_is_enforced_on_every_answer(fault_gateway: Gateway, sim) -> None:  # type: ignore[no-untyped-def]
    schema_format = {"type": "json_schema", "json_schema": {"name": "p", "schema": SCHEMA}}
    sim.set_fault("wl-a", {"kind": "schema_violation", "times": 1})
    response = chat(fault_gateway, "wl-pool", headers={"X-GoModel-Workload": "extract"},
                       response_format=schema_format)
    assert served_by(response) == (200, "wl-b", 2)
    revision = audit_of(fault_gateway, response)
    assert revision["workload"] == "extract"
    assert revision["deadline_ms"] == 5000
    # A plain-text answer cannot meet a contract that requires structured output.
    response = chat(fault_gateway, "wl-pool", headers={"X-GoModel-Workload": "extract"})
    assert response.status_code == 502
    unknown = chat(fault_gateway, "wl-pool", headers={"X-GoModel-Workload": "nope"})
    assert unknown.status_code == 400
    assert unknown.json()["error"]["param"] == "X-GoModel-Workload"

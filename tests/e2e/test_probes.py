"""Background probes through running gateway processes against the simulator (no network).

One gateway (uvicorn, its own database) with PRO_ROUTING_PROBE_INTERVAL=200ms and cooldowns of a minute, so a
target that comes back before its cooldown ends was brought back by a probe. Model names are unique to the run.
The simulator records every model call it answers, so "never probed" is read from its records, not inferred; a
target that keeps failing its probes is the witness that rounds went by.

Then two processes sharing Redis (db 7): only the lease holder probes, and the other takes over when it stops.
"""

from __future__ import annotations

import re
import uuid
from collections.abc import Iterator
from pathlib import Path
from typing import Any

import httpx2
import psycopg
import pytest
import yaml

from routing.simulator.server import SimulatorServer
from tests.e2e.conftest import fresh_database, manage
from tests.gateway_process import Gateway, run_gateway
from tests.waiting import wait_for

pytestmark = pytest.mark.services

REDIS_URL = "redis://127.0.0.1:6379/7"
RUN = uuid.uuid4().hex[:8]
FIVE, KEYED, LIMITED, OFF = (f"{name}-{RUN}" for name in ("five", "keyed", "limited", "off"))
GOOD, BAD = "probe-good-key", "probe-bad-key"
CHAT = {"messages": [{"role": "user", "content": "hello"}]}


def config(sim_url: str, *, key_ref: str = "${PROBE_BAD_KEY}") -> dict[str, Any]:
    return {
        "providers": [
            {"name": "an", "kind": "anthropic", "base_url": sim_url, "api_key": "${PROBE_GOOD_KEY}"},
            {"name": "kp", "kind": "anthropic", "base_url": sim_url, "api_key": key_ref},
            {"name": "ge", "kind": "gemini", "base_url": sim_url, "api_key": "${PROBE_GOOD_KEY}"},
            {"name": "quiet", "kind": "openai", "base_url": f"{sim_url}/v1", "api_key": "${PROBE_GOOD_KEY}",
             "probe": "off"},
        ],
        "models": [
            {"provider": "an", "upstream": FIVE},
            {"provider": "kp", "upstream": KEYED},
            {"provider": "ge", "upstream": LIMITED},
            {"provider": "quiet", "upstream": OFF},
        ],
    }


def metric(gateway: Gateway, name: str, **labels: str) -> float:
    text = httpx2.get(f"{gateway.base_url}/metrics", timeout=5).text
    total = 0.0
    for line in text.splitlines():
        match = re.match(rf"^{name}(?:\{{(.*)\}})? ([0-9.e+-]+)$", line)
        if match and all(f'{k}="{v}"' in (match.group(1) or "") for k, v in labels.items()):
            total += float(match.group(2))
    return total


def chat(gateway: Gateway, model: str) -> httpx2.Response:
    return httpx2.post(f"{gateway.base_url}/v1/chat/completions", json={"model": model, **CHAT}, timeout=30)


def model_calls(sim: SimulatorServer, model: str) -> list[dict[str, Any]]:
    return [r for r in sim.received(model) if r.get("action") == "models"]


@pytest.fixture(scope="module")
def sim() -> Iterator[SimulatorServer]:
    models = {FIVE: {}, KEYED: {"api_keys": [GOOD]}, LIMITED: {}, OFF: {}}
    with SimulatorServer({"models": models}) as server:
        yield server


@pytest.fixture(scope="module")
def probing(tmp_path_factory: pytest.TempPathFactory, sim: SimulatorServer) -> Iterator[tuple[Gateway, str, Path]]:
    tmp = Path(tmp_path_factory.mktemp("probes"))
    path = tmp / "config.yaml"
    path.write_text(yaml.safe_dump(config(sim.base_url)))
    with fresh_database("probes") as url:
        env = {"DATABASE_URL": url, "GOMODEL_CONFIG": str(path), "PROBE_GOOD_KEY": GOOD, "PROBE_BAD_KEY": BAD,
               "GOMODEL_MASTER_KEY": "", "GOMODEL_AUTH": "open", "CELERY_BROKER_URL": "", "REDIS_URL": "",
               "PRO_ROUTING_PROBE_INTERVAL": "200ms", "PRO_ROUTING_COOLDOWN_BASE": "60s",
               "PRO_ROUTING_COOLDOWN_MAX": "10m", "GOMODEL_SAME_ROUTE_RETRIES": "0"}
        with run_gateway(tmp, env) as gateway:
            yield gateway, url, tmp


def cool_down(gateway: Gateway, model: str) -> None:
    """Send requests until the target's breaker opens again (three 5xx in a row, or one 401/429)."""
    before = metric(gateway, "gomodel_pro_routing_cooldowns_total", target=model)
    wait_for(lambda: chat(gateway, model).status_code >= 400
             and metric(gateway, "gomodel_pro_routing_cooldowns_total", target=model) > before, 20, f"{model} cooling")


def test_a_5xx_cooldown_ends_early_once_a_probe_passes(probing: tuple[Gateway, str, Path],
                                                       sim: SimulatorServer) -> None:
    gateway, url, _ = probing
    target = f"an/{FIVE}"
    sim.set_fault(FIVE, {"kind": "status", "status": 500})
    try:
        cool_down(gateway, target)
        # While the fault lasts, probes fail and the target stays off (a minute-long cooldown).
        wait_for(lambda: metric(gateway, "gomodel_probes_total", target=target, result="server_error") >= 2,
                 20, "failing probes while the fault lasts")
        generated = len([r for r in sim.received(FIVE) if r.get("action") != "models"])
        assert chat(gateway, target).status_code == 503
        assert len([r for r in sim.received(FIVE) if r.get("action") != "models"]) == generated
    finally:
        sim.clear_faults(FIVE)
    wait_for(lambda: metric(gateway, "gomodel_probes_total", target=target, result="passed") >= 1,
             20, "a passing probe")
    answered = chat(gateway, target)
    assert answered.status_code == 200, answered.text
    assert answered.headers["x-gomodel-target"] == target
    lookups = model_calls(sim, FIVE)
    assert lookups[-1]["path"] == f"/v1/models/{FIVE}"
    assert lookups[-1]["auth"]["present"]
    with psycopg.connect(url.replace("postgres://", "postgresql://")) as conn:
        wait_for(lambda: conn.execute("SELECT count(*) FROM audit_auditrevision WHERE endpoint = 'probe' AND "
                                      "target = %s AND error_message LIKE %s",
                                      (target, "%passed; the cooldown ended early%")).fetchone()[0] == 1,
                 20, "the audit revision of the probe that ended the cooldown")
        row = conn.execute("SELECT error_message, status FROM audit_auditrevision WHERE endpoint = 'probe' AND "
                           "target = %s", (target,)).fetchall()
        assert all(GOOD not in message for message, _ in row)
        # Failed probes that changed nothing are counted, not audited: only the state change is.
        assert len(row) == 1


def test_a_401_lockout_lasts_while_the_key_is_bad_and_ends_once_the_key_reference_is_fixed(
        probing: tuple[Gateway, str, Path], sim: SimulatorServer) -> None:
    gateway, url, tmp = probing
    target = f"kp/{KEYED}"
    assert chat(gateway, target).status_code in (401, 502)
    wait_for(lambda: metric(gateway, "gomodel_probes_total", target=target, result="auth") >= 3,
             20, "probes refused with the bad key")
    assert chat(gateway, target).status_code == 503  # still locked out: nothing sent
    assert all(r["auth"]["key_index"] is None for r in model_calls(sim, KEYED))  # the bad key each time
    assert metric(gateway, "gomodel_probes_total", target=target, result="passed") == 0

    fixed = tmp / "fixed.yaml"
    fixed.write_text(yaml.safe_dump(config(sim.base_url, key_ref="${PROBE_GOOD_KEY}")))
    manage(url, "loadconfig", str(fixed), env={"PROBE_GOOD_KEY": GOOD, "PROBE_BAD_KEY": BAD})
    wait_for(lambda: metric(gateway, "gomodel_probes_total", target=target, result="passed") >= 1,
             20, "a probe with the fixed key")
    assert model_calls(sim, KEYED)[-1]["auth"]["key_index"] == 0
    answered = chat(gateway, target)
    assert answered.status_code == 200, answered.text


def test_a_429_retry_after_is_neither_probed_nor_shortened_and_probe_off_is_never_probed(
        probing: tuple[Gateway, str, Path], sim: SimulatorServer) -> None:
    gateway, _, _ = probing
    limited, off = f"ge/{LIMITED}", f"quiet/{OFF}"
    witness = f"kp/{KEYED}"
    sim.set_fault(LIMITED, {"kind": "rate_limit", "retry_after": 120})
    sim.set_fault(OFF, {"kind": "status", "status": 500})
    sim.set_fault(KEYED, {"kind": "status", "status": 503})  # the witness: cooling, its probes keep failing
    try:
        assert chat(gateway, limited).status_code in (429, 503)
        cool_down(gateway, off)
        cool_down(gateway, witness)
        before = metric(gateway, "gomodel_probes_total", target=witness)
        sim.clear_faults(LIMITED)
        sim.clear_faults(OFF)
        # Rounds go by (the witness is probed again and again) ...
        wait_for(lambda: metric(gateway, "gomodel_probes_total", target=witness) >= before + 3, 20, "probe rounds")
        # ... and neither the 429's target nor the provider with probe: off was probed, so both stay off.
        assert model_calls(sim, LIMITED) == []
        assert model_calls(sim, OFF) == []
        assert metric(gateway, "gomodel_probes_total", target=limited) == 0
        assert metric(gateway, "gomodel_probes_total", target=off) == 0
        assert chat(gateway, limited).status_code == 503
        assert chat(gateway, off).status_code == 503
    finally:
        sim.clear_faults()


def test_with_redis_one_process_probes_and_another_takes_over_when_it_stops(tmp_path: Path,
                                                                           sim: SimulatorServer) -> None:
    run = uuid.uuid4().hex[:8]
    locked = f"locked-{run}"
    sim.set_fault(locked, {"kind": "status", "status": 401})
    path = tmp_path / "config.yaml"
    path.write_text(yaml.safe_dump({
        "providers": [{"name": "oa", "kind": "openai", "base_url": f"{sim.base_url}/v1",
                       "api_key": "${PROBE_GOOD_KEY}", "probe": "completion"}],
        "models": [{"provider": "oa", "upstream": locked}],
    }))
    target = f"oa/{locked}"
    (tmp_path / "a").mkdir()
    (tmp_path / "b").mkdir()
    try:
        with fresh_database("probes_redis") as url:
            env = {"DATABASE_URL": url, "GOMODEL_CONFIG": str(path), "PROBE_GOOD_KEY": GOOD,
                   "GOMODEL_MASTER_KEY": "", "GOMODEL_AUTH": "open", "CELERY_BROKER_URL": "", "REDIS_URL": REDIS_URL,
                   "PRO_ROUTING_PROBE_INTERVAL": "200ms"}
            with run_gateway(tmp_path / "a", env) as first, run_gateway(tmp_path / "b", env) as second:
                gateways = [first, second]
                wait_for(lambda: sum(metric(g, "gomodel_prober_active") for g in gateways) == 1,
                         20, "one prober of the two")
                assert chat(first, target).status_code in (401, 502)  # a lockout, shared through Redis
                wait_for(lambda: sum(metric(g, "gomodel_probes_total", target=target) for g in gateways) >= 3,
                         20, "probes of the lockout")
                active = [g for g in gateways if metric(g, "gomodel_prober_active") == 1]
                assert len(active) == 1
                leader = active[0]
                other = second if leader is first else first
                assert metric(other, "gomodel_probes_total", target=target) == 0
                leader.process.terminate()
                leader.process.wait(timeout=20)
                wait_for(lambda: metric(other, "gomodel_prober_active") == 1, 20, "the other process takes over")
                wait_for(lambda: metric(other, "gomodel_probes_total", target=target) >= 1,
                         20, "probes by the process that took over")
    finally:
        sim.clear_faults(locked)

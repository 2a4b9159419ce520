"""Two real gateway processes sharing one Redis: a provider's 401 seen by one keeps the other off that provider.

Each gateway is its own uvicorn process with its own health registry; they share the database (the
configuration) and ``REDIS_URL``. The simulator records every request it receives, so "the other process
sent nothing to the locked-out target" is read from its records, not inferred. The model names are unique
to the run, so verdicts still in Redis from an earlier run cannot touch these targets.
"""

from __future__ import annotations

import contextlib
import re
import time
import uuid
from collections.abc import Iterator
from pathlib import Path

import httpx2
import pytest
import yaml

from routing.simulator.server import SimulatorServer
from tests.e2e.conftest import SIM_KEY, fresh_database
from tests.gateway_process import Gateway, run_gateway

pytestmark = pytest.mark.services

REDIS_URL = "redis://127.0.0.1:6379/3"


def adopted(gateway: Gateway) -> float:
    """How many other processes' cooldowns this gateway process has adopted (its /metrics)."""
    text = httpx2.get(f"{gateway.base_url}/metrics", timeout=5).text
    found = re.search(r'^gomodel_shared_health_adopted_total\{event="open"\} ([0-9.e+]+)$', text, re.MULTILINE)
    return float(found.group(1)) if found else 0.0


@contextlib.contextmanager
def two_gateways(tmp_path: Path, simulator: SimulatorServer, locked: str, backup: str) -> Iterator[list[Gateway]]:
    config = tmp_path / "config.yaml"
    config.write_text(yaml.safe_dump({
        "providers": [{"name": "oa", "kind": "openai", "base_url": f"{simulator.base_url}/v1",
                       "api_key": "${E2E_SIM_KEY}"}],
        "models": [{"provider": "oa", "upstream": locked, "capabilities": ["text"]},
                   {"provider": "oa", "upstream": backup, "capabilities": ["text"]}],
        "virtual_models": [{"source": "pool", "strategy": "failover",
                            "targets": [{"model": f"oa/{locked}"}, {"model": f"oa/{backup}"}]}],
    }))
    with fresh_database("shared") as database_url:
        env = {"DATABASE_URL": database_url, "GOMODEL_CONFIG": str(config), "E2E_SIM_KEY": SIM_KEY,
               "GOMODEL_MASTER_KEY": "", "GOMODEL_AUTH": "open", "CELERY_BROKER_URL": "", "REDIS_URL": REDIS_URL}
        with run_gateway(tmp_path / "a", env) as first, run_gateway(tmp_path / "b", env) as second:
            yield [first, second]


def test_a_401_on_one_gateway_process_keeps_the_other_off_that_provider(tmp_path: Path,
                                                                       simulator: SimulatorServer) -> None:
    run_id = uuid.uuid4().hex[:8]
    locked, backup = f"locked-{run_id}", f"backup-{run_id}"
    (tmp_path / "a").mkdir()
    (tmp_path / "b").mkdir()
    simulator.set_fault(locked, {"kind": "status", "status": 401})
    try:
        with two_gateways(tmp_path, simulator, locked, backup) as (first, second):
            chat = {"messages": [{"role": "user", "content": "hello"}]}
            refused = httpx2.post(f"{first.base_url}/v1/chat/completions", json={"model": f"oa/{locked}", **chat},
                                  timeout=30)
            assert refused.status_code in (401, 502), refused.text
            answered_at = time.monotonic()
            give_up = answered_at + 10
            while adopted(second) < 1:  # the verdict travels through Redis to the other process
                assert time.monotonic() < give_up, "the lockout did not reach the other gateway process"
                time.sleep(0.02)
            print(f"lockout adopted by the other process {time.monotonic() - answered_at:.3f}s after the 401")

            targets = [httpx2.post(f"{second.base_url}/v1/chat/completions", json={"model": "pool", **chat},
                                   timeout=30).headers.get("x-gomodel-target") for _ in range(3)]
            assert targets == [f"oa/{backup}"] * 3
            # Only the first process's request and its probe with the gateway's key (which confirmed the lockout)
            # ever reached it.
            assert [r["path"] for r in simulator.received(locked)] == ["/v1/chat/completions"] * 2
    finally:
        simulator.clear_faults(locked)

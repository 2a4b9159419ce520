"""A model's provider rpm holds exactly across two real gateway processes sharing one Redis.

Each gateway is its own uvicorn process with its own quota registry; they share the database (the configuration)
and ``REDIS_URL``. A burst sent to both at once must reach the provider exactly ``rpm`` times in the minute: the
simulator records every request it receives, so the count is read from its records, not inferred. The model
names are unique to the run, so counts still in Redis from an earlier run cannot touch them.
"""

from __future__ import annotations

import asyncio
import contextlib
import uuid
from collections.abc import Iterator
from pathlib import Path

import httpx2
import pytest
import yaml

from routing.simulator.server import SimulatorServer
from tests.e2e.conftest import SIM_KEY, fresh_database
from tests.gateway_process import Gateway, run_gateway

pytestmark = [pytest.mark.services, pytest.mark.slow]

REDIS_URL = "redis://127.0.0.1:6379/3"
RPM = 3


@pytest.fixture
def simulator() -> Iterator[SimulatorServer]:
    with SimulatorServer(config={"models": {}}) as sim:
        yield sim


@contextlib.contextmanager
def two_gateways(tmp_path: Path, simulator: SimulatorServer, limited: str, spare: str) -> Iterator[list[Gateway]]:
    """Two gateway processes sharing Redis: ``limited`` carries the provider's rpm, the pool falls back to
    ``spare``."""
    config = tmp_path / "config.yaml"
    config.write_text(yaml.safe_dump({
        "providers": [{"name": "oa", "kind": "openai", "base_url": f"{simulator.base_url}/v1",
                       "api_key": "${E2E_SIM_KEY}"}],
        "models": [{"provider": "oa", "upstream": limited, "capabilities": ["text"], "rpm": RPM},
                   {"provider": "oa", "upstream": spare, "capabilities": ["text"]}],
        "virtual_models": [{"source": "pool", "strategy": "failover",
                            "targets": [{"model": f"oa/{limited}"}, {"model": f"oa/{spare}"}]}],
    }))
    (tmp_path / "a").mkdir()
    (tmp_path / "b").mkdir()
    with fresh_database("provider_rpm") as database_url:
        env = {"DATABASE_URL": database_url, "GOMODEL_CONFIG": str(config), "E2E_SIM_KEY": SIM_KEY,
               "GOMODEL_MASTER_KEY": "", "GOMODEL_AUTH": "open", "CELERY_BROKER_URL": "", "REDIS_URL": REDIS_URL}
        with run_gateway(tmp_path / "a", env) as first, run_gateway(tmp_path / "b", env) as second:
            yield [first, second]


async def burst(gateways: list[Gateway], model: str, per_gateway: int) -> list[httpx2.Response]:
    """``per_gateway`` requests to each gateway, all sent at once."""
    body = {"model": model, "messages": [{"role": "user", "content": "hello"}], "max_tokens": 16}
    async with httpx2.AsyncClient(timeout=30) as client:
        return list(await asyncio.gather(*(
            client.post(f"{g.base_url}/v1/chat/completions", json=body) for g in gateways for _ in range(per_gateway))))


def test_it_sends_a_model_exactly_its_provider_rpm_in_a_burst_over_two_processes(
        tmp_path: Path, simulator: SimulatorServer) -> None:
    run_id = uuid.uuid4().hex[:8]
    limited, spare = f"limited-{run_id}", f"spare-{run_id}"
    with two_gateways(tmp_path, simulator, limited, spare) as gateways:
        answers = asyncio.run(burst(gateways, "pool", 5))
        targets = sorted(a.headers.get("x-gomodel-target", str(a.status_code)) for a in answers)
        assert len(simulator.received(limited)) == RPM, targets
        assert {a.status_code for a in answers} == {200}  # the rest fell back to the spare model
        assert targets.count(f"oa/{limited}") == RPM

        # The minute is used up for both processes: a concrete request is answered 503 by either.
        refused = asyncio.run(burst(gateways, f"oa/{limited}", 2))
        assert {(a.status_code, a.json()["error"]["code"]) for a in refused} == {(503, "provider_limit_reached")}
        assert all(1 <= int(a.headers["retry-after"]) <= 61 for a in refused)
        assert len(simulator.received(limited)) == RPM

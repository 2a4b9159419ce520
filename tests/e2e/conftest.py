"""A running gateway (a real ASGI server in a subprocess) in front of the provider simulator.

The gateway gets its own PostgreSQL database, created for the session and dropped afterwards, so the
Django test database's per-test flushing never pulls its configuration away mid-run.
"""

from __future__ import annotations

import contextlib
import os
import subprocess
import sys
import time
from collections.abc import Iterator
from pathlib import Path
from typing import Any

import anthropic
import httpx2
import openai
import psycopg
import pytest
import yaml

from routing.simulator.server import SimulatorServer
from tests.gateway_process import ROOT, Gateway, run_gateway

SIM_KEY = "sim-secret-key-for-tests"

SIM_MODELS: dict[str, Any] = {
    "oa-model": {"latency_ms": 5, "chunk_count": 4},
    "az-model": {"latency_ms": 5, "chunk_count": 4},
    "an-model": {"latency_ms": 5, "chunk_count": 4},
    "ge-model": {"latency_ms": 5, "chunk_count": 4},
    "slow-stream": {"chunk_count": 12, "chunk_interval_ms": 150},
    "text-only": {"latency_ms": 1},
    "leak-check": {"latency_ms": 1},
}
CAPS = ["text", "image", "file", "tools", "json_schema", "reasoning"]


def gateway_config(sim_url: str) -> dict[str, Any]:
    ref = "${E2E_SIM_KEY}"
    return {
        "providers": [
            {"name": "oa", "kind": "openai", "base_url": f"{sim_url}/v1", "api_key": ref},
            {"name": "az", "kind": "azure_openai", "base_url": sim_url, "api_version": "2024-10-21", "api_key": ref},
            {"name": "an", "kind": "anthropic", "base_url": sim_url, "api_key": ref},
            {"name": "ge", "kind": "gemini", "base_url": sim_url, "api_key": ref},
        ],
        "models": [
            {"provider": "oa", "upstream": "oa-model", "input_price": 1, "output_price": 2, "capabilities": CAPS},
            {"provider": "az", "upstream": "az-model", "input_price": 1, "output_price": 2, "capabilities": CAPS},
            {"provider": "an", "upstream": "an-model", "input_price": 1, "output_price": 2, "capabilities": CAPS},
            {"provider": "ge", "upstream": "ge-model", "input_price": 1, "output_price": 2, "capabilities": CAPS},
            {"provider": "oa", "upstream": "slow-stream", "capabilities": CAPS},
            {"provider": "oa", "upstream": "text-only", "capabilities": ["text"]},
            {"provider": "an", "upstream": "leak-check", "capabilities": ["text"]},
        ],
        "virtual_models": [
            {"source": "pool", "strategy": "adaptive",
             "targets": [{"model": "oa/oa-model"}, {"model": "an/an-model"}]},
        ],
        "tier_routes": {"normal": {"easy": "oa/oa-model", "hard": "pool"}},
    }


@pytest.fixture(scope="session")
def simulator() -> Iterator[SimulatorServer]:
    with SimulatorServer(config={"models": SIM_MODELS}) as sim:
        yield sim


ADMIN_URL = "postgresql://postgres@127.0.0.1:5432/postgres"


@contextlib.contextmanager
def fresh_database(tag: str) -> Iterator[str]:
    """A migrated PostgreSQL database of its own, dropped afterwards; yields its URL."""
    name = f"gomodel_e2e_{tag}_{os.getpid()}"
    with psycopg.connect(ADMIN_URL, autocommit=True) as conn:
        conn.execute(f'DROP DATABASE IF EXISTS "{name}" WITH (FORCE)')
        conn.execute(f'CREATE DATABASE "{name}"')
    url = f"postgres://postgres@127.0.0.1:5432/{name}"
    try:
        manage(url, "migrate", "-v0")
        yield url
    finally:
        with psycopg.connect(ADMIN_URL, autocommit=True) as conn:
            conn.execute(f'DROP DATABASE IF EXISTS "{name}" WITH (FORCE)')


def manage(database_url: str, *args: str, env: dict[str, str] | None = None) -> str:
    """Run a manage.py command against ``database_url``; its standard output."""
    full = dict(os.environ, DATABASE_URL=database_url, DJANGO_SETTINGS_MODULE="gomodel_site.settings", **(env or {}))
    done = subprocess.run([sys.executable, "manage.py", *args], cwd=ROOT, env=full, check=True,
                          capture_output=True, text=True)
    return done.stdout


@pytest.fixture(scope="session")
def e2e_database_url() -> Iterator[str]:
    with fresh_database("open") as url:
        yield url


@contextlib.contextmanager
def open_gateway(tmp: Path, simulator: SimulatorServer, database_url: str, *, server: str = "uvicorn",
                 env: dict[str, str] | None = None) -> Iterator[Gateway]:
    """A gateway on the shared e2e configuration, open to loopback, audit written in process."""
    config = tmp / "config.yaml"
    config.write_text(yaml.safe_dump(gateway_config(simulator.base_url)))
    full_env = {"DATABASE_URL": database_url, "GOMODEL_CONFIG": str(config), "E2E_SIM_KEY": SIM_KEY,
                "GOMODEL_MASTER_KEY": "", "GOMODEL_AUTH": "open", "CELERY_BROKER_URL": "", **(env or {})}
    with run_gateway(tmp, full_env, server=server) as running:
        yield running


@pytest.fixture(scope="session")
def gateway(tmp_path_factory: pytest.TempPathFactory, simulator: SimulatorServer,
            e2e_database_url: str) -> Iterator[Gateway]:
    with open_gateway(Path(tmp_path_factory.mktemp("gateway")), simulator, e2e_database_url) as running:
        yield running


def assert_hangup_cancels_upstream(gateway: Gateway, simulator: SimulatorServer) -> None:
    """Read the first chunk of a slow stream, hang up, and see the simulator report the request disconnected."""
    simulator.reset()
    body = {"model": "oa/slow-stream", "stream": True, "messages": [{"role": "user", "content": "a long story"}]}
    with httpx2.stream("POST", f"{gateway.base_url}/v1/chat/completions", json=body, timeout=30) as response:
        for line in response.iter_lines():
            if line.startswith("data: {"):
                break
    deadline = time.monotonic() + 5
    outcome = None
    while time.monotonic() < deadline:
        records = simulator.received(model="slow-stream")
        outcome = records[-1].get("outcome") if records else None
        if outcome in ("disconnected", "completed"):
            break
        time.sleep(0.05)
    assert outcome == "disconnected"


@pytest.fixture
def sim(simulator: SimulatorServer) -> Iterator[SimulatorServer]:
    simulator.clear_faults()
    yield simulator
    simulator.clear_faults()


@pytest.fixture
def oai(gateway: Gateway, sim: SimulatorServer) -> Iterator[openai.OpenAI]:
    """The openai SDK pointed at ``gateway`` (the session's, or the one a module defines), without retries."""
    with openai.OpenAI(base_url=f"{gateway.base_url}/v1", api_key="unused-on-loopback", max_retries=0) as client:
        yield client


@pytest.fixture
def claude(gateway: Gateway, sim: SimulatorServer) -> Iterator[anthropic.Anthropic]:
    """The anthropic SDK pointed at ``gateway``, without retries."""
    with anthropic.Anthropic(base_url=gateway.base_url, api_key="unused-on-loopback", max_retries=0) as client:
        yield client

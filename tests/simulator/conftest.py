"""Fixtures for the simulator's tests: one shared simulator, reset before each test, and clients for it."""

from __future__ import annotations

from collections.abc import Iterator

import httpx2 as httpx
import pytest

from routing.simulator import SimulatorServer

# The shared simulator's models. Tests that need another configuration start their own server.
SHARED_CONFIG = {
    "seed": 7,
    "defaults": {"chunk_count": 4},
    "models": {
        "gpt-test": {"input_price": 1.0, "output_price": 2.0, "cached_input_price": 0.5, "context_window": 8000},
        "claude-test": {"context_window": 8000},
        "gemini-test": {"context_window": 8000},
        "locked": {"api_keys": ["sk-first", "sk-second"]},
        "fixed": {"reply": "A fixed reply."},
    },
}


@pytest.fixture(scope="session")
def shared_simulator() -> Iterator[SimulatorServer]:
    with SimulatorServer(SHARED_CONFIG) as server:
        yield server


@pytest.fixture
def sim(shared_simulator: SimulatorServer) -> SimulatorServer:
    shared_simulator.reset()
    return shared_simulator


@pytest.fixture(scope="session")
def shared_client(shared_simulator: SimulatorServer) -> Iterator[httpx.Client]:
    # One client for the session: building a client's TLS context costs a quarter of a second.
    with httpx.Client(base_url=shared_simulator.base_url, timeout=10.0) as http:
        yield http


@pytest.fixture
def client(sim: SimulatorServer, shared_client: httpx.Client) -> httpx.Client:
    """A client of the shared simulator, which is reset for the test."""
    return shared_client

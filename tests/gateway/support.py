"""What the in-process request tests share: the simulator as upstream, a routing table, fresh state, a client.

A test builds a ``Call`` the way the views do (``request``), hands it to the engine (``answer``) and reads
the reply as a client would: status, headers and body, errors rendered in the client's envelope by the
views' own ``error_response``. The upstream is the provider simulator on loopback, so every byte crosses a
real socket; the per-process state is renewed before and after each test.

The fixtures are bound into each test module by assignment (``sim = support.sim``): the package's
conftest only captures audit events.
"""

from __future__ import annotations

import asyncio
import json
import random
import uuid
from collections.abc import Coroutine, Iterator, Mapping
from dataclasses import dataclass
from typing import Any, TypeVar

import pytest
from django.http import HttpResponse, HttpResponseBase, StreamingHttpResponse
from prometheus_client import REGISTRY

from routing.api.views import error_response
from routing.clients import upstream
from routing.core.features import extract_features
from routing.core.table import (
    ContractSpec,
    KeySpec,
    ModelSpec,
    ProviderSpec,
    RoutingTable,
    Secret,
    SettingsInForce,
    TargetRef,
    TierRouteSpec,
    VirtualModelSpec,
)
from routing.gateway import engine
from routing.gateway.gateway_error import GatewayError
from routing.gateway.records import Call
from routing.gateway.state import GatewayState, state
from routing.models import hash_secret
from routing.providers.errors import Inbound
from routing.simulator import SimulatorServer, unused_loopback_url

T = TypeVar("T")

SIMULATED = {
    "defaults": {"chunk_count": 4},
    "models": {
        "slow-stream": {"chunk_count": 8, "chunk_interval_ms": 40},
    },
}
CAPS = frozenset({"text", "image", "tools", "json_schema"})
SCHEMA = {"type": "object", "properties": {"name": {"type": "string"}}, "required": ["name"]}
SCHEMA_FORMAT = {"type": "json_schema", "json_schema": {"name": "person", "schema": SCHEMA}}
LIMITED_SECRET = "sk-limited-test-key"
LIMITED_KEY = KeySpec(id=7, name="limited", secret_hash=hash_secret(LIMITED_SECRET),
                      allowed_models=frozenset({"primary"}))


def _model(name: str, provider: str = "sim", *, upstream_name: str | None = None,
           capabilities: frozenset[str] = CAPS) -> ModelSpec:
    return ModelSpec(name=name, provider=provider, upstream=upstream_name or name, input_price=1.0, output_price=2.0,
                     capabilities=capabilities)


def _virtual(source: str, strategy: str, *targets: str) -> VirtualModelSpec:
    return VirtualModelSpec(source=source, strategy=strategy, targets=tuple(TargetRef(t) for t in targets))


def routing_table(sim_url: str, *, settings: SettingsInForce | None = None, version: int = 1) -> RoutingTable:
    """The tests' configuration: concrete models on the simulator, pools over them, a tier route, a contract.

    ``unreachable`` sits on a loopback port nobody listens on (connections are refused).
    """
    return RoutingTable.build(
        version=version,
        providers=[
            ProviderSpec("sim", "openai", f"{sim_url}/v1"),
            ProviderSpec("sim-anthropic", "anthropic", sim_url, api_keys=(Secret("sk-simulated"),)),
            ProviderSpec("nowhere", "openai", f"{unused_loopback_url()}/v1"),
        ],
        models=[
            _model("primary"), _model("secondary"), _model("third"), _model("slow-stream"),
            _model("text-only", capabilities=frozenset({"text"})),
            _model("claude", "sim-anthropic", upstream_name="claude-sim"),
            _model("unreachable", "nowhere"),
        ],
        virtual_models=[
            _virtual("pair", "failover", "primary", "secondary"),
            _virtual("rr", "round_robin", "primary", "secondary"),
            _virtual("dead-pair", "failover", "unreachable", "secondary"),
            _virtual("nested", "failover", "pair", "third"),
            _virtual("sticky", "adaptive", "primary", "secondary"),
        ],
        tier_routes=[TierRouteSpec("normal", easy="primary", hard="pair")],
        contracts=[ContractSpec("extract", structured_output_required=True, schema=SCHEMA, deadline_ms=5000)],
        keys=[LIMITED_KEY],
        settings=settings,
    )


def request(table: RoutingTable, model: str, text: str = "hello", *, headers: Mapping[str, str] | None = None,
            key: KeySpec | None = None, inbound: Inbound = "openai", stream: bool = False, **extra: Any) -> Call:
    """One client request, read as ``routing.api.views`` reads it (header names in lower case)."""
    body: dict[str, Any] = {"model": model, "messages": [{"role": "user", "content": text}], **extra}
    if inbound == "anthropic":
        body.setdefault("max_tokens", 256)
    if stream:
        body["stream"] = True
    return Call(request_id=uuid.uuid4().hex, inbound=inbound, key=key, body=body,
                features=extract_features(body, inbound),
                headers={name.lower(): value for name, value in (headers or {}).items()}, table=table)


@dataclass
class Reply:
    """What the client received: status, headers (any case) and the whole body."""

    status: int
    headers: Mapping[str, str]
    body: bytes

    def json(self) -> Any:
        return json.loads(self.body)

    @property
    def error(self) -> dict[str, Any]:
        return self.json()["error"]  # type: ignore[no-any-return]

    @property
    def events(self) -> list[str]:
        """The ``data:`` payloads of a streamed reply, in order."""
        return [line[6:] for line in self.body.decode().splitlines() if line.startswith("data: ")]


async def read(response: HttpResponseBase) -> Reply:
    if isinstance(response, StreamingHttpResponse):
        body = b"".join([part async for part in response.streaming_content])  # type: ignore[union-attr]
    else:
        assert isinstance(response, HttpResponse)
        body = response.content
    return Reply(response.status_code, response.headers, body)


async def answer(call: Call) -> Reply:
    """Serve ``call`` as ``routing.api.views`` does: the engine's response, or its error in the envelope."""
    try:
        response: HttpResponseBase = await engine.handle(call)
    except GatewayError as exc:
        response = error_response(call.inbound, exc, call.request_id)
    return await read(response)


def run(scenario: Coroutine[Any, Any, T]) -> T:
    """Run a test's scenario on a new event loop and close the upstream connections it opened.

    Work a request left in the background (a session pin being written) finishes first, as it would on a
    server's loop that keeps running.
    """

    async def main() -> T:
        try:
            return await scenario
        finally:
            background = asyncio.all_tasks() - {asyncio.current_task()}
            await asyncio.gather(*background)
            await upstream.pool.aclose()

    return asyncio.run(main())


async def eventually(condition: Any, *, timeout: float = 5.0, what: str = "the condition") -> None:
    """Wait until ``condition()`` is true, polling; fails the test after ``timeout`` seconds."""
    loop = asyncio.get_running_loop()
    give_up = loop.time() + timeout
    while not condition():
        if loop.time() > give_up:
            raise AssertionError(f"{what} did not happen within {timeout} s")
        await asyncio.sleep(0.01)


def counted(name: str, **labels: str) -> float:
    """A Prometheus counter's value in this process (0 before its first increment)."""
    return REGISTRY.get_sample_value(name, labels) or 0.0


def attempts_of(event: Mapping[str, Any]) -> list[tuple[str, str, str, str]]:
    """An audit event's attempts as (target, reason, action, validation)."""
    return [(a["target"], a["reason"], a["action"], a["validation"]) for a in event["attempts"]]


# -- fixtures (bound into each test module) -------------------------------------------------------------------


@pytest.fixture(scope="module")
def simulator() -> Iterator[SimulatorServer]:
    with SimulatorServer(SIMULATED) as server:
        yield server


@pytest.fixture
def sim(simulator: SimulatorServer) -> SimulatorServer:
    """The module's simulator, back to its configured start (no faults, no records)."""
    simulator.reset()
    return simulator


@pytest.fixture
def table(simulator: SimulatorServer) -> RoutingTable:
    return routing_table(simulator.base_url)


@pytest.fixture(autouse=True)
def fresh_state(settings: Any) -> Iterator[GatewayState]:
    """A newly started process's gateway state for each test (pins in memory), and again afterwards."""
    settings.REDIS_URL = ""
    state.renew()
    state.rng = random.Random(0)
    yield state
    state.renew()

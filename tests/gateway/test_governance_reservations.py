"""A hostile client against a key's tokens and budget, in process: streams it hangs up on, JSON requests it
abandons, bursts of concurrent requests, and a restart. Every answer the provider produced is counted (its
usage, or an estimate marked as such), and admission holds what each request may cost, so concurrency cannot
carry spend past a budget.
"""

from __future__ import annotations

import asyncio
import time
from collections.abc import Iterator
from typing import Any

import pytest
from django.utils import timezone

from audit.models import AuditRevision
from routing.core.limits import NANOS_PER_USD, Limits, ScopeCounts
from routing.core.table import KeySpec, ModelSpec, ProviderSpec, RoutingTable, Secret
from routing.gateway.client_answer import RelayStream
from routing.gateway.state import state
from routing.models import hash_secret
from routing.simulator import SimulatorServer
from tests.gateway import support
from tests.gateway.support import answer, eventually, request, run

LONG = {"reply_tokens": 2000, "chunk_count": 400, "chunk_interval_ms": 2}
SIMULATED = {"defaults": {"chunk_count": 4}, "models": {"long": LONG, "claude-long": LONG,
                                                        "slow": {"latency_ms": 3000}, "medium": {"latency_ms": 300}}}
fresh_state = support.fresh_state


@pytest.fixture(scope="module")
def simulator() -> Iterator[SimulatorServer]:
    with SimulatorServer(SIMULATED) as server:
        yield server


@pytest.fixture
def sim(simulator: SimulatorServer) -> SimulatorServer:
    simulator.reset()
    return simulator


@pytest.fixture
def table(simulator: SimulatorServer) -> RoutingTable:
    def model(name: str, provider: str = "sim", upstream: str | None = None) -> ModelSpec:
        return ModelSpec(name=name, provider=provider, upstream=upstream or name, input_price=1.0, output_price=2.0,
                         capabilities=frozenset({"text"}))

    return RoutingTable.build(
        version=1,
        providers=[ProviderSpec("sim", "openai", f"{simulator.base_url}/v1"),
                   ProviderSpec("sim-anthropic", "anthropic", simulator.base_url, api_keys=(Secret("sk-sim"),))],
        models=[model("long"), model("claude-long", "sim-anthropic"), model("slow"), model("medium"),
                model("primary")],
    )


def key(name: str, **limits: Any) -> KeySpec:
    return KeySpec(id=abs(hash(name)) % 10_000, name=name, secret_hash=hash_secret(name), limits=Limits(**limits))


def counts(limited: KeySpec) -> ScopeCounts:
    ledger = getattr(state.limits, "ledger", None)
    assert ledger is not None
    return ledger.counts(limited.limit_scopes[0], time.time())  # type: ignore[no-any-return]


async def hang_up_after(call: Any, reads: int) -> None:
    """Read ``reads`` pieces of a relayed stream, then go away as a client that hangs up does."""
    response = await support.engine.handle(call)
    assert isinstance(response, RelayStream)
    for _ in range(reads):
        await anext(response.source)
    await response.source.aclose()


@pytest.mark.parametrize("model", ["long", "claude-long"])
def test_a_stream_the_client_hangs_up_on_counts_what_was_relayed(sim: SimulatorServer, table: RoutingTable,
                                                                  model: str, audit_events: list[dict[str, Any]]
                                                                  ) -> None:
    """Three long streams cut by their client after 120 reads each: the key's token window holds their input
    and the output relayed, on OpenAI- and Anthropic-kind upstreams alike, and each revision says so."""
    limited = key(f"cutter-{model}", tpm=200_000, budget_usd=100.0)

    async def scenario() -> ScopeCounts:
        for _ in range(3):
            await hang_up_after(request(table, model, "tell me a long story", key=limited, stream=True), 120)
        await eventually(lambda: counts(limited).slots == 0 and counts(limited).reserved_tokens == 0,
                         what="the settlements")
        return counts(limited)

    after = run(scenario())
    assert after.tokens > 3 * 100  # at least a token for most of the 3 x 120 reads, plus the prompts
    assert after.spend_nanos > 0
    cut = [e for e in audit_events if e["requested_model"] == model]
    assert len(cut) == 3
    for event in cut:
        attempt = event["attempts"][-1]
        assert attempt["usage_estimated"] is True
        assert attempt["usage"]["output_tokens"] > 0
        assert event["usage_estimated"] is True


def test_the_remaining_tokens_header_falls_after_a_cut_stream(sim: SimulatorServer, table: RoutingTable) -> None:
    limited = key("header-cutter", tpm=20_000)

    async def scenario() -> tuple[int, int]:
        first = await answer(request(table, "primary", key=limited, max_tokens=10))
        await hang_up_after(request(table, "long", "story", key=limited, stream=True, max_tokens=3000), 120)
        await eventually(lambda: counts(limited).reserved_tokens == 0, what="the settlement")
        second = await answer(request(table, "primary", key=limited, max_tokens=10))
        return (int(first.headers["x-ratelimit-remaining-tokens"]),
                int(second.headers["x-ratelimit-remaining-tokens"]))

    first, second = run(scenario())
    assert second < first - 100


def test_a_json_request_its_client_abandons_is_charged_what_it_may_have_cost(
        sim: SimulatorServer, table: RoutingTable, audit_events: list[dict[str, Any]]) -> None:
    """The provider goes on answering (and billing) a request whose client hung up: the attempt in flight is
    charged its input estimate and its max_tokens, never zero."""
    limited = key("abandoner", budget_usd=10.0, tpm=100_000)

    async def scenario() -> ScopeCounts:
        task = asyncio.create_task(answer(request(table, "slow", "hello there", key=limited, max_tokens=500)))
        await eventually(lambda: len(sim.received("slow")) == 1, what="the upstream request")
        task.cancel()
        await asyncio.gather(task, return_exceptions=True)
        await eventually(lambda: counts(limited).slots == 0 and counts(limited).reserved_tokens == 0,
                         what="the settlement")
        return counts(limited)

    after = run(scenario())
    assert after.tokens >= 500
    assert after.spend_nanos >= 500 * 2 * NANOS_PER_USD // 1_000_000
    event = audit_events[-1]
    assert event["status"] == 499
    assert event["attempts"][0]["usage_estimated"] is True
    assert event["attempts"][0]["usage"]["output_tokens"] == 500


def test_a_burst_of_concurrent_requests_cannot_spend_past_the_budget(sim: SimulatorServer,
                                                                      table: RoutingTable) -> None:
    """Twelve at once on a budget that holds five reservations: the rest are refused at admission, and what
    was spent stays within the budget."""
    budget = 5 * (1000 + 10) * 2 / 1_000_000 + 0.0000001  # five requests of max_tokens 1000 at 2 USD/M output
    limited = key("burst", budget_usd=budget, budget_period="day")

    async def scenario() -> tuple[list[int], ScopeCounts]:
        replies = await asyncio.gather(*(answer(request(table, "medium", "hi", key=limited, max_tokens=1000))
                                         for _ in range(12)))
        return [r.status for r in replies], counts(limited)

    statuses, after = run(scenario())
    assert statuses.count(200) <= 5
    assert statuses.count(429) >= 7
    assert after.spend_nanos <= round(budget * NANOS_PER_USD)
    assert after.reserved_nanos == 0


def test_a_used_up_budget_stays_used_up_after_a_restart(sim: SimulatorServer, table: RoutingTable,
                                                         transactional_db: None) -> None:
    """A new process counts what the audit trail says the key spent this period before its first admission:
    a total budget used up before the restart refuses at once (never read as zero)."""
    limited = key("restarted", budget_usd=0.01, budget_period="total")
    AuditRevision.objects.create(request_id="before-the-restart", created_at=timezone.now(), key_id=limited.id,
                                 key_name=limited.name, billed_cost_usd=0.004, cost_usd=0.004)
    AuditRevision.objects.create(request_id="before-the-restart-2", created_at=timezone.now(), key_id=limited.id,
                                 key_name=limited.name, billed_cost_usd=None, cost_usd=0.006)
    AuditRevision.objects.create(request_id="another-key", created_at=timezone.now(), key_id=limited.id + 1,
                                 key_name="other", billed_cost_usd=5.0, cost_usd=5.0)

    reply = run(answer(request(table, "primary", key=limited, max_tokens=5)))
    assert reply.status == 429
    assert reply.error["code"] == "budget_exceeded"
    assert counts(limited).spend_nanos == 10_000_000

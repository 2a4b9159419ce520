"""GatewayState.renew: a newly started process's state, in place, so every module holding it sees the change."""

from __future__ import annotations

import asyncio
import time
from typing import Any

from routing.core.outcome import AttemptOutcome, ErrorClass
from routing.core.table import RoutingTable
from routing.gateway import attempt_loop, client_answer, engine, tiers
from routing.gateway.inspection import explain
from routing.gateway.state import GatewayState, state
from tests.gateway import support

fresh_state = support.fresh_state


def test_it_forgets_everything_a_process_learned_and_keeps_its_identity(fresh_state: GatewayState) -> None:
    now = time.monotonic()
    fresh_state.health.get("a").record(AttemptOutcome.failure(ErrorClass.TRANSIENT, "rate_limited", status=429), now)
    fresh_state.warm.put("session", "a", now, 60.0)
    fresh_state.rr_state("pool")
    fresh_state.next_key_index("provider", 2)
    fresh_state.follow(RoutingTable(version=5))
    pins = fresh_state.pins
    asyncio.run(pins.put("tier", "normal|session", "hard", 60.0))

    fresh_state.renew()

    assert fresh_state.health.get("a").status(time.monotonic()) == "healthy"
    assert fresh_state.warm.get("session", time.monotonic()) is None
    assert fresh_state.round_robin == {}
    assert fresh_state.next_key_index("provider", 2) == 0
    assert fresh_state.applied_version == -1
    assert fresh_state.pins is not pins
    assert asyncio.run(fresh_state.pins.get("tier", "normal|session")) is None
    # Every step of the request path holds this same object.
    assert all(module.state is state for module in (engine, tiers, attempt_loop, client_answer, explain))


def test_it_reads_the_settings_again(fresh_state: GatewayState, settings: Any) -> None:
    settings.GOMODEL_MAX_FALLBACKS = 4
    settings.GOMODEL_RETRY_BUDGET = 1.0
    fresh_state.renew()
    assert fresh_state.retry_policy.max_fallbacks == 4
    for _ in range(20):
        fresh_state.retry_budget.record_request(0.0)
    spent = [fresh_state.retry_budget.try_spend(0.0) for _ in range(21)]
    assert spent.count(True) == 20  # one retry per request (the default ratio, 0.2, allows the floor of 10)

"""Idempotency-Key through the engine, with the operation store in PostgreSQL: a repeat never generates twice.

The store's own paths are tested in tests/clients/test_idempotency_store.py; here each is seen as the
client sees it. A transactional test database: the store writes from worker threads.
"""

from __future__ import annotations

import asyncio
import uuid
from typing import Any

import pytest

from routing.core.table import KeySpec, RoutingTable
from routing.simulator import SimulatorServer
from tests import unreachable_database
from tests.gateway import support
from tests.gateway.support import Reply, answer, eventually, request, run

pytestmark = pytest.mark.django_db(transaction=True)

simulator, sim, table, fresh_state = support.simulator, support.sim, support.table, support.fresh_state
database_unreachable = unreachable_database.database_unreachable


def ask(table: RoutingTable, key: str, text: str = "once only", **options: Any) -> Reply:
    return run(answer(request(table, "primary", text, headers={"Idempotency-Key": key}, **options)))


def test_a_repeat_gets_the_stored_answer_without_a_second_generation(
        sim: SimulatorServer, table: RoutingTable) -> None:
    key = uuid.uuid4().hex
    first, second = ask(table, key), ask(table, key)
    assert first.status == second.status == 200
    assert second.json() == first.json()
    assert second.headers["X-GoModel-Idempotent-Replay"] == "true"
    assert second.headers["X-GoModel-Operation-Id"] == first.headers["X-GoModel-Operation-Id"]
    assert second.headers["X-GoModel-Target"] == "primary"  # the decision headers are stored with it
    assert second.headers["X-Request-Id"] != first.headers["X-Request-Id"]
    assert len(sim.received("primary")) == 1


def test_a_streamed_answer_is_replayed(sim: SimulatorServer, table: RoutingTable) -> None:
    key = uuid.uuid4().hex
    first, second = ask(table, key, stream=True), ask(table, key, stream=True)
    assert second.body == first.body
    assert second.events[-1] == "[DONE]"
    assert len(sim.received("primary")) == 1


def test_the_same_key_for_another_request_is_422(sim: SimulatorServer, table: RoutingTable) -> None:
    key = uuid.uuid4().hex
    assert ask(table, key).status == 200
    other = ask(table, key, "something else")
    assert (other.status, other.error["code"], other.error["param"]) == (422, "idempotency_key_reused",
                                                                         "Idempotency-Key")


def test_a_repeat_while_the_first_runs_is_409(sim: SimulatorServer, table: RoutingTable) -> None:
    sim.set_fault("primary", {"kind": "slow", "ms": 1000, "times": 1})
    key = uuid.uuid4().hex

    async def scenario() -> tuple[Reply, Reply]:
        first = asyncio.create_task(answer(request(table, "primary", "once only", headers={"Idempotency-Key": key})))
        # The first request reached the provider, so it holds the operation: now repeat it.
        await eventually(lambda: bool(sim.received("primary")), what="the first request's arrival upstream")
        repeat = await answer(request(table, "primary", "once only", headers={"Idempotency-Key": key}))
        return await first, repeat

    first, repeat = run(scenario())
    assert (repeat.status, repeat.error["code"], repeat.headers["Retry-After"]) == (409, "idempotency_key_in_use", "1")
    assert first.status == 200
    assert len(sim.received("primary")) == 1


def test_after_an_unknown_outcome_the_key_is_refused(sim: SimulatorServer, table: RoutingTable) -> None:
    sim.set_fault("primary", {"kind": "stream_cut", "after_chunks": 2, "times": 1})
    key = uuid.uuid4().hex
    cut = ask(table, key, stream=True)
    assert cut.status == 200
    assert "error" in cut.events[-1]
    repeat = ask(table, key, stream=True)
    assert (repeat.status, repeat.error["code"]) == (409, "idempotency_outcome_unknown")
    assert len(sim.received("primary")) == 1


def test_after_a_definite_failure_the_same_key_runs_again(sim: SimulatorServer, table: RoutingTable) -> None:
    sim.set_fault("primary", {"kind": "status", "status": 500, "times": 1})
    key = uuid.uuid4().hex
    assert ask(table, key).status == 502
    assert ask(table, key).status == 200
    assert len(sim.received("primary")) == 2


def test_two_gateway_keys_never_share_an_operation(sim: SimulatorServer, table: RoutingTable) -> None:
    key = uuid.uuid4().hex
    other_caller = KeySpec(id=8, name="other", secret_hash="0" * 64)
    mine = run(answer(request(table, "primary", "same words", headers={"Idempotency-Key": key})))
    theirs = run(answer(request(table, "primary", "same words", headers={"Idempotency-Key": key}, key=other_caller)))
    assert mine.status == theirs.status == 200
    assert "X-GoModel-Idempotent-Replay" not in theirs.headers
    assert mine.headers["X-GoModel-Operation-Id"] != theirs.headers["X-GoModel-Operation-Id"]
    assert len(sim.received("primary")) == 2


def test_without_its_database_an_idempotent_request_is_503_and_not_sent(
        sim: SimulatorServer, table: RoutingTable, database_unreachable: None) -> None:
    reply = ask(table, uuid.uuid4().hex)
    assert (reply.status, reply.error["code"], reply.headers["Retry-After"]) == (503, "idempotency_unavailable", "5")
    assert sim.received() == []

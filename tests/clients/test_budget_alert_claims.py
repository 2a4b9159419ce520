"""Budget alert thresholds claimed by the limit stores: once per scope, period and threshold, in this process or
across every store sharing Redis, from the spend before and after each settlement.

Needs Redis on 127.0.0.1:6379 (tests/conftest.py starts it when missing); each test counts under its own key
prefix in Redis db 2 and removes its keys after.
"""

from __future__ import annotations

import asyncio
import uuid
from collections.abc import Iterator

import pytest
import redis

from routing.clients.limit_store import ProcessLimitStore, RedisLimitStore
from routing.core.budget_alerts import BudgetCrossing
from routing.core.limits import NANOS_PER_USD, Limits, LimitScope
from tests.services import drop_redis_keys

pytestmark = pytest.mark.services

REDIS_URL = "redis://127.0.0.1:6379/2"
THRESHOLDS = (50, 80, 100)
CENT = NANOS_PER_USD // 100


@pytest.fixture
def prefix() -> Iterator[str]:
    name = f"gomodel:test:alerts:{uuid.uuid4().hex[:12]}:"
    yield name
    drop_redis_keys(REDIS_URL, name)


def budget_scope(name: str = "k", usd: float = 0.10, period: str = "day") -> LimitScope:
    return LimitScope("key", name, f"key:{name}", Limits(budget_usd=usd, budget_period=period), "squad")


def make(kind: str, prefix: str, seen: list[BudgetCrossing], **kwargs: object) -> ProcessLimitStore | RedisLimitStore:
    if kind == "process":
        return ProcessLimitStore(alert_thresholds=THRESHOLDS, on_crossing=seen.append, **kwargs)  # type: ignore[arg-type]
    return RedisLimitStore(REDIS_URL, prefix=prefix, alert_thresholds=THRESHOLDS, on_crossing=seen.append,
                           **kwargs)  # type: ignore[arg-type]


async def spend(store: ProcessLimitStore | RedisLimitStore, scopes: tuple[LimitScope, ...], request_id: str,
                nanos: int) -> None:
    admission = await store.admit(scopes, request_id)
    assert admission.verdict.admitted
    store.settle(admission, tokens=10, spend_nanos=nanos)
    if isinstance(store, RedisLimitStore):
        await store._client.drain()  # the settlement's answer (and its claims) handled


BOTH = pytest.mark.parametrize("kind", ["process", "redis"])


@BOTH
def test_it_claims_each_threshold_once_as_the_spend_crosses_it(kind: str, prefix: str) -> None:
    async def run() -> list[list[tuple[int, int]]]:
        seen: list[BudgetCrossing] = []
        store = make(kind, prefix, seen)
        scopes = (budget_scope(),)
        steps = []
        try:
            for i, nanos in enumerate((4 * CENT, 1 * CENT, 1 * CENT, 3 * CENT, 1 * CENT)):
                before = len(seen)
                await spend(store, scopes, f"r{i}", nanos)
                steps.append([(c.threshold, c.spend_nanos) for c in seen[before:]])
        finally:
            await store.aclose()
        assert {c.period for c in seen} == {seen[0].period}
        assert seen[0].period.startswith("day:")
        assert all(c.scope.name == "k" and c.scope.team == "squad" for c in seen)
        return steps

    # 4c: nothing; 5c: 50% (exactly at the level); 6c: nothing more; 9c: 80%; 10c: 100%.
    assert asyncio.run(run()) == [[], [(50, 5 * CENT)], [], [(80, 9 * CENT)], [(100, 10 * CENT)]]


@BOTH
def test_one_settlement_past_several_levels_claims_them_all(kind: str, prefix: str) -> None:
    async def run() -> list[int]:
        seen: list[BudgetCrossing] = []
        store = make(kind, prefix, seen)
        try:
            await spend(store, (budget_scope(),), "big", 10 * CENT)
        finally:
            await store.aclose()
        return [c.threshold for c in seen]

    assert asyncio.run(run()) == [50, 80, 100]


@BOTH
def test_a_key_and_its_team_each_claim_their_own_thresholds(kind: str, prefix: str) -> None:
    async def run() -> list[tuple[str, int]]:
        seen: list[BudgetCrossing] = []
        store = make(kind, prefix, seen)
        key = budget_scope(usd=0.10)
        team = LimitScope("team", "squad", "team:squad", Limits(budget_usd=1.0, budget_period="month"), "squad")
        try:
            await spend(store, (key, team), "r", 6 * CENT)
        finally:
            await store.aclose()
        return [(c.scope.kind, c.threshold) for c in seen]

    assert asyncio.run(run()) == [("key", 50)]


def test_a_seeded_spend_never_claims_a_threshold() -> None:
    """After a restart the spend the database recorded is counted first; it was alerted when it was settled."""
    async def run() -> list[int]:
        seen: list[BudgetCrossing] = []

        async def recorded(scope: LimitScope, since: float) -> int:
            return 9 * CENT

        store = ProcessLimitStore(alert_thresholds=THRESHOLDS, on_crossing=seen.append, spend_source=recorded)
        await spend(store, (budget_scope(),), "after-restart", CENT // 2)
        await spend(store, (budget_scope(),), "then", CENT // 2)
        return [c.threshold for c in seen]

    assert asyncio.run(run()) == [100]


def test_a_new_budget_period_claims_its_thresholds_afresh() -> None:
    async def run() -> list[tuple[str, int]]:
        seen: list[BudgetCrossing] = []
        now = [1_796_000_000.0]  # a Tuesday
        store = ProcessLimitStore(alert_thresholds=THRESHOLDS, on_crossing=seen.append, clock=lambda: now[0])
        await spend(store, (budget_scope(),), "today", 6 * CENT)
        now[0] += 86_400
        await spend(store, (budget_scope(),), "tomorrow", 6 * CENT)
        return [(c.period, c.threshold) for c in seen]

    first, second = asyncio.run(run())
    assert first[1] == second[1] == 50
    assert first[0] != second[0]


def test_without_thresholds_nothing_is_claimed(prefix: str) -> None:
    async def run() -> list[BudgetCrossing]:
        seen: list[BudgetCrossing] = []
        store = RedisLimitStore(REDIS_URL, prefix=prefix, alert_thresholds=(), on_crossing=seen.append)
        try:
            await spend(store, (budget_scope(),), "r", 20 * CENT)
        finally:
            await store.aclose()
        return seen

    assert asyncio.run(run()) == []


def test_two_stores_sharing_redis_claim_each_threshold_exactly_once(prefix: str) -> None:
    """Two stores (two processes' connections) settle 40 answers of a cent at once against a 0.25 USD budget:
    every threshold is claimed once in all, by whichever store's settlement crossed it."""
    async def run() -> tuple[list[int], list[int]]:
        one_seen: list[BudgetCrossing] = []
        two_seen: list[BudgetCrossing] = []
        one, two = make("redis", prefix, one_seen), make("redis", prefix, two_seen)
        scopes = (budget_scope(usd=0.25),)
        try:
            admissions = await asyncio.gather(*[(one if i % 2 else two).admit(scopes, f"r{i}") for i in range(40)])
            assert all(a.verdict.admitted for a in admissions[:25])
            for i, admission in enumerate(admissions):
                if admission.verdict.admitted:
                    (one if i % 2 else two).settle(admission, tokens=1, spend_nanos=CENT)
            await asyncio.gather(one._client.drain(), two._client.drain())
        finally:
            await one.aclose()
            await two.aclose()
        return [c.threshold for c in one_seen], [c.threshold for c in two_seen]

    one_claimed, two_claimed = asyncio.run(run())
    assert sorted(one_claimed + two_claimed) == [50, 80, 100]


def test_a_spend_key_rebuilt_in_redis_does_not_claim_a_threshold_again(prefix: str) -> None:
    """The spend key went (an eviction) and is rebuilt from an audit trail that has not yet seen the last answers:
    crossing 50% again, by the rebuilt count, claims nothing, since the claim outlived the count."""
    async def run() -> list[int]:
        seen: list[BudgetCrossing] = []

        async def lagging_trail(scope: LimitScope, since: float) -> int:
            return 4 * CENT

        store = make("redis", prefix, seen, spend_source=lagging_trail)
        scopes = (budget_scope(),)
        try:
            await spend(store, scopes, "a", 3 * CENT)  # seeded at 4c by the first admission: 7c, 50% claimed
            found = redis.Redis.from_url(REDIS_URL).keys(f"{prefix}*")
            spend_keys = [k for k in found if b":spend:" in k and not k.endswith(b":alerts")]
            assert len(spend_keys) == 1
            redis.Redis.from_url(REDIS_URL).delete(*spend_keys)
            await spend(store, scopes, "b", 2 * CENT)  # rebuilt at 4c: 6c crosses 50% once more, by that count
            await spend(store, scopes, "c", 3 * CENT)  # 9c: 80%
        finally:
            await store.aclose()
        return [c.threshold for c in seen]

    assert asyncio.run(run()) == [50, 80]

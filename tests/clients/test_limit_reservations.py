"""Reservations, token buckets and durable spend in both limit stores (in process and Redis).

A request is admitted only when what is counted, what the requests in flight reserved and its own reservation
fit the limit; settlement replaces the reservation with the real usage. A budget's spend is seeded from the
database (here: a spend source the test owns, the seam the gateway fills with the audit trail's sums) and a
missing Redis spend key is never read as zero. Redis db 2, each test under its own prefix.
"""

from __future__ import annotations

import asyncio
import math
import time
import uuid
from collections.abc import Iterator

import pytest
import redis

from routing.clients.limit_store import ProcessLimitStore, RedisLimitStore, SpendUnavailable
from routing.core.limits import NANOS_PER_USD, Limits, LimitScope, Reservation
from tests.gateway_process import free_port
from tests.services import drop_redis_keys

pytestmark = pytest.mark.services

REDIS_URL = "redis://127.0.0.1:6379/2"
BOTH = pytest.mark.parametrize("kind", ["process", "redis"])
CENT = NANOS_PER_USD // 100


@pytest.fixture
def prefix() -> Iterator[str]:
    name = f"gomodel:test:reserve:{uuid.uuid4().hex[:12]}:"
    yield name
    drop_redis_keys(REDIS_URL, name)


def scope(name: str = "k", **limits: object) -> LimitScope:
    return LimitScope("key", name, f"key:{name}", Limits(**limits))  # type: ignore[arg-type]


def make(kind: str, prefix: str, **options: object) -> ProcessLimitStore | RedisLimitStore:
    if kind == "process":
        return ProcessLimitStore(**options)  # type: ignore[arg-type]
    return RedisLimitStore(REDIS_URL, prefix=prefix, **options)  # type: ignore[arg-type]


@BOTH
def test_concurrent_requests_are_admitted_only_while_their_reservations_fit_the_budget(kind: str,
                                                                                       prefix: str) -> None:
    """Twelve requests in flight at once on a $0.10 budget, each reserving $0.018: five fit, the sixth is
    refused (told to retry in a second), however many arrive together."""
    async def run() -> tuple[int, list[str], int]:
        store = make(kind, prefix)
        budget = (scope("b", budget_usd=0.10, budget_period="day"),)
        try:
            admissions = await asyncio.gather(*(store.admit(budget, f"r{i}", Reservation(0, 18 * CENT // 10))
                                                for i in range(12)))
            admitted = [a for a in admissions if a.verdict.admitted]
            refusals = [a.verdict.refusal for a in admissions if a.verdict.refusal is not None]
            reserved = (await store.counts(budget[0])).reserved_nanos
            return len(admitted), sorted({f"{r.limit}:{r.detail}:{r.retry_after_s:g}" for r in refusals}), reserved
        finally:
            await store.aclose()

    admitted, refusals, reserved = asyncio.run(run())
    assert admitted == 5
    assert refusals == ["budget:in_flight:1"]
    assert reserved == 5 * 18 * CENT // 10


@BOTH
def test_settlement_replaces_the_reservation_with_what_the_answer_used(kind: str, prefix: str) -> None:
    async def run() -> tuple[tuple[int, int], tuple[int, int], bool]:
        store = make(kind, prefix)
        both = (scope("t", tpm=1000, budget_usd=1.0, budget_period="day"),)
        try:
            first = await store.admit(both, "a", Reservation(600, 40 * CENT))
            held = await store.counts(both[0])
            store.settle(first, tokens=150, spend_nanos=2 * CENT)
            await asyncio.sleep(0.05)
            after = await store.counts(both[0])
            # 150 counted + 600 reserved by a new request fit in 1000, where 600 + 600 reserved would not have
            second = await store.admit(both, "b", Reservation(600, 40 * CENT))
            return ((held.reserved_tokens, held.reserved_nanos), (after.tokens, after.spend_nanos),
                    second.verdict.admitted)
        finally:
            await store.aclose()

    held, after, second = asyncio.run(run())
    assert held == (600, 40 * CENT)
    assert after == (150, 2 * CENT)
    assert second is True


@BOTH
def test_a_request_that_alone_reserves_more_than_the_limit_is_told_so(kind: str, prefix: str) -> None:
    async def run() -> list[tuple[str, str, int]]:
        store = make(kind, prefix)
        try:
            out = []
            for limits, held in (({"tpm": 2000}, Reservation(3000, 0)),
                                 ({"budget_usd": 0.01, "budget_period": "total"}, Reservation(0, 2 * CENT))):
                refusal = (await store.admit((scope(uuid.uuid4().hex[:6], **limits),), "x", held)).verdict.refusal
                assert refusal is not None
                out.append((refusal.limit, refusal.detail, refusal.reserved))
            return out
        finally:
            await store.aclose()

    assert asyncio.run(run()) == [("tpm", "too_large", 3000), ("budget", "too_large", 2 * CENT)]


@BOTH
def test_the_token_window_tells_when_a_reservation_fits_again(kind: str, prefix: str) -> None:
    """900 tokens counted under tpm 1000: a request reserving 300 waits until that answer's second has left
    the 60-second window (60 to 61 seconds after it was counted)."""
    async def run() -> float:
        store = make(kind, prefix)
        tpm = (scope("w", tpm=1000),)
        try:
            store.settle(await store.admit(tpm, "a", Reservation(100, 0)), tokens=900, spend_nanos=0)
            await asyncio.sleep(0.05)
            refusal = (await store.admit(tpm, "b", Reservation(300, 0))).verdict.refusal
            assert refusal is not None
            assert refusal.limit == "tpm"
            return refusal.retry_after_s
        finally:
            await store.aclose()

    assert 59.0 <= asyncio.run(run()) <= 61.0


@BOTH
def test_a_budget_is_seeded_from_the_database_once_so_a_restart_forgets_nothing(kind: str, prefix: str) -> None:
    """The store counts what the spend source (the audit trail) says was spent this period before its first
    admission: a used-up total budget stays used up in a new process (or an empty Redis)."""
    asked: list[tuple[str, float]] = []

    async def source(limit_scope: LimitScope, since: float) -> int:
        asked.append((limit_scope.ident, since))
        return 1 * CENT

    async def run() -> tuple[bool, int]:
        store = make(kind, prefix, spend_source=source)
        budget = (scope("s", budget_usd=0.01, budget_period="total"),)
        try:
            refused = await asyncio.gather(*(store.admit(budget, f"r{i}") for i in range(3)))
            return any(a.verdict.admitted for a in refused), (await store.counts(budget[0])).spend_nanos
        finally:
            await store.aclose()

    admitted, spend = asyncio.run(run())
    assert admitted is False
    assert spend == CENT
    assert asked == [("key:s", 0.0)]  # one read for the three concurrent first requests, from the period's start


def test_an_evicted_redis_spend_key_is_rebuilt_from_the_database_never_read_as_zero(prefix: str) -> None:
    spent = [0]

    async def source(limit_scope: LimitScope, since: float) -> int:
        return spent[0]

    async def run() -> list[bool]:
        store = RedisLimitStore(REDIS_URL, prefix=prefix, spend_source=source)
        budget = (scope("e", budget_usd=0.05, budget_period="month"),)
        client = redis.Redis.from_url(REDIS_URL)
        try:
            out = []
            admission = await store.admit(budget, "a")
            out.append(admission.verdict.admitted)
            store.settle(admission, tokens=10, spend_nanos=5 * CENT)  # the budget is used up
            await asyncio.sleep(0.05)
            out.append((await store.admit(budget, "b")).verdict.admitted)
            spent[0] = 5 * CENT  # what the audit trail recorded meanwhile
            for key in client.scan_iter(match=f"{prefix}*spend*"):
                client.delete(key)  # as an eviction policy would
            out.append((await store.admit(budget, "c")).verdict.admitted)
            return out
        finally:
            client.close()
            await store.aclose()

    assert asyncio.run(run()) == [True, False, False]


def test_a_missing_spend_key_with_the_database_away_refuses_rather_than_reads_zero(prefix: str) -> None:
    async def source(limit_scope: LimitScope, since: float) -> int:
        raise OSError("the database is away")

    async def run() -> None:
        store = RedisLimitStore(REDIS_URL, prefix=prefix, spend_source=source)
        try:
            await store.admit((scope("d", budget_usd=1.0),), "a")
        finally:
            await store.aclose()

    with pytest.raises(SpendUnavailable):
        asyncio.run(run())


def test_the_token_window_is_buckets_of_a_second_whatever_the_history(prefix: str) -> None:
    """10,000 answers leave one bucket per second they were settled in, so what a refused admission reads does
    not grow with the history (bench/micro_limits.py measures it at 100k)."""
    async def run() -> tuple[str | None, float]:
        # A generous timeout: 10,000 settlements in one burst on a loaded machine must not read as an outage.
        store = RedisLimitStore(REDIS_URL, prefix=prefix, socket_timeout=10)
        tpm = (scope("h", tpm=1000),)
        try:
            started = time.time()
            admission = await store.admit(tpm, "r")
            for _ in range(10_000):
                store.settle(admission, tokens=1, spend_nanos=0)
            refusal = (await store.admit(tpm, "next")).verdict.refusal  # after every settlement sent before it
            return (None if refusal is None else refusal.limit), time.time() - started
        finally:
            await store.aclose()

    refused, seconds = asyncio.run(run())
    assert refused == "tpm"
    client = redis.Redis.from_url(REDIS_URL)
    try:
        keys = list(client.scan_iter(match=f"{prefix}*:tok"))
        assert len(keys) == 1
        assert client.hlen(keys[0]) <= math.ceil(seconds) + 1
        assert sum(int(v) for v in client.hvals(keys[0])) == 10_000
    finally:
        client.close()


def test_a_redis_outage_does_not_reset_a_budget() -> None:
    """With Redis unreachable the process counts alone, and still seeds the budget from the database first."""
    async def source(limit_scope: LimitScope, since: float) -> int:
        return CENT

    async def run() -> tuple[bool, bool]:
        store = RedisLimitStore(f"redis://127.0.0.1:{free_port()}/0", prefix="gomodel:test:away:",
                                socket_timeout=0.2, spend_source=source)
        try:
            admission = await store.admit((scope("away", budget_usd=0.01, budget_period="total"),), "a")
            return admission.in_redis, admission.verdict.admitted
        finally:
            await store.aclose()

    assert asyncio.run(run()) == (False, False)

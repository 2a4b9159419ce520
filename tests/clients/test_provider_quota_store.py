"""The provider-quota store against a real Redis: two stores stand for two gateway processes sharing one minute.

Each store has a registry of its own (its process's windows) and a connection of its own; they share only a key
prefix, unique to the test. Needs Redis on 127.0.0.1:6379 (tests/conftest.py starts it when missing).
"""

from __future__ import annotations

import asyncio
import logging
import time
import uuid
from collections.abc import Iterator

import pytest
import redis

from routing.clients.provider_quota_store import ProviderQuotaStore
from routing.core.provider_limits import AT_RPM, AT_TPM, ProviderLimits, QuotaRefusal, QuotaRegistry, QuotaTicket
from tests.gateway_process import free_port
from tests.services import drop_redis_keys

pytestmark = pytest.mark.services

REDIS_URL = "redis://127.0.0.1:6379/2"
TARGET = "oa/limited"


@pytest.fixture
def prefix() -> Iterator[str]:
    name = f"gomodel:test:provider-quota:{uuid.uuid4().hex[:12]}:"
    yield name
    drop_redis_keys(REDIS_URL, name)


def process(prefix: str, url: str = REDIS_URL, **limits: int) -> ProviderQuotaStore:
    """One process's store: its own registry, following a table where ``TARGET`` carries ``limits``."""
    registry = QuotaRegistry()
    registry.configure({TARGET: ProviderLimits(**limits)})
    return ProviderQuotaStore(registry, url, prefix=prefix)


async def admit(store: ProviderQuotaStore, reserve: int = 0) -> QuotaTicket | QuotaRefusal:
    quota = store.registry.get(TARGET)
    assert quota is not None
    return await store.admit(quota, reserve, time.monotonic())


def tickets(verdicts: list[QuotaTicket | QuotaRefusal]) -> list[QuotaTicket]:
    return [v for v in verdicts if isinstance(v, QuotaTicket)]


def test_it_admits_exactly_rpm_attempts_in_a_burst_over_two_processes(prefix: str) -> None:
    async def scenario() -> list[QuotaTicket | QuotaRefusal]:
        a, b = process(prefix, rpm=3), process(prefix, rpm=3)
        try:
            return list(await asyncio.gather(*(admit(store) for store in (a, b) for _ in range(5))))
        finally:
            await a.aclose()
            await b.aclose()

    verdicts = asyncio.run(scenario())
    assert len(tickets(verdicts)) == 3
    refusals = [v for v in verdicts if isinstance(v, QuotaRefusal)]
    assert {r.reason for r in refusals} == {AT_RPM}
    assert all(59.0 <= r.retry_after_s <= 60.0 for r in refusals)  # when the oldest of the three leaves


def test_a_reservation_counts_at_once_and_its_settlement_returns_what_was_not_used(prefix: str) -> None:
    async def scenario() -> tuple[QuotaTicket | QuotaRefusal, ...]:
        a, b = process(prefix, tpm=1000), process(prefix, tpm=1000)
        try:
            first = await admit(a, 600)
            refused = await admit(b, 600)  # 600 reserved elsewhere + 600 does not fit 1000
            assert isinstance(first, QuotaTicket)
            a.settle(first, 150)  # the answer used 150 of its 600
            await a.aclose()  # the settlement reaches Redis before the connection closes
            return first, refused, await admit(b, 600), await admit(b, 300)
        finally:
            await b.aclose()

    first, refused, after, over = asyncio.run(scenario())
    assert isinstance(first, QuotaTicket)
    assert first.reserved == 600
    assert isinstance(refused, QuotaRefusal)
    assert refused.reason == AT_TPM
    assert 1.0 <= refused.retry_after_s <= 61.0
    assert isinstance(after, QuotaTicket)  # 150 used + 600 reserved fit
    assert isinstance(over, QuotaRefusal)  # 750 + 300 does not


def test_a_release_takes_back_the_request_and_its_reservation(prefix: str) -> None:
    async def scenario() -> QuotaTicket | QuotaRefusal:
        a, b = process(prefix, rpm=1, tpm=100), process(prefix, rpm=1, tpm=100)
        try:
            ticket = await admit(a, 80)
            assert isinstance(ticket, QuotaTicket)
            assert isinstance(await admit(b, 10), QuotaRefusal)
            a.release(ticket)  # nothing was sent (the request could not be translated for this provider)
            await a.aclose()
            return await admit(b, 80)
        finally:
            await b.aclose()

    assert isinstance(asyncio.run(scenario()), QuotaTicket)


def test_a_request_larger_than_the_whole_tpm_goes_out_alone_into_an_empty_minute(prefix: str) -> None:
    async def scenario() -> list[QuotaTicket | QuotaRefusal]:
        store = process(prefix, tpm=100)
        try:
            return [await admit(store, 5000), await admit(store, 1)]
        finally:
            await store.aclose()

    big, small = asyncio.run(scenario())
    assert isinstance(big, QuotaTicket)
    assert big.reserved == 100
    assert isinstance(small, QuotaRefusal)


def test_buckets_that_left_the_window_are_dropped_whatever_their_number(prefix: str) -> None:
    plain = redis.Redis.from_url(REDIS_URL)
    now = int(plain.time()[0])
    tok = f"{prefix}{TARGET}:tok"
    # A minute that ended two minutes ago, every second of it full.
    old = {str(second): 10 for second in range(now - 200, now - 139)}
    plain.hset(tok, mapping={**old, "o": now - 200, "s": 10 * len(old)})

    async def scenario() -> QuotaTicket | QuotaRefusal:
        store = process(prefix, tpm=100)
        try:
            return await admit(store, 40)
        finally:
            await store.aclose()

    try:
        assert isinstance(asyncio.run(scenario()), QuotaTicket)  # the old 610 tokens no longer count
        fields = plain.hgetall(tok)
        assert int(fields[b"s"]) == 40
        assert len(fields) == 3  # the sum, the low mark and this second's bucket
    finally:
        plain.close()


def test_a_settlement_whose_second_left_the_window_counts_only_what_the_reservation_lacked(prefix: str) -> None:
    plain = redis.Redis.from_url(REDIS_URL)
    now = int(plain.time()[0])

    async def scenario() -> None:
        store = process(prefix, tpm=10_000)
        try:
            ticket = await admit(store, 100)
            assert isinstance(ticket, QuotaTicket)
            ticket.shared_second = now - 100  # a stream that lasted longer than the minute
            store.settle(ticket, 350)
        finally:
            await store.aclose()

    try:
        asyncio.run(scenario())
        fields = plain.hgetall(f"{prefix}{TARGET}:tok")
        assert int(fields[b"s"]) == 100 + 250  # the reservation still in its second, the shortfall now
    finally:
        plain.close()


def test_without_redis_each_process_counts_alone_with_the_same_reservations() -> None:
    async def scenario() -> list[QuotaTicket | QuotaRefusal]:
        store = ProviderQuotaStore(QuotaRegistry(), None)
        store.registry.configure({TARGET: ProviderLimits(rpm=2, tpm=1000)})
        return [await admit(store, 700), await admit(store, 400), await admit(store, 300), await admit(store, 1)]

    verdicts = asyncio.run(scenario())
    assert [type(v).__name__ for v in verdicts] == ["QuotaTicket", "QuotaRefusal", "QuotaTicket", "QuotaRefusal"]
    assert [v.reason for v in verdicts if isinstance(v, QuotaRefusal)] == [AT_TPM, AT_RPM]


def test_a_redis_outage_counts_in_this_process_and_says_so_once(caplog: pytest.LogCaptureFixture) -> None:
    outages: list[int] = []

    async def scenario() -> tuple[list[QuotaTicket | QuotaRefusal], bool]:
        registry = QuotaRegistry()
        registry.configure({TARGET: ProviderLimits(rpm=2)})
        store = ProviderQuotaStore(registry, f"redis://127.0.0.1:{free_port()}/0", socket_timeout=0.2,
                                   on_outage=lambda: outages.append(1))
        try:
            return [await admit(store) for _ in range(3)], registry.shared
        finally:
            await store.aclose()

    with caplog.at_level(logging.WARNING, logger="gomodel.provider_limits"):
        verdicts, shared = asyncio.run(scenario())
    assert [type(v).__name__ for v in verdicts] == ["QuotaTicket", "QuotaTicket", "QuotaRefusal"]
    assert shared is False
    assert outages == [1]
    warnings = [r.getMessage() for r in caplog.records if "PROVIDER LIMITS DEGRADED" in r.getMessage()]
    assert len(warnings) == 1

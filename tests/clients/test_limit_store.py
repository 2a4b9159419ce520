"""Limit stores: the in-process one, the Redis one (also shared by two instances and two OS processes), and the
Redis store through an outage and back.

Needs Redis on 127.0.0.1:6379 (tests/conftest.py starts it when missing) and ``redis-server`` for the outage
tests' private server. Each test counts under its own key prefix in Redis db 2 and removes its keys after.
"""

from __future__ import annotations

import asyncio
import json
import logging
import shutil
import subprocess
import sys
import time
import uuid
from collections.abc import Iterator
from pathlib import Path

import pytest
import redis

from routing.clients.limit_store import ProcessLimitStore, RedisLimitStore, make_limit_store
from routing.clients.redis_client import Script, ScriptCall, _Connection, encode_command
from routing.core.limits import NANOS_PER_USD, Limits, LimitScope
from tests.gateway_process import free_port
from tests.services import drop_redis_keys

pytestmark = pytest.mark.services

REDIS_URL = "redis://127.0.0.1:6379/2"
ROOT = Path(__file__).resolve().parents[2]


@pytest.fixture
def prefix() -> Iterator[str]:
    name = f"gomodel:test:limits:{uuid.uuid4().hex[:12]}:"
    yield name
    drop_redis_keys(REDIS_URL, name)


def scope(kind: str = "key", name: str = "k", **limits: object) -> LimitScope:
    return LimitScope(kind, name, f"{kind}:{name}", Limits(**limits))  # type: ignore[arg-type]


def stores(kind: str, prefix: str) -> ProcessLimitStore | RedisLimitStore:
    return ProcessLimitStore() if kind == "process" else RedisLimitStore(REDIS_URL, prefix=prefix)


BOTH = pytest.mark.parametrize("kind", ["process", "redis"])


@BOTH
def test_a_burst_of_n_is_admitted_and_the_next_refused(kind: str, prefix: str,
                                                       caplog: pytest.LogCaptureFixture) -> None:
    async def run() -> list[bool]:
        store = stores(kind, prefix)
        try:
            scopes = (scope(rpm=30, max_concurrency=100),)
            results = await asyncio.gather(*[store.admit(scopes, f"r{i}") for i in range(31)])
            return [r.verdict.admitted for r in results]
        finally:
            await store.aclose()

    assert sorted(asyncio.run(run()), reverse=True) == [True] * 30 + [False]
    assert "disagree" not in caplog.text  # the Redis script and routing.core.limits.decide agreed on each


@BOTH
def test_concurrency_slots_return_when_settled(kind: str, prefix: str) -> None:
    async def run() -> tuple[bool, bool, bool, int]:
        store = stores(kind, prefix)
        try:
            scopes = (scope(max_concurrency=2),)
            first = await store.admit(scopes, "a")
            await store.admit(scopes, "b")
            third = await store.admit(scopes, "c")
            store.settle(first, tokens=0, spend_nanos=0)
            fourth = await store.admit(scopes, "d")
            slots = (await store.counts(scopes[0])).slots
            return first.verdict.admitted, third.verdict.admitted, fourth.verdict.admitted, slots
        finally:
            await store.aclose()

    assert asyncio.run(run()) == (True, False, True, 2)


@BOTH
def test_tokens_and_spend_counted_at_settle_refuse_the_next_request(kind: str, prefix: str) -> None:
    async def run() -> list[str | None]:
        store = stores(kind, prefix)
        try:
            tpm = (scope(name="t", tpm=1000),)
            budget = (scope(name="b", budget_usd=0.01, budget_period="day"),)
            codes = []
            admission = await store.admit(tpm, "a")
            store.settle(admission, tokens=1000, spend_nanos=0)
            refusal = (await store.admit(tpm, "b")).verdict.refusal
            codes.append(refusal.limit if refusal else None)
            assert (await store.counts(tpm[0])).tokens == 1000
            admission = await store.admit(budget, "c")
            store.settle(admission, tokens=5, spend_nanos=NANOS_PER_USD // 100)
            refusal = (await store.admit(budget, "d")).verdict.refusal
            codes.append(refusal.code if refusal else None)
            assert (await store.counts(budget[0])).spend_nanos == NANOS_PER_USD // 100
            return codes
        finally:
            await store.aclose()

    assert asyncio.run(run()) == ["tpm", "budget_exceeded"]


@BOTH
def test_a_refused_request_is_counted_nowhere(kind: str, prefix: str) -> None:
    async def run() -> tuple[int, int]:
        store = stores(kind, prefix)
        try:
            key, team = scope(rpm=10, max_concurrency=10), scope("team", "t", rpm=1)
            await store.admit((key, team), "a")
            assert not (await store.admit((key, team), "b")).verdict.admitted
            counts = await store.counts(key)
            return counts.requests, counts.slots
        finally:
            await store.aclose()

    assert asyncio.run(run()) == (1, 1)


def test_two_store_instances_sharing_redis_admit_exactly_the_limit(prefix: str) -> None:
    """40 concurrent admissions against rpm 30 through two stores (two connections) on one Redis: exactly 30."""
    async def run() -> int:
        one, two = RedisLimitStore(REDIS_URL, prefix=prefix), RedisLimitStore(REDIS_URL, prefix=prefix)
        try:
            scopes = (scope(rpm=30),)
            results = await asyncio.gather(*[(one if i % 2 else two).admit(scopes, f"r{i}") for i in range(40)])
            return sum(r.verdict.admitted for r in results)
        finally:
            await one.aclose()
            await two.aclose()

    assert asyncio.run(run()) == 30


WORKER = """
import asyncio, json, sys, time
from routing.clients.limit_store import RedisLimitStore
from routing.core.limits import Limits, LimitScope

async def main(job):
    store = RedisLimitStore(job["url"], prefix=job["prefix"])
    scopes = (LimitScope("key", "k", "key:k", Limits(rpm=job["rpm"])),)
    while time.time() < job["start_at"]:
        await asyncio.sleep(0.001)
    results = await asyncio.gather(*[store.admit(scopes, f"{job['name']}-{i}") for i in range(job["count"])])
    await store.aclose()
    print(json.dumps([r.verdict.admitted for r in results]))

asyncio.run(main(json.loads(sys.argv[1])))
"""


def test_two_os_processes_sharing_redis_admit_exactly_the_limit(prefix: str) -> None:
    start_at = time.time() + 1.5  # both interpreters are up by then, so their admissions interleave
    jobs = [{"url": REDIS_URL, "prefix": prefix, "rpm": 30, "count": 20, "name": name, "start_at": start_at}
            for name in ("p1", "p2")]
    procs = [subprocess.Popen([sys.executable, "-c", WORKER, json.dumps(job)], cwd=ROOT, stdout=subprocess.PIPE,
                              text=True) for job in jobs]
    outputs = [json.loads(proc.communicate(timeout=60)[0]) for proc in procs]
    assert sum(sum(out) for out in outputs) == 30
    assert all(any(out) for out in outputs)  # both processes were served, from one shared window


class Clock:
    """Wall time plus an offset the test moves, so the store's "ask Redis again" pause can be skipped."""

    def __init__(self) -> None:
        self.offset = 0.0

    def __call__(self) -> float:
        return time.time() + self.offset


@pytest.fixture
def private_redis_port() -> int:
    if shutil.which("redis-server") is None:
        pytest.fail("redis-server is not installed (apt-get install redis-server)")
    return free_port()


def start_redis(port: int) -> subprocess.Popen[bytes]:
    proc = subprocess.Popen(["redis-server", "--port", str(port), "--bind", "127.0.0.1", "--save", "",
                             "--appendonly", "no"], stdout=subprocess.DEVNULL, stderr=subprocess.DEVNULL)
    client = redis.Redis(port=port)
    for _ in range(200):
        try:
            client.ping()
            break
        except redis.ConnectionError:
            time.sleep(0.02)
    client.close()
    return proc


def test_a_redis_outage_falls_back_to_this_process_and_recovers(private_redis_port: int,
                                                                caplog: pytest.LogCaptureFixture) -> None:
    """Nothing listens on the port: every admission is answered (per process), one warning says so. Redis
    comes up: within the retry pause the store asks it again, counts there, and says so once."""
    caplog.set_level(logging.INFO, logger="gomodel.limits")
    clock = Clock()
    url = f"redis://127.0.0.1:{private_redis_port}/0"
    scopes = (scope(rpm=5, max_concurrency=10),)

    async def down() -> list[tuple[bool, bool]]:
        store = RedisLimitStore(url, prefix="gomodel:test:outage:", retry_after_s=1.0, clock=clock)
        results = []
        for i in range(8):
            admission = await store.admit(scopes, f"d{i}")
            results.append((admission.verdict.admitted, admission.in_redis))
            store.settle(admission, tokens=3, spend_nanos=0)
        assert not store.shared
        await store.aclose()
        return results

    results = asyncio.run(down())
    assert results == [(True, False)] * 5 + [(False, False)] * 3  # counted per process: rpm 5 still holds
    warnings = [r for r in caplog.records if r.levelno == logging.WARNING and "unreachable" in r.getMessage()]
    assert len(warnings) == 1  # once per outage, not per request

    proc = start_redis(private_redis_port)
    try:
        async def recovery() -> tuple[bool, bool, bool]:
            store = RedisLimitStore(url, prefix="gomodel:test:outage:", retry_after_s=1.0, clock=clock)
            first = await store.admit(scopes, "x")  # a fresh store tries Redis at once
            proc.terminate()
            proc.wait(timeout=10)
            second = await store.admit(scopes, "y")  # Redis gone again: answered per process
            restarted = start_redis(private_redis_port)
            try:
                immediately = await store.admit(scopes, "z")  # within the pause: not asked yet
                clock.offset += 1.5
                later = await store.admit(scopes, "w")
                assert immediately.in_redis is False
                return first.in_redis, second.in_redis, later.in_redis
            finally:
                await store.aclose()
                restarted.terminate()
                restarted.wait(timeout=10)

        assert asyncio.run(recovery()) == (True, False, True)
    finally:
        if proc.poll() is None:
            proc.terminate()
            proc.wait(timeout=10)
    assert "answers again" in caplog.text


def test_a_settle_that_cannot_reach_redis_is_counted_here_instead(private_redis_port: int) -> None:
    proc = start_redis(private_redis_port)
    url = f"redis://127.0.0.1:{private_redis_port}/0"
    scopes = (scope(tpm=100),)

    async def run() -> int:
        store = RedisLimitStore(url, prefix="gomodel:test:settle:", retry_after_s=60.0)
        try:
            admission = await store.admit(scopes, "a")
            assert admission.in_redis
            proc.terminate()
            proc.wait(timeout=10)
            store.settle(admission, tokens=150, spend_nanos=0)  # must not raise
            refused = await store.admit(scopes, "b")
            assert not refused.in_redis
            return refused.verdict.refusal is not None
        finally:
            await store.aclose()

    try:
        assert asyncio.run(run()) is True  # the tokens counted in this process meanwhile still refuse
    finally:
        if proc.poll() is None:
            proc.terminate()
            proc.wait(timeout=10)


def test_a_settlement_is_applied_in_redis_without_being_waited_for(prefix: str) -> None:
    """``settle`` returns at once, its answer not waited for: written at once, or queued behind commands of the
    same turn (then one yield, as the engine does before answering, sends it). Either way another connection's
    next command already sees it."""
    async def run() -> tuple[list[bool], int, bool, int, int]:
        one, two = RedisLimitStore(REDIS_URL, prefix=prefix), RedisLimitStore(REDIS_URL, prefix=prefix)
        try:
            scopes = (scope(tpm=10_000, max_concurrency=2),)
            first, second = await asyncio.gather(one.admit(scopes, "a"), one.admit(scopes, "b"))
            queued = [one.settle(first, tokens=700, spend_nanos=0),  # nothing queued: written at once
                      one.settle(second, tokens=50, spend_nanos=0)]  # queued behind it, for this turn's write
            assert one._client._connection is not None
            waiting = len(one._client._connection.pending)
            await asyncio.sleep(0)
            after = await two.admit(scopes, "c")  # another connection, as another gateway process would be
            counts = await two.counts(scopes[0])
            return queued, waiting, after.verdict.admitted, counts.tokens, counts.slots
        finally:
            await one.aclose()
            await two.aclose()

    # Both slots returned and both answers' tokens counted; "c" holds a slot.
    assert asyncio.run(run()) == ([False, True], 2, True, 750, 1)


def test_an_answer_that_changes_nothing_in_redis_sends_nothing(prefix: str) -> None:
    """No slot to return and no tokens or spend to count (only rpm, or tokens and a budget but an answer that used
    none): no settlement is sent; one that has something to count is."""
    async def run() -> list[int]:
        store = RedisLimitStore(REDIS_URL, prefix=prefix)
        try:
            sent = []
            for name, limits, tokens, nanos in (("r", {"rpm": 10}, 50, 7), ("t", {"tpm": 100, "budget_usd": 1.0}, 0, 0),
                                                ("u", {"tpm": 100, "budget_usd": 1.0}, 0, 9),
                                                ("c", {"max_concurrency": 2}, 0, 0)):
                admission = await store.admit((scope(name=name, **limits),), f"{name}-1")
                store.settle(admission, tokens=tokens, spend_nanos=nanos)
                assert store._client._connection is not None
                sent.append(len(store._client._connection.pending))
                await store._client.drain()
            return sent
        finally:
            await store.aclose()

    assert asyncio.run(run()) == [0, 0, 1, 1]


def test_a_settlement_redis_has_no_script_for_is_sent_whole_and_applied(private_redis_port: int) -> None:
    proc = start_redis(private_redis_port)
    url = f"redis://127.0.0.1:{private_redis_port}/0"
    scopes = (scope(tpm=1000, max_concurrency=5, budget_usd=1.0, budget_period="total"),)
    direct = redis.Redis(port=private_redis_port)

    async def run() -> tuple[int, int, int, bool]:
        store = RedisLimitStore(url, prefix="gomodel:test:noscript:")
        try:
            admission = await store.admit(scopes, "a")  # a fresh Redis: NOSCRIPT, then the script sent whole
            direct.script_flush()  # Redis forgets it (SCRIPT FLUSH, a restart) before the settlement
            store.settle(admission, tokens=40, spend_nanos=5_000)
            await store.aclose()  # waits for the settlement's answers (NOSCRIPT, then the script's)
            store = RedisLimitStore(url, prefix="gomodel:test:noscript:")
            counts = await store.counts(scopes[0])
            return counts.tokens, counts.slots, counts.spend_nanos, store.shared
        finally:
            await store.aclose()

    try:
        assert asyncio.run(run()) == (40, 0, 5_000, True)
    finally:
        direct.close()
        proc.terminate()
        proc.wait(timeout=10)


def test_a_settlement_after_redis_dropped_the_connection_goes_out_on_a_new_one(private_redis_port: int) -> None:
    proc = start_redis(private_redis_port)
    url = f"redis://127.0.0.1:{private_redis_port}/0"
    scopes = (scope(tpm=1000, max_concurrency=1),)
    direct = redis.Redis(port=private_redis_port)

    async def run() -> tuple[int, int, bool]:
        store = RedisLimitStore(url, prefix="gomodel:test:dropped:")
        try:
            admission = await store.admit(scopes, "a")
            direct.client_kill_filter(_type="normal", skipme=True)  # an idle timeout, a proxy's reset
            await asyncio.sleep(0.1)  # the store sees the connection close
            store.settle(admission, tokens=25, spend_nanos=0)  # no connection open: it connects, then settles
        finally:
            await store.aclose()  # waits for that settlement
        store = RedisLimitStore(url, prefix="gomodel:test:dropped:")
        try:
            counts = await store.counts(scopes[0])
            return counts.tokens, counts.slots, store.shared
        finally:
            await store.aclose()

    try:
        assert asyncio.run(run()) == (25, 0, True)
    finally:
        direct.close()
        proc.terminate()
        proc.wait(timeout=10)


def test_closing_the_store_waits_a_bounded_time_for_a_settlement_and_counts_it_here_if_unanswered() -> None:
    """A Redis that answers the admission and then falls silent: ``aclose`` returns within the socket timeout,
    and the settlement Redis never confirmed is counted in this process meanwhile (as during an outage)."""
    scopes = (scope(tpm=100),)
    counted = f"{int(time.time() * 1000)},1,0,-1,0,-1,-1,0,0,0,0"

    served = asyncio.Event()

    async def handler(reader: asyncio.StreamReader, writer: asyncio.StreamWriter) -> None:
        try:
            await reader.read(65536)  # the admission
            writer.write(b"$%d\r\n%s\r\n" % (len(counted), counted.encode()))
            while await reader.read(65536):
                pass  # the settlement: no answer
        finally:
            writer.close()
            served.set()

    async def run() -> tuple[float, int, bool]:
        server = await asyncio.start_server(handler, "127.0.0.1", 0)
        port = server.sockets[0].getsockname()[1]
        store = RedisLimitStore(f"redis://127.0.0.1:{port}/0", prefix="gomodel:test:silent:", socket_timeout=0.3)
        try:
            admission = await store.admit(scopes, "a")
            assert admission.in_redis
            store.settle(admission, tokens=150, spend_nanos=0)
            started = time.monotonic()
            await store.aclose()
            waited = time.monotonic() - started
            await asyncio.wait_for(served.wait(), 5)  # the connection is closed on both ends
            return waited, (await store.fallback.counts(scopes[0])).tokens, store.shared
        finally:
            server.close()
            await server.wait_closed()

    waited, tokens_here, shared = asyncio.run(run())
    assert 0.25 <= waited < 2.0
    assert tokens_here == 150
    assert shared is False


def test_without_redis_url_limits_are_counted_in_this_process() -> None:
    assert isinstance(make_limit_store(None), ProcessLimitStore)
    assert isinstance(make_limit_store(REDIS_URL), RedisLimitStore)
    assert make_limit_store(None).shared is False


# -- the Redis client's support for the limit scripts ----------------------------------------------------------


def test_a_prepared_script_call_encodes_exactly_as_the_plain_command() -> None:
    script = Script("return 1")
    call = ScriptCall(script, ["k1", "k2"], [60000], per_call=2)
    assert call.command(("rid", 7)) == encode_command(("EVALSHA", script.sha, 2, "k1", "k2", 60000, "rid", 7))
    assert call.command(("rid", 7), load=True) == encode_command(("EVAL", "return 1", 2, "k1", "k2", 60000, "rid", 7))
    with pytest.raises(ValueError, match="takes 2 arguments"):
        call.command(("rid",))


class RecordingTransport:
    """Stands in for the socket: records each write."""

    def __init__(self) -> None:
        self.writes: list[bytes] = []

    def write(self, data: bytes) -> None:
        self.writes.append(data)

    def abort(self) -> None:
        return None


def test_commands_sent_in_one_turn_of_the_loop_go_out_in_one_write() -> None:
    async def run() -> list[bytes]:
        connection = _Connection()
        transport = RecordingTransport()
        connection.connection_made(transport)  # type: ignore[arg-type]
        waiters = [connection.send(encode_command(("PING",))) for _ in range(3)]
        await asyncio.sleep(0)
        connection.data_received(b"+PONG\r\n+PONG\r\n:7\r\n")
        assert [await w for w in waiters] == ["PONG", "PONG", 7]
        return transport.writes

    assert asyncio.run(run()) == [b"*1\r\n$4\r\nPING\r\n" * 3]

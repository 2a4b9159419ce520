"""Pin stores: the in-process store, and the Redis store shared by separate OS processes.

Needs Redis on 127.0.0.1:6379 (tests/conftest.py starts it when missing). Each test uses its own namespace
and removes its keys afterwards.
"""

from __future__ import annotations

import asyncio
import json
import logging
import socket
import subprocess
import sys
import time
import uuid
from collections.abc import Iterator
from pathlib import Path
from typing import Any

import pytest
import redis

from routing.clients.pin_store import KEY_PREFIX, MemoryPinStore, RedisPinStore, make_pin_store

pytestmark = pytest.mark.services

REDIS_URL = "redis://127.0.0.1:6379/0"
ROOT = Path(__file__).resolve().parent.parent

# A worker process: runs pin operations against Redis and prints what each returned, as JSON.
WORKER = """
import asyncio, json, sys, time
from routing.clients.pin_store import RedisPinStore

async def main(job):
    store = RedisPinStore(job["url"])
    results = []
    try:
        while time.time() < job.get("start_at", 0):  # line the workers up so their writes interleave
            await asyncio.sleep(0.001)
        for op, value in job["ops"]:
            if op == "escalate":
                results.append(await store.escalate(job["ns"], job["key"], value, job["ttl"]))
            elif op == "put":
                results.append(await store.put(job["ns"], job["key"], value, job["ttl"]))
            else:
                results.append(await store.get(job["ns"], job["key"]))
    finally:
        await store.aclose()
    print(json.dumps(results))

asyncio.run(main(json.loads(sys.argv[1])))
"""


def start_worker(job: dict[str, Any]) -> subprocess.Popen[str]:
    return subprocess.Popen(
        [sys.executable, "-c", WORKER, json.dumps({"url": REDIS_URL, **job})],
        cwd=ROOT,
        stdout=subprocess.PIPE,
        stderr=subprocess.PIPE,
        text=True,
    )


def finish(worker: subprocess.Popen[str]) -> list[Any]:
    out, err = worker.communicate(timeout=60)
    assert worker.returncode == 0, err
    return list(json.loads(out))


def run_worker(job: dict[str, Any]) -> list[Any]:
    return finish(start_worker(job))


@pytest.fixture
def client() -> Iterator[redis.Redis]:
    """A plain client to look at what the store wrote."""
    with redis.Redis.from_url(REDIS_URL, decode_responses=True) as plain:
        yield plain


@pytest.fixture
def namespace(client: redis.Redis) -> Iterator[str]:
    name = f"test-{uuid.uuid4().hex}"
    yield name
    for pattern in (f"{KEY_PREFIX}{name}:*", f"{KEY_PREFIX}{name}-*"):
        keys = list(client.scan_iter(pattern))
        if keys:
            client.delete(*keys)


def test_it_shares_a_pin_between_two_worker_processes(namespace: str) -> None:
    job = {"ns": namespace, "key": "s1", "ttl": 60}
    assert run_worker({**job, "ops": [["escalate", "easy"]]}) == [None]
    assert run_worker({**job, "ops": [["get", None], ["escalate", "hard"]]}) == ["easy", "easy"]
    # The first kind of process again (a fresh one): it sees the other's escalation and cannot lower it.
    assert run_worker({**job, "ops": [["escalate", "easy"], ["get", None]]}) == ["hard", "hard"]

    async def from_here() -> str | None:
        store = RedisPinStore(REDIS_URL)
        try:
            return await store.get(namespace, "s1")
        finally:
            await store.aclose()

    assert asyncio.run(from_here()) == "hard"


def test_it_never_lowers_a_pin_under_concurrent_writers(namespace: str, client: redis.Redis) -> None:
    # Workers start together (a few seconds out, as processes start slowly on a busy machine), and the
    # others keep writing long after the escalation so that their runs overlap it.
    start_at = time.time() + 4.0
    job = {"ns": namespace, "key": "busy", "ttl": 60, "start_at": start_at}
    escalator = start_worker({**job, "ops": [["escalate", "easy"]] * 100 + [["escalate", "hard"]]
                              + [["escalate", "easy"]] * 100})  # fmt: skip
    others = [start_worker({**job, "ops": [["escalate", "easy"]] * 3000}) for _ in range(3)]
    histories = [finish(escalator)] + [finish(worker) for worker in others]

    for history in histories:
        seen_hard = False
        for previous in history:
            assert not (seen_hard and previous != "hard"), history
            seen_hard = seen_hard or previous == "hard"
    assert histories[0][101:] == ["hard"] * 100  # after its own escalation the escalator only sees hard
    assert sum(previous == "hard" for history in histories[1:] for previous in history) > 0  # they overlapped
    assert client.hget(f"{KEY_PREFIX}{namespace}:busy", "v") == "hard"


def test_it_slides_the_ttl_on_every_read(namespace: str, client: redis.Redis) -> None:
    key = f"{KEY_PREFIX}{namespace}:s"

    async def scenario() -> list[Any]:
        store = RedisPinStore(REDIS_URL)
        seen: list[Any] = []
        try:
            await store.put(namespace, "s", "hard", 60.0)
            client.pexpire(key, 300)  # as if the pin had gone unread for all but 0.3 s of its TTL
            seen.append(await store.get(namespace, "s"))
            seen.append(client.pttl(key))
            client.pexpire(key, 1)  # as if a full TTL had passed without reads
            seen.append(await until_gone(client, key))
            seen.append(await store.get(namespace, "s"))
        finally:
            await store.aclose()
        return seen

    read, pttl, gone, expired = asyncio.run(scenario())
    assert read == "hard"
    assert gone
    assert expired is None
    assert pttl > 59_000  # the read restarted the TTL to the stored 60 s


async def until_gone(client: redis.Redis, key: str, timeout: float = 5.0) -> bool:
    """Poll until Redis itself has expired ``key``; False if it is still there after ``timeout`` seconds."""
    give_up = time.monotonic() + timeout
    while client.exists(key):
        if time.monotonic() > give_up:
            return False
        await asyncio.sleep(0.005)
    return True


def test_it_stores_pins_under_the_gomodel_prefix_with_their_ttl(namespace: str, client: redis.Redis) -> None:
    async def scenario() -> None:
        store = RedisPinStore(REDIS_URL)
        try:
            await store.escalate(namespace, "k", "easy", 30)
            await store.put(f"{namespace}-target", "k", "openai/gpt-4o", 600)
        finally:
            await store.aclose()

    asyncio.run(scenario())
    assert client.hgetall(f"{KEY_PREFIX}{namespace}:k") == {"v": "easy", "ttl": "30000"}
    assert 29_000 < client.pttl(f"{KEY_PREFIX}{namespace}:k") <= 30_000
    assert client.hget(f"{KEY_PREFIX}{namespace}-target:k", "v") == "openai/gpt-4o"


def test_it_overwrites_with_put_and_removes_with_delete(namespace: str) -> None:
    async def scenario() -> list[Any]:
        store = RedisPinStore(REDIS_URL)
        try:
            await store.put(namespace, "t", "hard", 60)
            await store.put(namespace, "t", "easy", 60)  # put is not escalate-only: target pins may move
            moved = await store.get(namespace, "t")
            await store.delete(namespace, "t")
            gone = await store.get(namespace, "t")
            await store.put(namespace, "t", "x", 0)
            return [moved, gone, await store.get(namespace, "t")]
        finally:
            await store.aclose()

    assert asyncio.run(scenario()) == ["easy", None, None]


class Clock:
    def __init__(self) -> None:
        self.now = 100.0

    def __call__(self) -> float:
        return self.now


def test_it_keeps_pins_in_process_with_a_sliding_ttl_and_separate_namespaces() -> None:
    clock = Clock()
    store = MemoryPinStore(max_entries=10, clock=clock)

    async def scenario() -> list[Any]:
        seen = [await store.escalate("tier:normal", "s", "hard", 10)]
        seen.append(await store.escalate("tier:normal", "s", "easy", 10))
        seen.append(await store.get("tier:cheap", "s"))  # pins are per alias
        clock.now += 9
        seen.append(await store.get("tier:normal", "s"))
        clock.now += 9
        seen.append(await store.get("tier:normal", "s"))
        clock.now += 10
        seen.append(await store.get("tier:normal", "s"))
        return seen

    assert asyncio.run(scenario()) == [None, "hard", None, "hard", "hard", None]


def test_it_bounds_the_in_process_store() -> None:
    store = MemoryPinStore(max_entries=5, clock=Clock())

    async def scenario() -> None:
        for i in range(50):
            await store.put("ns", str(i), "easy", 60)

    asyncio.run(scenario())
    assert len(store) == 5


def closed_port() -> int:
    with socket.socket() as sock:
        sock.bind(("127.0.0.1", 0))
        return int(sock.getsockname()[1])


class Records(logging.Handler):
    def __init__(self) -> None:
        super().__init__(logging.INFO)
        self.records: list[logging.LogRecord] = []

    def emit(self, record: logging.LogRecord) -> None:
        self.records.append(record)


@pytest.fixture
def pin_log() -> Iterator[Records]:
    logger = logging.getLogger("gomodel.pinstore")
    handler, level = Records(), logger.level
    logger.addHandler(handler)
    logger.setLevel(logging.INFO)
    yield handler
    logger.removeHandler(handler)
    logger.setLevel(level)


def test_it_falls_back_to_the_process_when_redis_is_down_and_logs_once(pin_log: Records) -> None:
    clock = Clock()
    store = RedisPinStore(f"redis://127.0.0.1:{closed_port()}", clock=clock, retry_after_s=5)

    async def scenario() -> list[Any]:
        try:
            seen = [await store.escalate("tier:normal", "s", "hard", 60)]
            seen.append(await store.escalate("tier:normal", "s", "easy", 60))
            seen.append(await store.get("tier:normal", "s"))
            clock.now += 6  # past the retry delay: Redis is tried again, fails again, still one warning
            seen.append(await store.get("tier:normal", "s"))
            await store.put("target", "s", "a", 60)
            seen.append(await store.get("target", "s"))
            await store.delete("target", "s")
            seen.append(await store.get("target", "s"))
            return seen
        finally:
            await store.aclose()

    assert asyncio.run(scenario()) == [None, "hard", "hard", "hard", "a", None]
    assert store.redis_available is False
    assert [r.levelno for r in pin_log.records] == [logging.WARNING]
    assert "unreachable" in pin_log.records[0].getMessage()


def test_it_does_not_wait_on_a_down_redis_during_the_retry_delay() -> None:
    clock = Clock()
    # A loopback socket that is listening but never answers: every attempt would cost the full socket timeout.
    silent = socket.socket()
    silent.bind(("127.0.0.1", 0))
    silent.listen(64)
    store = RedisPinStore(f"redis://127.0.0.1:{silent.getsockname()[1]}", clock=clock, socket_timeout=0.2,
                          retry_after_s=5)

    async def scenario() -> tuple[int, list[str | None], int]:
        try:
            await store.get("ns", "k")  # pays the timeout once (plus one retry)
            tried = accept_waiting(silent)
            answers = [await store.escalate("ns", "k", "hard", 60) for _ in range(20)]
            return tried, answers, accept_waiting(silent)
        finally:
            await store.aclose()

    try:
        tried, answers, tried_since = asyncio.run(scenario())
    finally:
        silent.close()
    assert tried >= 1
    assert store.redis_available is False
    assert tried_since == 0  # inside the retry delay nothing went to Redis: no wait on its timeout
    assert answers == [None] + ["hard"] * 19  # served by the in-process fallback


def accept_waiting(listener: socket.socket) -> int:
    """Accept (and close) every connection waiting on ``listener``; how many there were."""
    listener.setblocking(False)
    count = 0
    while True:
        try:
            connection, _ = listener.accept()
        except BlockingIOError:
            return count
        connection.close()
        count += 1


def test_it_uses_redis_again_once_it_answers(tmp_path: Path, pin_log: Records) -> None:
    port, clock = closed_port(), Clock()
    store = RedisPinStore(f"redis://127.0.0.1:{port}", clock=clock, retry_after_s=5)
    server: subprocess.Popen[bytes] | None = None

    async def scenario() -> list[Any]:
        nonlocal server
        try:
            seen = [await store.escalate("ns", "k", "easy", 60)]  # Redis down: kept in process
            server = subprocess.Popen(
                [
                    "redis-server",
                    "--port",
                    str(port),
                    "--bind",
                    "127.0.0.1",
                    "--save",
                    "",
                    "--appendonly",
                    "no",
                    "--dir",
                    str(tmp_path),
                ],  # fmt: skip
                stdout=subprocess.DEVNULL,
            )
            with redis.Redis(port=port, decode_responses=True) as direct:
                deadline = time.monotonic() + 10
                while time.monotonic() < deadline:
                    try:
                        direct.ping()
                        break
                    except redis.ConnectionError:
                        await asyncio.sleep(0.05)
                seen.append(await store.escalate("ns", "k", "hard", 60))  # still inside the retry delay
                clock.now += 6
                seen.append(await store.escalate("ns", "k", "hard", 60))  # Redis again: it holds no pin yet
                seen.append(await store.get("ns", "k"))
                seen.append(direct.hget(f"{KEY_PREFIX}ns:k", "v"))
            return seen
        finally:
            await store.aclose()

    try:
        assert asyncio.run(scenario()) == [None, "easy", None, "hard", "hard"]
        assert store.redis_available is True
        assert [r.levelno for r in pin_log.records] == [logging.WARNING, logging.INFO]
    finally:
        if server is not None:
            server.terminate()
            server.wait(timeout=10)


def test_it_makes_a_redis_store_only_when_a_url_is_given() -> None:
    assert isinstance(make_pin_store(None), MemoryPinStore)
    assert isinstance(make_pin_store(""), MemoryPinStore)
    store = make_pin_store(REDIS_URL)
    assert isinstance(store, RedisPinStore)
    asyncio.run(store.aclose())

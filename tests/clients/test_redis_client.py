"""The pin store's Redis client: the RESP2 reply parser, and the client against real Redis and scripted servers.

Needs Redis on 127.0.0.1:6379 (tests/conftest.py starts it when missing); keys are unique per test and
removed afterwards.
"""

from __future__ import annotations

import asyncio
import contextlib
import os
import socket
import subprocess
import sys
import uuid
from collections.abc import AsyncIterator, Awaitable, Callable
from pathlib import Path
from typing import Any

import pytest
import redis

from routing.clients.pin_store import RedisPinStore
from routing.clients.redis_client import (
    RedisReplyError,
    RedisUnavailable,
    RespClient,
    Script,
    ScriptCall,
    Sent,
    _Connection,
    encode_command,
    parse_reply,
)

pytestmark = pytest.mark.services

REDIS_DB15 = "redis://127.0.0.1:6379/15"
ROOT = Path(__file__).resolve().parents[2]


@pytest.mark.parametrize(("raw", "value"), [
    (b"+OK\r\n", "OK"),
    (b":42\r\n", 42),
    (b"$5\r\nhello\r\n", "hello"),
    (b"$0\r\n\r\n", ""),
    (b"$-1\r\n", None),
    (b"*-1\r\n", None),
    (b"*3\r\n:1\r\n$2\r\nhi\r\n*1\r\n+nested\r\n", [1, "hi", ["nested"]]),
    ("$5\r\nsüß\r\n".encode(), "süß"),
])
def test_replies_parse(raw: bytes, value: Any) -> None:
    assert parse_reply(raw, 0) == (value, len(raw))


def test_an_error_reply_parses_as_an_error_value() -> None:
    reply, end = parse_reply(b"-NOSCRIPT No matching script\r\n", 0)
    assert isinstance(reply, RedisReplyError)
    assert str(reply).startswith("NOSCRIPT")
    assert end == 30


@pytest.mark.parametrize("raw", [b"$5\r\nhel", b"*2\r\n:1\r\n", b"+OK", b""])
def test_an_incomplete_reply_waits_for_more(raw: bytes) -> None:
    with pytest.raises(Exception) as raised:  # noqa: PT011 - the parser's private signal, checked by name below
        parse_reply(raw, 0)
    assert type(raised.value).__name__ == "_Incomplete"


def test_commands_are_encoded_as_bulk_string_arrays() -> None:
    assert encode_command(("SET", "k", 12, b"v")) == b"*4\r\n$3\r\nSET\r\n$1\r\nk\r\n$2\r\n12\r\n$1\r\nv\r\n"


def run(scenario: Callable[[], Awaitable[None]]) -> None:
    asyncio.run(scenario())


def test_commands_run_against_redis_in_the_database_of_the_url() -> None:
    key = f"gomodel:test:{uuid.uuid4().hex}"
    direct = redis.Redis.from_url(REDIS_DB15, decode_responses=True)

    async def scenario() -> None:
        client = RespClient(REDIS_DB15, timeout=1.0)
        try:
            assert await client.execute("SET", key, "välue") == "OK"
            assert await client.execute("GET", key) == "välue"
            with pytest.raises(RedisReplyError):
                await client.execute("INCR", key)  # not an integer
        finally:
            await client.aclose()

    try:
        run(scenario)
        assert direct.get(key) == "välue"  # database 15, as the URL says
    finally:
        direct.delete(key)
        direct.close()


def test_concurrent_commands_share_one_connection_and_each_gets_its_own_answer() -> None:
    keys = [f"gomodel:test:{uuid.uuid4().hex}" for _ in range(200)]
    direct = redis.Redis.from_url(REDIS_DB15)

    async def scenario() -> None:
        client = RespClient(REDIS_DB15, timeout=2.0)
        try:
            await asyncio.gather(*(client.execute("SET", key, i) for i, key in enumerate(keys)))
            values = await asyncio.gather(*(client.execute("GET", key) for key in keys))
            assert values == [str(i) for i in range(200)]
        finally:
            await client.aclose()

    try:
        run(scenario)
        clients = [c for c in direct.client_list() if c.get("db") == "15" and c.get("cmd") in ("get", "set")]
        assert len(clients) <= 1  # the client's one connection is gone or, at most, still closing
    finally:
        direct.delete(*keys)
        direct.close()


def test_a_script_unknown_to_redis_is_sent_whole_then_called_by_its_hash() -> None:
    script = Script(f"return '{uuid.uuid4().hex}' .. ARGV[1]")
    direct = redis.Redis.from_url(REDIS_DB15)
    direct.script_flush()

    async def scenario() -> None:
        client = RespClient(REDIS_DB15, timeout=1.0)
        try:
            assert (await client.run_script(script, [], ["x"])).endswith("x")  # NOSCRIPT, then EVAL
            assert direct.script_exists(script.sha) == [True]
            assert (await client.run_script(script, [], ["y"])).endswith("y")  # EVALSHA
        finally:
            await client.aclose()

    run(scenario)
    direct.close()


def test_a_password_redis_does_not_expect_is_reported_without_the_password() -> None:
    async def scenario() -> None:
        client = RespClient("redis://:not-the-password@127.0.0.1:6379/0", timeout=1.0)
        with pytest.raises(RedisUnavailable) as failure:
            await client.execute("PING")
        assert "AUTH" in str(failure.value)
        assert "not-the-password" not in str(failure.value)

    run(scenario)


def closed_port() -> int:
    with socket.socket() as sock:
        sock.bind(("127.0.0.1", 0))
        return int(sock.getsockname()[1])


def test_a_refused_connection_is_unavailable() -> None:
    async def scenario() -> None:
        client = RespClient(f"redis://127.0.0.1:{closed_port()}", timeout=1.0)
        with pytest.raises(RedisUnavailable, match="could not connect"):
            await client.execute("PING")

    run(scenario)


Handler = Callable[[asyncio.StreamReader, asyncio.StreamWriter], Awaitable[None]]


@contextlib.asynccontextmanager
async def scripted_server(handler: Handler) -> AsyncIterator[str]:
    """A server running ``handler`` per connection; yields its URL and, on exit, waits for every handler."""
    running: set[asyncio.Task[Any]] = set()

    async def serve(reader: asyncio.StreamReader, writer: asyncio.StreamWriter) -> None:
        task = asyncio.current_task()
        assert task is not None
        running.add(task)
        try:
            await handler(reader, writer)
        except ConnectionError:
            pass
        finally:
            writer.close()
            running.discard(task)

    server = await asyncio.start_server(serve, "127.0.0.1", 0)
    try:
        yield f"redis://127.0.0.1:{server.sockets[0].getsockname()[1]}"
    finally:
        for _ in range(200):  # each handler sees its connection close once the client has closed it
            if not running:
                break
            await asyncio.sleep(0.01)
        server.close()
        await server.wait_closed()


def test_silence_is_a_timeout_that_closes_the_connection_and_the_next_command_reconnects() -> None:
    connections = 0
    answer = asyncio.Event()

    async def handler(reader: asyncio.StreamReader, writer: asyncio.StreamWriter) -> None:
        nonlocal connections
        connections += 1
        while await reader.read(1024):
            if answer.is_set():
                writer.write(b"+PONG\r\n")

    async def scenario() -> None:
        async with scripted_server(handler) as url:
            client = RespClient(url, timeout=0.2)
            try:
                first, second = await asyncio.gather(client.execute("PING"), client.execute("PING"),
                                                     return_exceptions=True)
                assert isinstance(first, RedisUnavailable)
                assert "within 0.2s" in str(first)
                assert isinstance(second, RedisUnavailable)  # queued behind it on the same connection
                answer.set()
                assert await client.execute("PING") == "PONG"
                assert connections == 2
            finally:
                await client.aclose()

    run(scenario)


def test_a_command_on_a_connection_redis_dropped_is_sent_again_on_a_new_one() -> None:
    connections = 0

    async def handler(reader: asyncio.StreamReader, writer: asyncio.StreamWriter) -> None:
        nonlocal connections
        connections += 1
        await reader.read(1024)
        writer.write(b"+PONG\r\n")
        await writer.drain()
        await reader.read(1024)  # on the first connection, the second command: dropped without an answer

    async def scenario() -> None:
        async with scripted_server(handler) as url:
            client = RespClient(url, timeout=1.0)
            try:
                assert await client.execute("PING") == "PONG"
                assert await client.execute("PING") == "PONG"
                assert connections == 2
            finally:
                await client.aclose()

    run(scenario)


def test_a_reply_split_across_packets_is_put_together() -> None:
    async def handler(reader: asyncio.StreamReader, writer: asyncio.StreamWriter) -> None:
        await reader.read(1024)
        writer.write(b"$11\r\nhello")
        await writer.drain()
        await asyncio.sleep(0.05)
        writer.write(b" world\r\n")
        await writer.drain()
        await reader.read(1024)  # until the client closes

    async def scenario() -> None:
        async with scripted_server(handler) as url:
            client = RespClient(url, timeout=1.0)
            try:
                assert await client.execute("GET", "k") == "hello world"
            finally:
                await client.aclose()

    run(scenario)


def test_an_unsupported_url_scheme_is_refused_by_name() -> None:
    with pytest.raises(ValueError, match="redis://"):
        RespClient("memcached://127.0.0.1", timeout=1.0)


def authenticating_server(auth_answered: asyncio.Event, auth_seen: asyncio.Event,
                          connections: list[int] | None = None) -> Handler:
    """A Redis that holds its answer to AUTH until ``auth_answered`` is set, then answers PONG to anything;
    each connection it accepts is appended to ``connections`` when given."""

    async def handler(reader: asyncio.StreamReader, writer: asyncio.StreamWriter) -> None:
        if connections is not None:
            connections.append(len(connections) + 1)
        data = await reader.read(1024)
        assert b"AUTH" in data
        auth_seen.set()
        await auth_answered.wait()
        writer.write(b"+OK\r\n")
        while await reader.read(1024):
            writer.write(b"+PONG\r\n")

    return handler


def test_a_command_cancelled_while_the_connection_authenticates_leaves_it_to_the_others() -> None:
    connections: list[int] = []

    async def scenario() -> None:
        auth_answered, auth_seen = asyncio.Event(), asyncio.Event()
        async with scripted_server(authenticating_server(auth_answered, auth_seen, connections)) as url:
            client = RespClient(url.replace("redis://", "redis://:secret@"), timeout=2.0)
            try:
                cancelled = asyncio.create_task(client.execute("PING"))  # its client hung up...
                waiting = asyncio.create_task(client.execute("PING"))  # ...this one's did not
                await asyncio.wait_for(auth_seen.wait(), 2)
                cancelled.cancel()
                with pytest.raises(asyncio.CancelledError):
                    await cancelled
                auth_answered.set()
                assert await waiting == "PONG"  # not RedisUnavailable: Redis is not down
                assert await client.execute("PING") == "PONG"
                assert len(connections) == 1
            finally:
                await client.aclose()

    run(scenario)  # scripted_server waits for every connection to be closed: none leaked


def test_a_lone_command_cancelled_mid_auth_leaks_no_connection() -> None:
    connections: list[int] = []

    async def scenario() -> None:
        auth_answered, auth_seen = asyncio.Event(), asyncio.Event()
        async with scripted_server(authenticating_server(auth_answered, auth_seen, connections)) as url:
            client = RespClient(url.replace("redis://", "redis://:secret@"), timeout=2.0)
            try:
                cancelled = asyncio.create_task(client.execute("PING"))
                await asyncio.wait_for(auth_seen.wait(), 2)
                cancelled.cancel()
                with pytest.raises(asyncio.CancelledError):
                    await cancelled
                auth_answered.set()
                assert await client.execute("PING") == "PONG"  # on the connection set up meanwhile
                assert len(connections) == 1
            finally:
                await client.aclose()

    run(scenario)


def test_a_pin_lookup_cancelled_mid_auth_does_not_mark_redis_down() -> None:
    async def scenario() -> None:
        auth_answered, auth_seen = asyncio.Event(), asyncio.Event()

        async def handler(reader: asyncio.StreamReader, writer: asyncio.StreamWriter) -> None:
            await reader.read(1024)
            auth_seen.set()
            await auth_answered.wait()
            writer.write(b"+OK\r\n")
            while await reader.read(1024):
                writer.write(b"$-1\r\n")  # no pin

        async with scripted_server(handler) as url:
            store = RedisPinStore(url.replace("redis://", "redis://:secret@"), socket_timeout=2.0)
            try:
                cancelled = asyncio.create_task(store.get("tier", "session-a"))
                waiting = asyncio.create_task(store.get("tier", "session-b"))
                await asyncio.wait_for(auth_seen.wait(), 2)
                cancelled.cancel()
                with pytest.raises(asyncio.CancelledError):
                    await cancelled
                auth_answered.set()
                assert await waiting is None
                assert store.redis_available
            finally:
                await store.aclose()

    run(scenario)


@pytest.mark.parametrize(("url", "words"), [
    ("redis://127.0.0.1:6379/0?ssl_cert_reqs=none", "option ssl_cert_reqs is not supported"),
    ("redis://127.0.0.1:6379?socket_timeout=5&db=1", "option socket_timeout is not supported"),
    ("redis+sentinel://127.0.0.1:26379/mymaster", "Sentinel are not supported"),
    ("redis://10.0.0.1:6379,10.0.0.2:6379/0", "several hosts"),
    ("redis://127.0.0.1:6379/cache", "a database is a number"),
    ("unix://?db=0", "socket's path"),
])
def test_a_url_the_client_cannot_honour_is_refused_by_what_is_wrong(url: str, words: str) -> None:
    with pytest.raises(ValueError, match=words):
        RespClient(url, timeout=1.0)


def test_a_url_s_password_is_never_in_the_error() -> None:
    with pytest.raises(ValueError) as refused:
        RespClient("redis://:hunter2@127.0.0.1:6379/zero", timeout=1.0)
    assert "hunter2" not in str(refused.value)


def test_settings_refuse_to_load_with_an_unsupported_redis_url() -> None:
    env = dict(os.environ, REDIS_URL="rediss://redis.example.com:6380/0?ssl_ca_certs=/etc/ca.pem")
    done = subprocess.run([sys.executable, "-c", "import gomodel_site.settings"], cwd=ROOT, env=env,
                          capture_output=True, text=True, timeout=60)
    assert done.returncode != 0
    assert "ImproperlyConfigured: REDIS_URL option ssl_ca_certs is not supported" in done.stderr


# -- prepared script calls sent without waiting (the limit store's settlements) -------------------------------


def test_a_call_sent_without_waiting_hands_its_answer_to_the_callback_and_drain_waits_for_it() -> None:
    script = Script(f"redis.call('SET', KEYS[1], ARGV[1]) return '{uuid.uuid4().hex[:6]}:' .. ARGV[1]")
    key = f"gomodel:test:{uuid.uuid4().hex}"
    direct = redis.Redis.from_url(REDIS_DB15, decode_responses=True)
    answers: list[Any] = []

    async def scenario() -> None:
        client = RespClient(REDIS_DB15, timeout=1.0)
        try:
            assert client.send_call(ScriptCall(script, [key], [], per_call=1), ("x",), answers.append) is Sent.NOT_SENT
            await client.execute("PING")  # now connected
            call = ScriptCall(script, [key], [], per_call=1)
            assert client.send_call(call, ("one",), answers.append) is Sent.WRITTEN  # nothing queued: at once
            assert client.send_call(call, ("two",), answers.append) is Sent.QUEUED  # behind it, in this turn
            assert answers == []  # nothing waited: the answers come from the event loop
            await client.drain()
            assert [str(a).split(":", 1)[1] for a in answers] == ["one", "two"]  # NOSCRIPT first: sent whole
        finally:
            await client.aclose()

    try:
        run(scenario)
        assert direct.get(key) == "two"
    finally:
        direct.delete(key)
        direct.close()


def test_a_call_sent_without_waiting_gets_the_timeout_when_redis_is_silent() -> None:
    answers: list[Any] = []

    async def handler(reader: asyncio.StreamReader, writer: asyncio.StreamWriter) -> None:
        await reader.read(1024)
        writer.write(b"+PONG\r\n")
        while await reader.read(1024):
            pass  # silence from now on

    async def scenario() -> None:
        async with scripted_server(handler) as url:
            client = RespClient(url, timeout=0.2)
            try:
                assert await client.execute("PING") == "PONG"
                started = asyncio.get_running_loop().time()
                sent = client.send_call(ScriptCall(Script("return 1"), [], [], per_call=0), (), answers.append)
                assert sent is Sent.WRITTEN
                await client.drain()  # bounded by the timeout
                waited = asyncio.get_running_loop().time() - started
                assert 0.15 <= waited < 1.0
            finally:
                await client.aclose()

    run(scenario)
    assert len(answers) == 1
    assert isinstance(answers[0], RedisUnavailable)
    assert "within 0.2s" in str(answers[0])
    assert not answers[0].dropped  # a timeout: the call may have run


def test_one_timer_watches_a_busy_connection_rather_than_one_per_command() -> None:
    async def scenario() -> int:
        client = RespClient(REDIS_DB15, timeout=1.0)
        loop = asyncio.get_running_loop()
        scheduled = 0
        real_call_at = loop.call_at

        def counting_call_at(when: float, callback: Any, *args: Any, **kwargs: Any) -> asyncio.TimerHandle:
            nonlocal scheduled
            scheduled += 1
            return real_call_at(when, callback, *args, **kwargs)

        try:
            await client.execute("PING")
            loop.call_at = counting_call_at  # type: ignore[method-assign]
            for _ in range(20):
                await asyncio.gather(*(client.execute("PING") for _ in range(50)))
            return scheduled
        finally:
            loop.call_at = real_call_at  # type: ignore[method-assign]
            await client.aclose()

    assert asyncio.run(scenario()) <= 2  # 1,000 commands within a second: the first timer is still armed


def test_a_command_sent_on_a_connection_already_closed_fails_at_once_as_dropped() -> None:
    async def scenario() -> None:
        connection = _Connection(timeout=5.0)
        connection.connection_made(SilentTransport())  # type: ignore[arg-type]
        connection.connection_lost(None)
        with pytest.raises(RedisUnavailable) as failed:
            await asyncio.wait_for(connection.send(encode_command(("PING",))), 1.0)
        assert failed.value.dropped  # a caller sends it again on a new connection
        delivered: list[Any] = []
        connection.send_unawaited(encode_command(("PING",)), delivered.append)
        assert len(delivered) == 1
        assert isinstance(delivered[0], RedisUnavailable)

    run(scenario)


class SilentTransport:
    """Stands in for the socket."""

    def write(self, data: bytes) -> None:
        return None

    def abort(self) -> None:
        return None

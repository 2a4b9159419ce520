"""A lean Redis client for the pin store: one pipelined connection per process, RESP2 over an asyncio protocol.

The pin store sends two or three short Lua calls per routed request. redis-py's asyncio client spends
~95 us of CPU on each (connection checkout, command packing, a reader task, response callbacks); this
client writes the encoded command, appends a future to a FIFO, and resolves it from ``data_received``:
~15 us. Every coroutine shares the one connection (Redis answers in order, so concurrent commands are
pipelined for free).

A command that gets no answer within ``timeout`` fails with ``RedisUnavailable`` and closes the connection
(later answers could no longer be matched to their commands); the next command connects again. So does a
refused or lost connection. A Redis error reply (``-ERR ...``) raises ``RedisReplyError``.

URLs: ``redis://[[user]:password@]host[:port][/db]``, ``rediss://`` for TLS, ``unix:///path?db=N``
(``routing/clients/redis_url.py``; one server only, Redis Cluster and Sentinel are not supported).

Connecting (with AUTH and SELECT) runs as a task of its own that every waiting command shares: a command
cancelled meanwhile (its request's client hung up) leaves it running for the others, so the connection is
neither leaked half set up nor reported to them as Redis being down.
"""

from __future__ import annotations

import asyncio
import hashlib
import ssl
from collections import deque
from typing import Any, cast

from routing.clients.redis_url import parse_redis_url


class RedisUnavailable(Exception):
    """Redis could not be reached, dropped the connection (``dropped``), or did not answer in time."""

    def __init__(self, message: str, *, dropped: bool = False) -> None:
        super().__init__(message)
        self.dropped = dropped


class RedisReplyError(Exception):
    """Redis answered with an error reply."""


class _Incomplete(Exception):
    """The buffer ends inside a reply: wait for more bytes."""


class Encoded:
    """Several arguments already in RESP form, for a command sent often with the same ones (a script's keys and
    fixed arguments): encoding two dozen arguments on every call would cost more than the round trip."""

    __slots__ = ("count", "data")

    def __init__(self, *args: str | bytes | int) -> None:
        self.count = len(args)
        self.data = b"".join(_bulk(arg) for arg in args)


def _bulk(arg: str | bytes | int) -> bytes:
    data = arg if isinstance(arg, bytes) else str(arg).encode()
    return b"$%d\r\n%s\r\n" % (len(data), data)


def encode_command(args: tuple[str | bytes | int | Encoded, ...]) -> bytes:
    count = 0
    parts = []
    for arg in args:
        if isinstance(arg, Encoded):
            parts.append(arg.data)
            count += arg.count
        else:
            parts.append(_bulk(arg))
            count += 1
    return b"*%d\r\n%s" % (count, b"".join(parts))


def parse_reply(buffer: bytes | bytearray, start: int) -> tuple[Any, int]:
    """One RESP2 reply from ``buffer[start:]``: (value, index after it). Bulk strings decode as UTF-8."""
    end = buffer.find(b"\r\n", start)
    if end < 0:
        raise _Incomplete
    kind = buffer[start]
    line = bytes(buffer[start + 1 : end])
    after = end + 2
    if kind == 43:  # '+'
        return line.decode(), after
    if kind == 45:  # '-'
        return RedisReplyError(line.decode(errors="replace")), after
    if kind == 58:  # ':'
        return int(line), after
    if kind == 36:  # '$'
        length = int(line)
        if length < 0:
            return None, after
        if len(buffer) < after + length + 2:
            raise _Incomplete
        return bytes(buffer[after : after + length]).decode(errors="replace"), after + length + 2
    if kind == 42:  # '*'
        count = int(line)
        if count < 0:
            return None, after
        items = []
        for _ in range(count):
            if buffer[after : after + 1] == b":":  # an integer element (a script's counts), read in place
                end = buffer.find(b"\r\n", after)
                if end < 0:
                    raise _Incomplete
                items.append(int(buffer[after + 1 : end]))
                after = end + 2
                continue
            item, after = parse_reply(buffer, after)
            items.append(item)
        return items, after
    raise RedisUnavailable(f"Redis sent an unreadable reply (type byte {kind!r})")


class _Connection(asyncio.Protocol):
    def __init__(self) -> None:
        self.transport: asyncio.Transport | None = None
        self.pending: deque[asyncio.Future[Any]] = deque()
        self.closed = False
        self._buffer = bytearray()
        self._outgoing: list[bytes] = []  # commands queued in this turn of the event loop (see send)

    def connection_made(self, transport: asyncio.BaseTransport) -> None:
        # A stream protocol is handed a stream transport; typeshed types the parameter for every kind of
        # protocol, and uvloop's transports are not asyncio.Transport subclasses, so no isinstance either.
        self.transport = cast(asyncio.Transport, transport)

    def data_received(self, data: bytes) -> None:
        buffer = self._buffer
        buffer += data
        position = 0
        try:
            while position < len(buffer) and self.pending:
                reply, position = parse_reply(buffer, position)
                waiter = self.pending.popleft()
                if not waiter.done():
                    waiter.set_result(reply)
        except _Incomplete:
            pass
        except (RedisUnavailable, ValueError) as exc:
            self.fail(RedisUnavailable(str(exc)))
            return
        del buffer[:position]

    def connection_lost(self, exc: Exception | None) -> None:
        self.closed = True
        self._fail_pending(RedisUnavailable(f"the connection to Redis was lost ({exc or 'closed by Redis'})",
                                            dropped=True))

    def send(self, command: bytes) -> asyncio.Future[Any]:
        """Queue ``command``; the commands queued during one turn of the event loop go out in one write.

        Under load many requests send their scripts in the same turn: one write (one system call, one TCP
        segment to Redis) for all of them instead of one each. A lone command waits only for the end of the
        current turn.
        """
        if self.transport is None:
            raise RuntimeError("send() before the connection is made")
        loop = asyncio.get_running_loop()
        waiter: asyncio.Future[Any] = loop.create_future()
        self.pending.append(waiter)
        if self._outgoing:
            self._outgoing.append(command)
        else:
            self._outgoing = [command]
            loop.call_soon(self._flush)
        return waiter

    def _flush(self) -> None:
        outgoing, self._outgoing = self._outgoing, []
        if not self.closed and self.transport is not None and outgoing:
            self.transport.write(b"".join(outgoing))

    def fail(self, exc: RedisUnavailable) -> None:
        """Close: answers still on the way could no longer be matched to their commands."""
        if not self.closed:
            self.closed = True
            if self.transport is not None:
                self.transport.abort()
        self._fail_pending(exc)

    def _fail_pending(self, exc: RedisUnavailable) -> None:
        while self.pending:
            waiter = self.pending.popleft()
            if not waiter.done():
                waiter.set_exception(exc)


class Script:
    """A Lua script called by its SHA1 (``EVALSHA``), loaded by ``EVAL`` the first time Redis lacks it."""

    def __init__(self, source: str) -> None:
        self.source = source
        self.sha = hashlib.sha1(source.encode()).hexdigest()  # noqa: S324 - Redis names scripts by SHA1


class RespClient:
    def __init__(self, url: str, *, timeout: float) -> None:
        self.timeout = timeout
        try:
            self._address = parse_redis_url(url)
        except ValueError as exc:
            raise ValueError(f"REDIS_URL {exc}") from None
        self._connection: _Connection | None = None
        self._connecting: asyncio.Task[_Connection] | None = None

    async def execute(self, *args: str | bytes | int | Encoded) -> Any:
        """Send one command and return its reply (``RedisReplyError`` for an error reply).

        A command on a connection that Redis dropped (a restart, an idle timeout) is sent once more on a new
        connection: the pin store's commands can be repeated safely. A timeout is not retried.
        """
        command = encode_command(args)
        connection = self._connection
        if connection is None or connection.closed:
            reply = await self._send(await self._connect(), command)
        else:
            try:
                reply = await self._send(connection, command)
            except RedisUnavailable as exc:
                if not exc.dropped:
                    raise
                reply = await self._send(await self._connect(), command)
        if isinstance(reply, RedisReplyError):
            raise reply
        return reply

    async def _send(self, connection: _Connection, command: bytes) -> Any:
        return await self._wait(connection, connection.send(command))

    async def run_script(self, script: Script, keys: list[str], args: list[str | int]) -> Any:
        try:
            return await self.execute("EVALSHA", script.sha, len(keys), *keys, *args)
        except RedisReplyError as exc:
            if not str(exc).startswith("NOSCRIPT"):
                raise
            return await self.execute("EVAL", script.source, len(keys), *keys, *args)

    async def run_encoded_script(self, script: Script, key_count: int, fixed: Encoded,
                                 *args: str | bytes | int) -> Any:
        """``run_script`` with the keys and the leading arguments encoded once (``fixed``: ``key_count`` keys,
        then arguments), followed by ``args``."""
        try:
            return await self.execute("EVALSHA", script.sha, key_count, fixed, *args)
        except RedisReplyError as exc:
            if not str(exc).startswith("NOSCRIPT"):
                raise
            return await self.execute("EVAL", script.source, key_count, fixed, *args)

    async def aclose(self) -> None:
        if self._connecting is not None:
            self._connecting.cancel()  # its own clean-up closes the connection it was setting up
            self._connecting = None
        if self._connection is not None:
            self._connection.fail(RedisUnavailable("the client was closed"))
            self._connection = None

    async def _wait(self, connection: _Connection, waiter: asyncio.Future[Any]) -> Any:
        loop = asyncio.get_running_loop()
        timer = loop.call_later(self.timeout, _expire, connection, waiter, self.timeout)
        try:
            return await waiter
        finally:
            timer.cancel()

    async def _connect(self) -> _Connection:
        """The connection being set up, shared by every caller; a caller's cancellation leaves it running."""
        task = self._connecting
        if task is None:
            task = self._connecting = asyncio.get_running_loop().create_task(self._open())
            task.add_done_callback(self._connected)
        return await asyncio.shield(task)

    def _connected(self, task: asyncio.Task[_Connection]) -> None:
        if self._connecting is task:
            self._connecting = None
        if task.cancelled() or task.exception() is not None:  # retrieved: nobody may be left to await it
            return
        self._connection = task.result()

    async def _open(self) -> _Connection:
        address = self._address
        loop = asyncio.get_running_loop()
        connection = _Connection()
        try:
            try:
                async with asyncio.timeout(self.timeout):
                    if address.scheme == "unix":
                        await loop.create_unix_connection(lambda: connection, address.path)
                    else:
                        context = ssl.create_default_context() if address.scheme == "rediss" else None
                        await loop.create_connection(lambda: connection, address.host, address.port, ssl=context)
            except TimeoutError:
                raise RedisUnavailable(f"no connection to Redis within {self.timeout:g}s") from None
            except OSError as exc:
                raise RedisUnavailable(f"could not connect to Redis ({exc.strerror or exc.__class__.__name__})") \
                    from None
            setup: list[tuple[str | int, ...]] = []
            if address.password is not None:
                setup.append(("AUTH", address.username, address.password) if address.username
                             else ("AUTH", address.password))
            if address.db:
                setup.append(("SELECT", address.db))
            for command in setup:
                reply = await self._wait(connection, connection.send(encode_command(command)))
                if isinstance(reply, RedisReplyError):
                    raise RedisUnavailable(f"Redis refused {command[0]}: {reply}")
        except BaseException:
            connection.fail(RedisUnavailable("setup failed"))  # never left open half set up
            raise
        return connection


def _expire(connection: _Connection, waiter: asyncio.Future[Any], timeout: float) -> None:
    if not waiter.done():
        connection.fail(RedisUnavailable(f"Redis did not answer within {timeout:g}s"))

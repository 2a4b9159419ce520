"""A lean Redis client for the pin store: one pipelined connection per process, RESP2 over an asyncio protocol.

The pin store sends two or three short Lua calls per routed request. redis-py's asyncio client spends
~95 us of CPU on each (connection checkout, command packing, a reader task, response callbacks); this
client writes the encoded command, appends a future to a FIFO, and resolves it from ``data_received``:
~15 us. Every coroutine shares the one connection (Redis answers in order, so concurrent commands are
pipelined for free).

A command that gets no answer within ``timeout`` fails with ``RedisUnavailable`` and closes the connection
(later answers could no longer be matched to their commands); the next command connects again. So does a
refused or lost connection. A Redis error reply (``-ERR ...``) raises ``RedisReplyError``. One timer per
connection watches the oldest command waiting for its answer, rather than one timer per command.

A script called often with the same keys (the limit store's) is a ``ScriptCall``: its command up to the
per-call arguments is encoded once. ``send_call`` sends one without waiting for its answer (no future, no
task switch): the answer, or the failure, is handed to a callback from ``data_received``.

URLs: ``redis://[[user]:password@]host[:port][/db]``, ``rediss://`` for TLS, ``unix:///path?db=N``
(``routing/clients/redis_url.py``; one server only, Redis Cluster and Sentinel are not supported).

Connecting (with AUTH and SELECT) runs as a task of its own that every waiting command shares: a command
cancelled meanwhile (its request's client hung up) leaves it running for the others, so the connection is
neither leaked half set up nor reported to them as Redis being down.
"""

from __future__ import annotations

import asyncio
import contextlib
import enum
import hashlib
import ssl
from collections import deque
from collections.abc import Callable, Sequence
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


def _bulk(arg: str | bytes | int) -> bytes:
    kind = type(arg)
    if kind is str:
        data = cast(str, arg).encode()
    elif kind is int:  # not a bool: str(True) is what a bool always encoded as
        data = b"%d" % cast(int, arg)
    elif isinstance(arg, bytes):
        data = arg
    else:
        data = str(arg).encode()
    return b"$%d\r\n%s\r\n" % (len(data), data)


def encode_command(args: tuple[str | bytes | int, ...]) -> bytes:
    return b"*%d\r\n%s" % (len(args), b"".join(_bulk(arg) for arg in args))


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


class _Callback:
    """A command's answer handed to a function instead of a waiting coroutine (``RespClient.send_call``): it
    stands in the connection's queue of waiters where a future would, without the future or the task switch."""

    __slots__ = ("_deliver",)

    def __init__(self, deliver: Callable[[Any], None]) -> None:
        self._deliver = deliver

    def done(self) -> bool:
        return False

    def set_result(self, reply: Any) -> None:
        self._deliver(reply)

    def set_exception(self, exc: BaseException) -> None:
        self._deliver(exc)


_Waiter = asyncio.Future[Any] | _Callback


class _Connection(asyncio.Protocol):
    def __init__(self, timeout: float | None = None) -> None:
        self.transport: asyncio.Transport | None = None
        self.pending: deque[_Waiter] = deque()
        self.sent_at: deque[float] = deque()  # the loop time each pending command was queued, oldest first
        self.closed = False
        self._timeout = timeout  # None: no answer is waited for with a deadline (tests of the protocol alone)
        self._watchdog: asyncio.TimerHandle | None = None
        self._buffer = bytearray()
        self._outgoing: list[bytes] = []  # commands queued in this turn of the event loop (see send)
        self._flush_due = False  # a write of the commands queued is scheduled for the end of this turn

    def connection_made(self, transport: asyncio.BaseTransport) -> None:
        # A stream protocol is handed a stream transport; typeshed types the parameter for every kind of
        # protocol, and uvloop's transports are not asyncio.Transport subclasses, so no isinstance either.
        self.transport = cast(asyncio.Transport, transport)

    def data_received(self, data: bytes) -> None:
        buffer = self._buffer
        buffer += data
        position = 0
        pending, sent_at = self.pending, self.sent_at
        try:
            while position < len(buffer) and pending:
                reply, position = parse_reply(buffer, position)
                waiter = pending.popleft()
                sent_at.popleft()
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
        self._stop_watchdog()
        self._fail_pending(RedisUnavailable(f"the connection to Redis was lost ({exc or 'closed by Redis'})",
                                            dropped=True))

    def send(self, command: bytes) -> asyncio.Future[Any]:
        """Queue ``command``; the commands queued during one turn of the event loop go out in one write.

        Under load many requests send their scripts in the same turn: one write (one system call, one TCP
        segment to Redis) for all of them instead of one each. A lone command waits only for the end of the
        current turn.
        """
        loop = asyncio.get_running_loop()
        waiter: asyncio.Future[Any] = loop.create_future()
        self._queue(command, waiter, loop)
        return waiter

    def send_unawaited(self, command: bytes, deliver: Callable[[Any], None]) -> bool:
        """Send ``command`` and hand its answer, an error reply or the connection's failure to ``deliver`` from
        the event loop: nothing waits for it. True when it joined the commands queued in this turn (it goes out
        with their write, which a task that yields once sees done); False when it was written at once, since
        nothing was queued (the commands of the rest of this turn are then queued behind it)."""
        return self._queue(command, _Callback(deliver), asyncio.get_running_loop(), at_once=True)

    def _queue(self, command: bytes, waiter: _Waiter, loop: asyncio.AbstractEventLoop, *,
               at_once: bool = False) -> bool:
        """Queue ``command`` (or write it, ``at_once`` when nothing is queued); True when it waits in the queue."""
        if self.transport is None:
            raise RuntimeError("a command sent before the connection is made")
        if self.closed:  # lost while a caller was about to use it: nothing will answer here
            waiter.set_exception(RedisUnavailable("the connection to Redis was closed", dropped=True))
            return False
        self._expect(waiter, loop)
        if self._flush_due:
            self._outgoing.append(command)
            return True
        self._flush_due = True
        loop.call_soon(self._flush)  # after every callback already due: a task that yields once sees it sent
        if at_once:
            self.transport.write(command)
            return False
        self._outgoing.append(command)
        return True

    def _expect(self, waiter: _Waiter, loop: asyncio.AbstractEventLoop) -> None:
        """Queue ``waiter`` for the next answer not yet claimed; the watchdog fails the connection when the oldest
        waiter has had no answer for ``timeout``."""
        now = loop.time()
        self.pending.append(waiter)
        self.sent_at.append(now)
        if self._watchdog is None and self._timeout is not None:
            self._watchdog = loop.call_at(now + self._timeout, self._watch)

    def _watch(self) -> None:
        self._watchdog = None
        if self.closed or not self.sent_at or self._timeout is None:
            return
        loop = asyncio.get_running_loop()
        due = self.sent_at[0] + self._timeout
        if loop.time() >= due:
            self.fail(RedisUnavailable(f"Redis did not answer within {self._timeout:g}s"))
        else:
            self._watchdog = loop.call_at(due, self._watch)

    def _stop_watchdog(self) -> None:
        if self._watchdog is not None:
            self._watchdog.cancel()
            self._watchdog = None

    def _flush(self) -> None:
        self._flush_due = False
        outgoing, self._outgoing = self._outgoing, []
        if not self.closed and self.transport is not None and outgoing:
            self.transport.write(b"".join(outgoing))

    def fail(self, exc: RedisUnavailable) -> None:
        """Close: answers still on the way could no longer be matched to their commands."""
        if not self.closed:
            self.closed = True
            if self.transport is not None:
                self.transport.abort()
        self._stop_watchdog()
        self._fail_pending(exc)

    def _fail_pending(self, exc: RedisUnavailable) -> None:
        while self.pending:
            waiter = self.pending.popleft()
            self.sent_at.popleft()
            if not waiter.done():
                waiter.set_exception(exc)


class Sent(enum.Enum):
    """How a command sent without waiting for its answer went (``RespClient.send_unawaited``)."""

    NOT_SENT = "not sent"  # no open connection
    WRITTEN = "written"  # written to the socket at once: nothing else was queued in this turn
    QUEUED = "queued"  # goes out with this turn's write: a task that yields once (``asyncio.sleep(0)``) sees it sent


class Script:
    """A Lua script called by its SHA1 (``EVALSHA``), loaded by ``EVAL`` the first time Redis lacks it."""

    def __init__(self, source: str) -> None:
        self.source = source
        self.sha = hashlib.sha1(source.encode()).hexdigest()  # noqa: S324 - Redis names scripts by SHA1


class ScriptCall:
    """The calls of one script with the same keys and leading arguments (a limited key's): the command up to
    the ``per_call`` arguments of each call is encoded once, since encoding a dozen keys on every call would
    cost more CPU than the round trip. ``EVAL``'s form (Redis lacks the script) is built only when needed."""

    __slots__ = ("script", "per_call", "_count", "_fixed", "_evalsha")

    def __init__(self, script: Script, keys: Sequence[str], args: Sequence[str | int], *, per_call: int) -> None:
        self.script = script
        self.per_call = per_call
        self._count = 3 + len(keys) + len(args) + per_call
        self._fixed = b"".join([_bulk(len(keys)), *(_bulk(key) for key in keys), *(_bulk(arg) for arg in args)])
        self._evalsha = b"*%d\r\n%s%s%s" % (self._count, _bulk("EVALSHA"), _bulk(script.sha), self._fixed)

    def command(self, args: tuple[str | bytes | int, ...], *, load: bool = False) -> bytes:
        """The whole command for one call: ``EVALSHA``, or ``EVAL`` with the script's source when ``load``."""
        if len(args) != self.per_call:
            raise ValueError(f"this script call takes {self.per_call} arguments, got {len(args)}")
        head = (b"*%d\r\n%s%s%s" % (self._count, _bulk("EVAL"), _bulk(self.script.source), self._fixed) if load
                else self._evalsha)
        return head + b"".join([_bulk(arg) for arg in args])


class RespClient:
    def __init__(self, url: str, *, timeout: float) -> None:
        self.timeout = timeout
        try:
            self._address = parse_redis_url(url)
        except ValueError as exc:
            raise ValueError(f"REDIS_URL {exc}") from None
        self._connection: _Connection | None = None
        self._connecting: asyncio.Task[_Connection] | None = None

    async def execute(self, *args: str | bytes | int) -> Any:
        """Send one command and return its reply (``RedisReplyError`` for an error reply).

        A command on a connection that Redis dropped (a restart, an idle timeout) is sent once more on a new
        connection: the pin store's commands can be repeated safely. A timeout is not retried.
        """
        return await self.call(encode_command(args))

    async def call(self, command: bytes) -> Any:
        """``execute`` for a command already encoded."""
        connection = self._connection
        if connection is None or connection.closed:
            reply = await (await self._connect()).send(command)
        else:
            try:
                reply = await connection.send(command)
            except RedisUnavailable as exc:
                if not exc.dropped:
                    raise
                reply = await (await self._connect()).send(command)
        if isinstance(reply, RedisReplyError):
            raise reply
        return reply

    async def run_script(self, script: Script, keys: list[str], args: list[str | int]) -> Any:
        try:
            return await self.execute("EVALSHA", script.sha, len(keys), *keys, *args)
        except RedisReplyError as exc:
            if not str(exc).startswith("NOSCRIPT"):
                raise
            return await self.execute("EVAL", script.source, len(keys), *keys, *args)

    async def run_call(self, call: ScriptCall, *args: str | bytes | int) -> Any:
        """``run_script`` for a prepared call, with this call's own arguments."""
        try:
            return await self.call(call.command(args))
        except RedisReplyError as exc:
            if not str(exc).startswith("NOSCRIPT"):
                raise
            return await self.call(call.command(args, load=True))

    def send_unawaited(self, command: bytes, deliver: Callable[[Any], None]) -> Sent:
        """Send an encoded command without waiting for its answer (``Sent`` says how it went; nothing is sent
        without an open connection, since opening one means waiting).

        ``deliver`` is called once, from the event loop, with the reply, a ``RedisReplyError`` or the
        ``RedisUnavailable`` that failed the connection (a timeout, or ``dropped``: the command may not have run).
        """
        connection = self._connection
        if connection is None or connection.closed:
            return Sent.NOT_SENT
        return Sent.QUEUED if connection.send_unawaited(command, deliver) else Sent.WRITTEN

    def send_call(self, call: ScriptCall, args: tuple[str | bytes | int, ...],
                  deliver: Callable[[Any], None]) -> Sent:
        """``send_unawaited`` for a prepared script call: a script Redis lacks (``NOSCRIPT``) is sent again whole,
        and that call's answer delivered."""

        def answered(reply: Any) -> None:
            if isinstance(reply, RedisReplyError) and str(reply).startswith("NOSCRIPT"):
                if self.send_unawaited(call.command(args, load=True), deliver) is Sent.NOT_SENT:
                    deliver(RedisUnavailable("the connection closed before the script could be loaded", dropped=True))
                return
            deliver(reply)

        return self.send_unawaited(call.command(args), answered)

    async def drain(self) -> None:
        """Wait until every command sent so far has its answer (or its connection failed): at most ``timeout``
        after the oldest was sent. Redis answers in order, so the answer to a PING sent now comes after theirs;
        a second round covers the scripts sent again whole on NOSCRIPT meanwhile."""
        for _ in range(2):
            connection = self._connection
            if connection is None or connection.closed or not connection.pending:
                return
            with contextlib.suppress(RedisUnavailable):
                await connection.send(encode_command(("PING",)))

    async def aclose(self) -> None:
        if self._connecting is not None:
            self._connecting.cancel()  # its own clean-up closes the connection it was setting up
            self._connecting = None
        if self._connection is not None:
            self._connection.fail(RedisUnavailable("the client was closed"))
            self._connection = None

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
        connection = _Connection(self.timeout)
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
                reply = await connection.send(encode_command(command))
                if isinstance(reply, RedisReplyError):
                    raise RedisUnavailable(f"Redis refused {command[0]}: {reply}")
        except BaseException:
            connection.fail(RedisUnavailable("setup failed"))  # never left open half set up
            raise
        return connection


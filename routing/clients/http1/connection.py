"""One keep-alive HTTP/1.1 connection to a provider, as an asyncio protocol fed to httptools' parser.

The event loop calls ``data_received`` with whatever the socket had; the parser turns it into callbacks
(headers complete, a piece of body, end), and the awaiting coroutine is woken once per batch.
There are no per-read tasks, cancel scopes or stream wrappers, which is where a general-purpose client
spends most of its time on a relay's hot path. A server closing an idle connection is noticed at once
(``connection_lost``), so reuse needs no liveness check.

What the parser does not bound, the connection does, as h11 and aiohttp do: the head of a response (status
line, headers, and trailers) is at most 64 KiB and 100 header lines. Exactly one response belongs to one
request: a byte after it (a second response in the same read, trailing garbage) means the connection no
longer knows where it is in the byte stream, so it is closed once the first response has been read.
"""

from __future__ import annotations

import asyncio
from typing import TYPE_CHECKING, Any, cast

import httptools

from routing.clients.http1.failures import TransportFailure
from routing.clients.http1.response import HIGH_WATER, UpstreamResponse

if TYPE_CHECKING:
    from routing.clients.http1.pool import Pool

MAX_HEAD_BYTES = 64 * 1024
MAX_HEADER_LINES = 100


class _Surplus(Exception):
    """Bytes after the response to this request: stops the parser (raised from its callback)."""


class Connection(asyncio.Protocol):
    """A connection carries one exchange at a time; between exchanges it waits in its pool."""

    def __init__(self, pool: Pool, key: Any, loop: asyncio.AbstractEventLoop) -> None:
        self.pool = pool
        self.key = key  # what the pool files it under: the origin and the route to it
        self.loop = loop
        self.transport: asyncio.Transport | None = None
        self.closed = False
        self.counted = True  # holds one of the pool's connection slots until discarded
        self.reused = False  # served an exchange before the current one
        self.answered = False  # a byte of the current exchange's answer arrived
        self.idle_since = 0.0
        self.response: UpstreamResponse | None = None
        self._parser: httptools.HttpResponseParser | None = None
        self._waiter: asyncio.Future[None] | None = None
        # One timer serves every wait of the connection: a wait only moves the deadline, and the timer, when it
        # fires early, re-arms for what is left. A stream's chunks then cost no timer each (see ``wait``).
        self._wait_deadline = 0.0
        self._wait_message = ""
        self._timer: asyncio.TimerHandle | None = None
        self._failure: TransportFailure | None = None
        self._write_paused = False
        self._drained: asyncio.Future[None] | None = None
        self._headers: list[tuple[bytes, bytes]] = []
        self._head_bytes = 0  # bytes received while the final response head is incomplete
        self._header_lines = 0
        self._header_bytes = 0

    # -- asyncio.Protocol ---------------------------------------------------------------------------

    def connection_made(self, transport: asyncio.BaseTransport) -> None:
        # A stream protocol is handed a stream transport; typeshed types the parameter for every kind of
        # protocol, and uvloop's transports are not asyncio.Transport subclasses, so no isinstance either.
        self.transport = cast(asyncio.Transport, transport)

    def data_received(self, data: bytes) -> None:
        parser = self._parser
        if parser is None:
            # Bytes while no request is out (a server's "408" on an idle connection): unusable.
            self.close()
            return
        self.answered = True
        try:
            parser.feed_data(data)
        except httptools.HttpParserCallbackError as exc:
            cause = exc.__context__
            if isinstance(cause, _Surplus):
                self._poisoned()
                return
            self._fail(cause if isinstance(cause, TransportFailure) else TransportFailure(
                "protocol", f"the provider sent an invalid HTTP response ({exc})"))
            self.close()
            return
        except httptools.HttpParserError as exc:
            self._fail(TransportFailure("protocol", f"the provider sent an invalid HTTP response ({exc})"))
            self.close()
            return
        if self.response is None:
            self._head_bytes += len(data)
            if self._head_bytes > MAX_HEAD_BYTES:
                self._fail(TransportFailure("protocol", f"the provider's response head exceeds {MAX_HEAD_BYTES} bytes"))
                self.close()

    def eof_received(self) -> bool:
        self.closed = True  # not to be handed out again, even before connection_lost arrives
        return False  # close the transport; connection_lost follows

    def connection_lost(self, exc: Exception | None) -> None:
        self.closed = True
        response = self.response
        if response is not None and not response.complete:
            if response.status_code and response.until_close and exc is None:
                self.on_message_complete()  # a body delimited by an orderly end of the connection
            elif exc is not None:
                self._fail(TransportFailure("connection_lost", f"the connection was reset mid-response ({exc})"))
            else:
                self._fail(TransportFailure("connection_lost", "the provider closed the connection mid-response"))
        elif self._parser is not None and response is None:
            self._fail(TransportFailure("connection_lost", "the provider closed the connection without answering"))
        if self._drained is not None and not self._drained.done():
            self._drained.set_result(None)
        self.pool.discard(self)

    def pause_writing(self) -> None:
        self._write_paused = True

    def resume_writing(self) -> None:
        self._write_paused = False
        if self._drained is not None and not self._drained.done():
            self._drained.set_result(None)

    # -- httptools callbacks ------------------------------------------------------------------------

    def on_message_begin(self) -> None:
        if self.response is not None:
            raise _Surplus  # a second response to one request

    def on_header(self, name: bytes, value: bytes) -> None:
        self._header_lines += 1
        self._header_bytes += len(name) + len(value)
        if self._header_lines > MAX_HEADER_LINES:
            raise TransportFailure("protocol", f"the provider sent more than {MAX_HEADER_LINES} header lines")
        if self._header_bytes > MAX_HEAD_BYTES:
            raise TransportFailure("protocol", f"the provider's response head exceeds {MAX_HEAD_BYTES} bytes")
        if self.response is None:
            self._headers.append((name, value))
        # else: a chunked body's trailer. It is not kept: it must not reach this response's headers, nor, on
        # a reused connection, the next one's (a trailing ``content-encoding`` would change how it decodes).

    def on_headers_complete(self) -> None:
        parser = self._parser
        if parser is None:
            raise RuntimeError("headers arrived before a request was started")
        status = parser.get_status_code()
        if status < 200:
            self._headers = []  # an interim 1xx answer: the real one follows on the same exchange
            return
        try:
            response = UpstreamResponse(self, status, self._headers)
        except TransportFailure as failure:
            self._fail(failure)
            self.close()
            return
        self._headers = []
        self.response = response
        self._wake()

    def on_body(self, body: bytes) -> None:
        response = self.response
        if response is None:
            return
        response.received += len(body)
        if response.received > self.pool.max_response_bytes:
            raise TransportFailure("protocol", f"the provider's response exceeds {self.pool.max_response_bytes} bytes")
        response.chunks.append(body)
        response.buffered += len(body)
        if response.buffered > HIGH_WATER and self.transport is not None:
            self.transport.pause_reading()
            response.reading_paused = True
        self._wake()

    def on_message_complete(self) -> None:
        response = self.response
        if response is None:
            return  # the end of an interim 1xx message
        response.complete = True
        parser = self._parser
        response.keep_alive = parser is not None and parser.should_keep_alive() and not self.closed
        self._wake()

    # -- the exchange -------------------------------------------------------------------------------

    def start(self, request: bytes) -> None:
        """Write a whole request; the response is read through ``wait``."""
        if self.transport is None:
            raise RuntimeError("start() before the connection is made")
        self._parser = httptools.HttpResponseParser(self)
        self._failure = None
        self.response = None
        self.answered = False
        self._headers = []
        self._head_bytes = self._header_lines = self._header_bytes = 0
        self.transport.write(request)

    async def drained(self, timeout: float) -> None:
        """Wait until the kernel has taken the request (only when the socket's buffer filled up)."""
        if not self._write_paused or self.closed:
            return
        self._drained = self.loop.create_future()
        try:
            async with asyncio.timeout(timeout):
                await self._drained
        except TimeoutError:
            raise TransportFailure("write_timeout", "the provider did not read the request in time") from None
        finally:
            self._drained = None

    async def wait(self, timeout: float, message: str) -> None:
        """Wait for the next parser event (headers, body, end) or a failure, at most ``timeout`` seconds;
        a ``read_timeout`` failure saying ``message`` after that."""
        if self._failure is not None:
            raise self._failure
        waiter = self._waiter = self.loop.create_future()
        deadline = self.loop.time() + max(timeout, 0.0)
        self._wait_deadline, self._wait_message = deadline, message
        # A timer already armed for this deadline or an earlier one stays: when it fires before the deadline it
        # re-arms for the rest. Only a deadline earlier than the armed one needs a new timer.
        if self._timer is None or self._timer.when() > deadline:
            if self._timer is not None:
                self._timer.cancel()
            self._timer = self.loop.call_at(deadline, self._on_timer)
        try:
            await waiter
        finally:
            self._waiter = None
        if self._failure is not None:
            raise self._failure

    def _on_timer(self) -> None:
        self._timer = None
        waiter = self._waiter
        if waiter is None or waiter.done():
            return  # nobody waits: the next wait arms a timer of its own
        if self.loop.time() < self._wait_deadline:
            self._timer = self.loop.call_at(self._wait_deadline, self._on_timer)
            return
        self._failure = TransportFailure("read_timeout", self._wait_message)
        waiter.set_result(None)
        self.close()  # a late answer could belong to nothing: the connection is done

    def _wake(self) -> None:
        waiter = self._waiter
        if waiter is not None and not waiter.done():
            waiter.set_result(None)

    def _fail(self, failure: TransportFailure) -> None:
        if self._failure is None:
            self._failure = failure
        self._wake()

    def _poisoned(self) -> None:
        """Bytes followed the response: it is kept (it is complete), the connection is not."""
        if self.response is not None:
            self.response.keep_alive = False
        self.close()
        self._wake()

    def resume_reading(self) -> None:
        if self.transport is not None and not self.closed:
            self.transport.resume_reading()

    def finished(self) -> None:
        """The response was read to its end: back to the pool, or closed if it cannot be reused."""
        response = self.response
        self._parser = None
        self.response = None
        if response is not None and response.keep_alive and not self.closed and self._failure is None:
            self.reused = True
            self.pool.release(self)
        else:
            self.close()

    def close(self) -> None:
        if self._timer is not None:
            self._timer.cancel()
            self._timer = None
        if not self.closed:
            self.closed = True
            if self.transport is not None:
                self.transport.abort()  # no lingering: an unfinished exchange must not be reused
        self.pool.discard(self)

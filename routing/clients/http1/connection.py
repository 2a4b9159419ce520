"""One keep-alive HTTP/1.1 connection to a provider, as an asyncio protocol fed to httptools' parser.

The event loop calls ``data_received`` with whatever the socket had; the parser turns it into callbacks
(headers complete, a piece of body, message complete), and the awaiting coroutine is woken once per batch.
There are no per-read tasks, cancel scopes or stream wrappers, which is where a general-purpose client
spends most of its time on a relay's hot path. A server closing an idle connection is noticed at once
(``connection_lost``), so reuse needs no liveness check.
"""

from __future__ import annotations

import asyncio
import zlib
from collections import deque
from typing import TYPE_CHECKING, cast

import httptools

if TYPE_CHECKING:
    from routing.clients.http1.pool import Pool

# Reading stops while this much body is buffered and unread (a slow client of a fast provider), and
# resumes once the reader has taken it below the low mark: memory per stream stays bounded.
HIGH_WATER = 256 * 1024
LOW_WATER = 64 * 1024


class TransportFailure(Exception):
    """The exchange failed below HTTP. ``kind`` is one of: ``connect``, ``connect_timeout``,
    ``write_timeout``, ``read_timeout``, ``connection_lost``, ``protocol``."""

    def __init__(self, kind: str, message: str) -> None:
        super().__init__(message)
        self.kind = kind


class Connection(asyncio.Protocol):
    """A connection carries one exchange at a time; between exchanges it waits in its pool."""

    def __init__(self, pool: Pool, origin: tuple[str, str, int]) -> None:
        self.pool = pool
        self.origin = origin
        self.transport: asyncio.Transport | None = None
        self.closed = False
        self.counted = True  # holds one of the pool's connection slots until discarded
        self.idle_since = 0.0
        self.response: UpstreamResponse | None = None
        self._parser: httptools.HttpResponseParser | None = None
        self._waiter: asyncio.Future[None] | None = None
        self._failure: TransportFailure | None = None
        self._write_paused = False
        self._drained: asyncio.Future[None] | None = None
        self._headers: list[tuple[bytes, bytes]] = []

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
        try:
            parser.feed_data(data)
        except httptools.HttpParserError as exc:
            self._fail(TransportFailure("protocol", f"the provider sent an invalid HTTP response ({exc})"))
            self.close()

    def eof_received(self) -> bool:
        self.closed = True  # not to be handed out again, even before connection_lost arrives
        return False  # close the transport; connection_lost follows

    def connection_lost(self, exc: Exception | None) -> None:
        self.closed = True
        response = self.response
        if response is not None and not response.complete:
            if response.status_code and response.until_close:
                self.on_message_complete()  # a body delimited by the end of the connection
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

    def on_header(self, name: bytes, value: bytes) -> None:
        self._headers.append((name, value))

    def on_headers_complete(self) -> None:
        parser = self._parser
        assert parser is not None
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
        assert self.transport is not None
        self._parser = httptools.HttpResponseParser(self)
        self._failure = None
        self.response = None
        self.transport.write(request)

    async def drained(self, timeout: float) -> None:
        """Wait until the kernel has taken the request (only when the socket's buffer filled up)."""
        if not self._write_paused or self.closed:
            return
        loop = asyncio.get_running_loop()
        self._drained = loop.create_future()
        try:
            async with asyncio.timeout(timeout):
                await self._drained
        except TimeoutError:
            raise TransportFailure("write_timeout", "the provider did not read the request in time") from None
        finally:
            self._drained = None

    async def wait(self, timeout: float) -> None:
        """Wait for the next parser event (headers, body, end) or a failure, at most ``timeout`` seconds."""
        if self._failure is not None:
            raise self._failure
        loop = asyncio.get_running_loop()
        waiter = self._waiter = loop.create_future()
        timer = loop.call_later(timeout, self._on_timeout, waiter)
        try:
            await waiter
        finally:
            timer.cancel()
            self._waiter = None
        if self._failure is not None:
            raise self._failure

    def _on_timeout(self, waiter: asyncio.Future[None]) -> None:
        if not waiter.done():
            self._failure = TransportFailure("read_timeout", "the provider did not answer in time")
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

    def resume_reading(self) -> None:
        if self.transport is not None and not self.closed:
            self.transport.resume_reading()

    def finished(self) -> None:
        """The response was read to its end: back to the pool, or closed if it cannot be reused."""
        response = self.response
        self._parser = None
        self.response = None
        if response is not None and response.keep_alive and not self.closed and self._failure is None:
            self.pool.release(self)
        else:
            self.close()

    def close(self) -> None:
        if not self.closed:
            self.closed = True
            if self.transport is not None:
                self.transport.abort()  # no lingering: an unfinished exchange must not be reused
        self.pool.discard(self)


class UpstreamResponse:
    """A response whose status and headers are in; the body is read with ``aread`` or iterated raw."""

    def __init__(self, connection: Connection, status_code: int, raw_headers: list[tuple[bytes, bytes]]) -> None:
        self.connection = connection
        self.status_code = status_code
        self.raw_headers = raw_headers
        self.chunks: deque[bytes] = deque()
        self.buffered = 0
        self.reading_paused = False
        self.complete = False
        self.keep_alive = False
        self.released = False
        self.timeout = 600.0
        self.until_close = True
        self._decoder: zlib._Decompress | None = None
        for name, value in raw_headers:
            lowered = name.lower()
            if lowered in (b"content-length", b"transfer-encoding"):
                self.until_close = False
            elif lowered == b"content-encoding":
                encoding = value.strip().lower()
                if encoding in (b"gzip", b"x-gzip"):
                    self._decoder = zlib.decompressobj(zlib.MAX_WBITS | 16)
                elif encoding == b"deflate":
                    self._decoder = zlib.decompressobj()
                elif encoding not in (b"", b"identity"):
                    raise TransportFailure("protocol", f"unsupported content-encoding {encoding.decode('latin-1')}")
        if status_code in (204, 304):
            self.until_close = False

    def header_dict(self) -> dict[str, str]:
        """Headers with lower-case names (a repeated header keeps its last value)."""
        return {name.decode("latin-1").lower(): value.decode("latin-1") for name, value in self.raw_headers}

    def aiter_raw(self) -> UpstreamResponse:
        return self

    def __aiter__(self) -> UpstreamResponse:
        return self

    async def __anext__(self) -> bytes:
        connection = self.connection
        while True:
            chunks = self.chunks
            if chunks:
                data = chunks.popleft() if len(chunks) == 1 else _take_all(chunks)
                self.buffered = 0
                if self.reading_paused and self.buffered < LOW_WATER:
                    self.reading_paused = False
                    connection.resume_reading()
                if self._decoder is not None:
                    data = self._decode(data)
                    if not data:
                        continue
                return data
            if self.complete:
                self._release()
                raise StopAsyncIteration
            await connection.wait(self.timeout)

    async def aread(self) -> bytes:
        parts = [chunk async for chunk in self]
        return parts[0] if len(parts) == 1 else b"".join(parts)

    async def aclose(self) -> None:
        if not self.released:
            self.released = True
            if self.complete and not self.chunks:
                self.connection.finished()
            else:
                self.connection.close()  # unread body on the wire: the connection cannot be reused

    def _release(self) -> None:
        if not self.released:
            self.released = True
            self.connection.finished()

    def _decode(self, data: bytes) -> bytes:
        assert self._decoder is not None
        try:
            out = self._decoder.decompress(data)
            if self.complete and not self.chunks:
                out += self._decoder.flush()
            return out
        except zlib.error as exc:
            raise TransportFailure("protocol", f"the provider sent a body that does not decompress ({exc})") from None


def _take_all(chunks: deque[bytes]) -> bytes:
    data = b"".join(chunks)
    chunks.clear()
    return data

"""An upstream response whose status and headers are in: its body is read with ``aread`` or iterated raw.

Reading is bounded three ways. Each wait for more of the body ends by the attempt's absolute deadline (a
provider trickling a byte a second cannot stretch an attempt), and, for a stream, by the idle timeout between
two pieces. The body is capped on the wire and again after decompression (a small gzip body can inflate a
thousandfold). A compressed body must end where its encoding says it ends: a truncated one is a failure,
never a shorter answer.
"""

from __future__ import annotations

import zlib
from collections import deque
from typing import TYPE_CHECKING

from routing.clients.http1.failures import TransportFailure

if TYPE_CHECKING:
    from routing.clients.http1.connection import Connection

# Reading stops while this much body is buffered and unread (a slow client of a fast provider), and
# resumes once the reader has taken it: memory per stream stays bounded.
HIGH_WATER = 256 * 1024


class UpstreamResponse:
    """A response whose status and headers are in; the body is read with ``aread`` or iterated raw."""

    def __init__(self, connection: Connection, status_code: int, raw_headers: list[tuple[bytes, bytes]]) -> None:
        self.connection = connection
        self.status_code = status_code
        self.raw_headers = raw_headers
        self.chunks: deque[bytes] = deque()
        self.buffered = 0
        self.received = 0  # body bytes as they came off the wire
        self.decoded = 0  # body bytes after decompression
        self.reading_paused = False
        self.complete = False
        self.keep_alive = False
        self.released = False
        self.deadline = float("inf")  # loop time by which the whole body must be in
        self.idle_timeout: float | None = None  # streams: the longest silence between two pieces
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

    def extend_deadline(self, seconds: float) -> None:
        """Let the rest of the body take up to ``seconds`` from now (a stream the request committed to)."""
        self.deadline = self.connection.loop.time() + seconds

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
                if self.reading_paused:
                    self.reading_paused = False
                    connection.resume_reading()
                if self._decoder is not None:
                    data = self._decode(data)
                    if not data:
                        continue
                return data
            if self.complete:
                if self._decoder is not None:
                    self._check_encoding_ended()
                self._release()
                raise StopAsyncIteration
            await self._wait_for_more(connection)

    async def _wait_for_more(self, connection: Connection) -> None:
        remaining = self.deadline - connection.loop.time()
        idle = self.idle_timeout
        if idle is not None and idle < remaining:
            await connection.wait(idle, f"the provider sent nothing for {idle:g}s")
        else:
            await connection.wait(remaining, "the provider did not answer in time (the attempt's deadline)")

    async def aread(self) -> bytes:
        if self.complete and self._decoder is None and not self.released:
            # The whole plain body is in already (a small answer arrives with its head): what the iteration
            # below would end with, without a resumption per piece.
            chunks = self.chunks
            data = chunks.popleft() if len(chunks) == 1 else _take_all(chunks)
            self.buffered = 0
            if self.reading_paused:
                self.reading_paused = False
                self.connection.resume_reading()
            self._release()
            return data
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

    def _fail(self, failure: TransportFailure) -> TransportFailure:
        """The body is unusable: the connection goes (whatever follows on it cannot be trusted)."""
        self.released = True
        self.connection.close()
        return failure

    def _decode(self, data: bytes) -> bytes:
        decoder = self._decoder
        if decoder is None:
            raise RuntimeError("_decode() without a content decoder")
        limit = self.connection.pool.max_decoded_bytes
        try:
            # At most one byte past the cap comes out, however much the input would inflate to.
            out = decoder.decompress(data, limit - self.decoded + 1)
        except zlib.error as exc:
            raise self._fail(TransportFailure(
                "protocol", f"the provider sent a body that does not decompress ({exc})")) from None
        self.decoded += len(out)
        if self.decoded > limit:
            raise self._fail(TransportFailure(
                "protocol", f"the provider's body decompresses to more than {limit} bytes"))
        return out

    def _check_encoding_ended(self) -> None:
        if self._decoder is None:
            raise RuntimeError("_check_encoding_ended() without a content decoder")
        if self._decoder.eof:
            return
        if self.until_close:  # the connection's end was the body's end: it was cut
            raise self._fail(TransportFailure(
                "connection_lost", "the connection closed before the provider's compressed body ended"))
        raise self._fail(TransportFailure("protocol", "the provider's compressed body is truncated"))


def _take_all(chunks: deque[bytes]) -> bytes:
    data = b"".join(chunks)
    chunks.clear()
    return data

"""An upstream response whose status and headers are in: its body is read with ``aread`` or iterated raw.

aiohttp reads the socket and buffers the body (reading pauses while ``BUFFER_BYTES`` of it wait unread: a slow
client of a fast provider holds bounded memory); this wrapper takes what is buffered and bounds the reading
three ways. Each wait for more of the body ends by the attempt's absolute deadline (a provider trickling a byte
a second cannot stretch an attempt), and, for a stream, by the idle timeout between two pieces. The body is
capped on the wire and again after decompression (a small gzip body can inflate a thousandfold): aiohttp's own
decompression is off, so a compressed body must also end where its encoding says it ends: a truncated one is a
failure, never a shorter answer.

The response holds its connection slot (``slots.py``) until it is read to its end or closed.
"""

from __future__ import annotations

import asyncio
import zlib
from collections.abc import Callable

import aiohttp

from routing.clients.http.failure_mapping import body_failure
from routing.clients.http.failures import TransportFailure

BUFFER_BYTES = 128 * 1024  # aiohttp pauses reading at twice this unread


class UpstreamResponse:
    """A response whose status and headers are in; the body is read with ``aread`` or iterated raw."""

    def __init__(self, raw: aiohttp.ClientResponse, *, deadline: float, idle_timeout: float | None,
                 max_response_bytes: int, max_decoded_bytes: int, release_slot: Callable[[], None]) -> None:
        self.raw = raw
        self.status_code = raw.status
        self.deadline = deadline  # loop time by which the whole body must be in
        self.idle_timeout = idle_timeout  # streams: the longest silence between two pieces
        self.received = 0  # body bytes taken from the wire so far
        self.decoded = 0  # body bytes after decompression
        self.released = False
        self._max_response = max_response_bytes
        self._max_decoded = max_decoded_bytes
        self._release_slot = release_slot
        self._decoder: zlib._Decompress | None = None
        self._until_close = False
        encoding = raw.headers.get("Content-Encoding")
        if encoding is not None:
            encoding = encoding.strip().lower()
            if encoding in ("gzip", "x-gzip"):
                self._decoder = zlib.decompressobj(zlib.MAX_WBITS | 16)
            elif encoding == "deflate":
                self._decoder = zlib.decompressobj()
            elif encoding not in ("", "identity"):
                raise self._fail(TransportFailure("protocol", f"unsupported content-encoding {encoding}"))
            self._until_close = "Content-Length" not in raw.headers and "Transfer-Encoding" not in raw.headers

    def header_dict(self) -> dict[str, str]:
        """Headers with lower-case names (a repeated header keeps its last value)."""
        return {name.lower(): value for name, value in self.raw.headers.items()}

    def extend_deadline(self, seconds: float) -> None:
        """Let the rest of the body take up to ``seconds`` from now (a stream the request committed to)."""
        self.deadline = asyncio.get_running_loop().time() + seconds

    def aiter_raw(self) -> UpstreamResponse:
        return self

    def __aiter__(self) -> UpstreamResponse:
        return self

    async def __anext__(self) -> bytes:
        content = self.raw.content
        while True:
            try:
                data = content.read_nowait()  # what is buffered; raises the failure aiohttp recorded
                if not data:
                    if content.at_eof():
                        break
                    data = await self._wait(content)
            except aiohttp.ClientError as exc:
                raise self._fail(body_failure(exc)) from None
            if not data:
                continue
            self.received += len(data)
            if self.received > self._max_response:
                raise self._fail(TransportFailure(
                    "protocol", f"the provider's response exceeds {self._max_response} bytes"))
            if self._decoder is not None:
                data = self._decode(data)
                if not data:
                    continue
            return data
        if self._decoder is not None:
            self._check_encoding_ended()
        self._release()
        raise StopAsyncIteration

    async def _wait(self, content: aiohttp.StreamReader) -> bytes:
        loop = asyncio.get_running_loop()
        remaining = self.deadline - loop.time()
        idle = self.idle_timeout
        if idle is not None and idle < remaining:
            limit, message = idle, f"the provider sent nothing for {idle:g}s"
        else:
            limit, message = remaining, "the provider did not answer in time (the attempt's deadline)"
        try:
            async with asyncio.timeout(max(limit, 0.0)):
                return await content.readany()
        except TimeoutError:
            raise self._fail(TransportFailure("read_timeout", message)) from None

    async def aread(self) -> bytes:
        parts = [chunk async for chunk in self]
        return parts[0] if len(parts) == 1 else b"".join(parts)

    async def aclose(self) -> None:
        if not self.released:
            self.released = True
            if self.raw.content.at_eof():
                self.raw.release()
            else:
                self.raw.close()  # unread body on the wire: the connection cannot be reused
            self._release_slot()

    def _release(self) -> None:
        if not self.released:
            self.released = True
            self.raw.release()
            self._release_slot()

    def _fail(self, failure: TransportFailure) -> TransportFailure:
        """The body is unusable: the connection goes (whatever follows on it cannot be trusted)."""
        if not self.released:
            self.released = True
            self.raw.close()
            self._release_slot()
        return failure

    def _decode(self, data: bytes) -> bytes:
        decoder = self._decoder
        if decoder is None:
            raise RuntimeError("_decode() without a content decoder")
        limit = self._max_decoded
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
        if self._decoder is None or self._decoder.eof:
            return
        if self._until_close:  # the connection's end was the body's end: it was cut
            raise self._fail(TransportFailure(
                "connection_lost", "the connection closed before the provider's compressed body ended"))
        raise self._fail(TransportFailure("protocol", "the provider's compressed body is truncated"))

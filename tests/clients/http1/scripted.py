"""A scripted HTTP server for the provider client's tests: an asyncio server on loopback whose handler reads
the request and writes exactly the bytes a test scripts, so framing edge cases and faults are reproduced byte
for byte. ``Server`` also records what each connection saw, so a test can tell when the client closed one.
"""

from __future__ import annotations

import asyncio
import socket
from collections.abc import Awaitable, Callable
from typing import Any

from routing.clients.http1 import Pool, UpstreamResponse

Handler = Callable[[asyncio.StreamReader, asyncio.StreamWriter], Awaitable[None]]
OK_HEAD = b"HTTP/1.1 200 OK\r\ncontent-type: application/json\r\n"


async def read_request(reader: asyncio.StreamReader) -> tuple[bytes, bytes]:
    head = await reader.readuntil(b"\r\n\r\n")
    length = 0
    for line in head.split(b"\r\n"):
        if line.lower().startswith(b"content-length:"):
            length = int(line.split(b":", 1)[1])
    return head, await reader.readexactly(length)


async def answer_each(reader: asyncio.StreamReader, writer: asyncio.StreamWriter, answer: bytes) -> None:
    """Answer every request on the connection with ``answer`` until the client closes it."""
    while True:
        try:
            await read_request(reader)
        except asyncio.IncompleteReadError:
            return
        writer.write(answer)
        await writer.drain()


def make_pool(**options: Any) -> Pool:
    defaults: dict[str, Any] = {"max_connections": 10, "max_idle_per_origin": 10, "keepalive_expiry": 30.0}
    return Pool(**{**defaults, **options})


class Server:
    """A loopback server running ``handler`` per connection; counts connections and notices their end."""

    def __init__(self, handler: Handler, *, sock: socket.socket | None = None) -> None:
        self.handler = handler
        self.sock = sock  # a listening socket to serve on, instead of a new one on 127.0.0.1
        self.connections = 0
        self.open = 0  # connections whose client has not closed them yet
        self._server: asyncio.Server | None = None
        self._writers: set[asyncio.StreamWriter] = set()

    async def __aenter__(self) -> Server:
        if self.sock is not None:
            self._server = await asyncio.start_server(self._serve, sock=self.sock)
        else:
            self._server = await asyncio.start_server(self._serve, "127.0.0.1", 0)
        return self

    async def __aexit__(self, *exc: object) -> None:
        assert self._server is not None
        self._server.close()
        for writer in self._writers:  # a connection the client leaked must not hold the test up
            writer.transport.abort()
        await self._server.wait_closed()

    @property
    def port(self) -> int:
        assert self._server is not None
        return int(self._server.sockets[0].getsockname()[1])

    @property
    def url(self) -> str:
        return f"http://127.0.0.1:{self.port}/v1/chat/completions?x=1"

    async def _serve(self, reader: asyncio.StreamReader, writer: asyncio.StreamWriter) -> None:
        self.connections += 1
        self.open += 1
        self._writers.add(writer)
        try:
            await self.handler(reader, writer)
            await reader.read()  # until the client closes its end
        except (asyncio.IncompleteReadError, ConnectionError):
            pass
        finally:
            self.open -= 1
            self._writers.discard(writer)
            writer.close()


def run(scenario: Callable[[str, Pool], Awaitable[None]], handler: Handler, **pool_options: Any) -> None:
    """Start a server with ``handler`` for every connection, and run ``scenario(url, pool)`` against it."""

    async def closing(reader: asyncio.StreamReader, writer: asyncio.StreamWriter) -> None:
        try:
            await handler(reader, writer)
        except (asyncio.IncompleteReadError, ConnectionError):
            pass
        finally:
            writer.close()

    async def main() -> None:
        server = await asyncio.start_server(closing, "127.0.0.1", 0)
        port = server.sockets[0].getsockname()[1]
        pool = make_pool(**pool_options)
        try:
            await scenario(f"http://127.0.0.1:{port}/v1/chat/completions?x=1", pool)
        finally:
            pool.close()
            server.close()
            await server.wait_closed()

    asyncio.run(main())


async def post(pool: Pool, url: str, body: bytes = b'{"a":1}', timeout: float = 5.0,
               idle_timeout: float | None = None, **headers: str) -> UpstreamResponse:
    return await pool.request("POST", url, headers or {"content-type": "application/json"}, body,
                              timeout=timeout, connect_timeout=2.0, idle_timeout=idle_timeout)


async def eventually(condition: Callable[[], bool], *, timeout: float = 5.0, what: str = "the condition") -> None:
    """Wait until ``condition()`` holds, polling; fails the test after ``timeout`` seconds."""
    loop = asyncio.get_running_loop()
    give_up = loop.time() + timeout
    while not condition():
        if loop.time() > give_up:
            raise AssertionError(f"{what} did not happen within {timeout} s")
        await asyncio.sleep(0.01)

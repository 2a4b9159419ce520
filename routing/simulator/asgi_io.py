"""One HTTP exchange over raw ASGI: read the body, send bytes, wait without missing a disconnect, and
drop the connection on purpose.

Dropping a connection has no ASGI message, so :meth:`Connection.abort` reaches the server's transport
through the ``send`` callable (uvicorn's h11 and httptools protocols both keep it as ``transport``):
the client sees the socket closed (or reset) with nothing, or half of something, written.
"""

from __future__ import annotations

import asyncio
import contextlib
import socket
import struct
from collections.abc import Awaitable, Callable, MutableMapping
from typing import Any

Scope = MutableMapping[str, Any]
Message = MutableMapping[str, Any]
Receive = Callable[[], Awaitable[Message]]
Send = Callable[[Message], Awaitable[None]]

MAX_BODY_BYTES = 64 * 1024 * 1024


class BodyTooLarge(Exception):
    pass


class Connection:
    """The request/response cycle of one HTTP request, with the bookkeeping the recorder reports."""

    __slots__ = ("scope", "_receive", "_send", "_closing", "_watch", "disconnected", "started", "completed",
                 "chunks_sent")

    def __init__(self, scope: Scope, receive: Receive, send: Send, closing: asyncio.Future[None]) -> None:
        self.scope = scope
        self._receive = receive
        self._send = send
        self._closing = closing  # resolved when the server shuts down: every wait ends at once
        self._watch: asyncio.Future[Message] | None = None
        self.disconnected = False
        self.started = False
        self.completed = False
        self.chunks_sent = 0

    async def read_body(self) -> bytes:
        """The whole request body; raises BodyTooLarge past MAX_BODY_BYTES."""
        chunks = []
        size = 0
        while True:
            message = await self._receive()
            if message["type"] == "http.disconnect":
                self.disconnected = True
                break
            chunk = message.get("body", b"")
            size += len(chunk)
            if size > MAX_BODY_BYTES:
                raise BodyTooLarge()
            chunks.append(chunk)
            if not message.get("more_body", False):
                break
        return b"".join(chunks)

    async def start(self, status: int, headers: list[tuple[bytes, bytes]]) -> None:
        self.started = True
        await self._send({"type": "http.response.start", "status": status, "headers": headers})

    async def write(self, data: bytes, *, more: bool = True) -> None:
        self.completed = not more
        await self._send({"type": "http.response.body", "body": data, "more_body": more})

    async def respond(self, status: int, headers: list[tuple[bytes, bytes]], body: bytes) -> None:
        """A complete response in two messages."""
        await self.start(status, [*headers, (b"content-length", str(len(body)).encode())])
        await self.write(body, more=False)

    async def pause(self, seconds: float) -> bool:
        """Wait ``seconds``; False when the client went away or the server is shutting down meanwhile."""
        if self.disconnected or self._closing.done():
            return False
        if seconds <= 0:
            return True
        if self._watch is None:
            self._watch = asyncio.ensure_future(self._wait_for_disconnect())
        done, _ = await asyncio.wait((self._watch, self._closing), timeout=seconds,
                                     return_when=asyncio.FIRST_COMPLETED)
        if self._watch in done:
            self.disconnected = True
        return not done

    async def _wait_for_disconnect(self) -> Message:
        while True:
            message = await self._receive()
            if message["type"] == "http.disconnect":
                return message

    async def abort(self, *, reset: bool = False) -> None:
        """Close the connection now, whatever was sent; ``reset`` sends a TCP RST instead of a FIN."""
        owner = getattr(self._send, "__self__", None)
        transport = getattr(owner, "transport", None)
        if transport is None:  # not uvicorn: the server turns an exception into a dropped response
            raise ConnectionAbortedError("simulated connection drop")
        if reset:
            sock = transport.get_extra_info("socket")
            if sock is not None:
                with contextlib.suppress(OSError):
                    sock.setsockopt(socket.SOL_SOCKET, socket.SO_LINGER, struct.pack("ii", 1, 0))
            transport.abort()
        else:
            transport.close()
        # Let the protocol notice the loss, so the server does not write its own 500 after we return.
        for _ in range(10):
            if getattr(owner, "disconnected", True):
                break
            await asyncio.sleep(0)
        self.disconnected = True

    @property
    def server_closing(self) -> bool:
        return self._closing.done()

    def finish(self) -> None:
        """Release the disconnect watcher, if one was started."""
        if self._watch is not None and not self._watch.done():
            self._watch.cancel()

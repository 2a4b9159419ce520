"""The provider connection as aiohttp runs it, with what the gateway needs to know about each exchange on it.

``ProviderConnection`` is aiohttp's own protocol (its C parser, its flow control) plus four things:

- it records, per exchange, whether the connection served one before (``exchanges``) and whether any byte of
  this exchange's answer arrived (``answered``): a kept-alive connection the server closed as the request went
  out, with not a byte back, is safe to send once more (``client.py``), which aiohttp only does for
  idempotent methods;
- a connection reset in the middle of a body fails that body, also when the body is delimited by the close of
  the connection (aiohttp would end such a body at the reset as if it were complete: a shorter answer);
- closing a connection whose request is still in the socket's send buffer aborts it (a reset at once): a
  provider that stopped reading must not keep a socket open until it reads again;
- a response head (status line and headers) is at most ``MAX_HEAD_BYTES`` in all: aiohttp's parser bounds each
  line and the number of lines, not their sum.

``Exchange`` connects a request to the connection aiohttp picked for it: the request sets it in a context
variable and the connection claims it when aiohttp hands it the exchange, in the requesting task.
"""

from __future__ import annotations

import functools
from collections.abc import Callable
from contextvars import ContextVar
from typing import Any

from aiohttp import ClientPayloadError, TCPConnector
from aiohttp.client_proto import ResponseHandler
from aiohttp.http_exceptions import BadHttpMessage

MAX_HEAD_BYTES = 64 * 1024


class Exchange:
    """One request's view of the connection it went out on."""

    __slots__ = ("connection",)

    def __init__(self) -> None:
        self.connection: ProviderConnection | None = None

    def unanswered_on_reused(self) -> bool:
        """The request went out on a connection that served another before, and not a byte came back."""
        connection = self.connection
        return connection is not None and connection.exchanges > 1 and not connection.answered

    def unsent(self) -> bool:
        """Part of the request was still waiting to be written when the connection closed."""
        return self.connection is not None and self.connection.unsent_at_close > 0


current_exchange: ContextVar[Exchange | None] = ContextVar("current_exchange", default=None)


class ProviderConnection(ResponseHandler):
    exchanges = 0
    answered = False
    headed = False  # a response head of this exchange was parsed
    head_bytes = 0  # bytes received in this exchange before that
    unsent_at_close = 0

    def set_response_params(self, **params: Any) -> None:
        # aiohttp calls this once per exchange, from the task that sends the request, before it writes it.
        self.exchanges += 1
        self.answered = False
        self.headed = False
        self.head_bytes = 0
        exchange = current_exchange.get()
        if exchange is not None:
            exchange.connection = self
        super().set_response_params(**params)

    def data_received(self, data: bytes) -> None:
        self.answered = True
        if not self.headed:
            self.head_bytes += len(data)  # this read may also hold the body: the head is measured when parsed
        super().data_received(data)
        if not self.headed and self.head_bytes > MAX_HEAD_BYTES:
            self._refuse_head()

    def feed_data(self, data: Any, size: int = 0) -> None:
        # The parser hands over a parsed head (with its body's reader); only a read that large can hold too much.
        self.headed = True
        if self.head_bytes > MAX_HEAD_BYTES and sum(len(n) + len(v) for n, v in data[0].raw_headers) > MAX_HEAD_BYTES:
            self._refuse_head()
            return
        super().feed_data(data, size)

    def _refuse_head(self) -> None:
        self.set_exception(BadHttpMessage(f"the response head exceeds {MAX_HEAD_BYTES} bytes"))
        if self.transport is not None:
            self.transport.close()

    def connection_lost(self, exc: BaseException | None) -> None:
        payload = self._payload
        if exc is not None and payload is not None and not payload.is_eof():
            payload.set_exception(ClientPayloadError(f"the connection was reset mid-response ({exc})"))
        super().connection_lost(exc)

    def close(self) -> None:
        transport = self.transport
        if transport is not None:
            self.unsent_at_close = transport.get_write_buffer_size()
            if self.unsent_at_close:
                self.abort()
                return
        super().close()


class ProviderConnector(TCPConnector):
    """aiohttp's TCP connector making ``ProviderConnection`` protocols (for direct, proxied and tunnelled TLS)."""

    def __init__(self, **options: Any) -> None:
        super().__init__(**options)
        make: Callable[..., ResponseHandler] = ProviderConnection
        self._factory = functools.partial(make, loop=self._loop)

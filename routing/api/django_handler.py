"""A Django ASGI handler for the proxy endpoints: no middleware and no thread hops.

Django's own ASGIHandler sends ``request_started`` through ``sync_to_async`` (its receivers are sync) and
closes every response through ``sync_to_async`` as well: two trips to a worker thread per request, on a path
that never touches the database from the event loop. Before it reads a ``/v1`` body it authenticates the
caller from the headers (routing/api/gateway_auth.py), answering a 401 at once, and it reads the body with
routing/api/body_read.py (in memory, refused while it arrives when too large or too slow) instead of spooling
it to a temporary file. It keeps everything else Django does: request creation, URL resolution,
exception-to-response conversion and, importantly, cancelling the view when the client disconnects (which
cancels the upstream request).

``BoundedASGIHandler`` is Django's full handler, for the admin and the auditor pages, with the same body reading.
"""

from __future__ import annotations

import asyncio
import contextlib
import io
from collections.abc import Callable
from typing import IO

from django.core.exceptions import RequestAborted
from django.core.handlers.asgi import ASGIHandler, get_script_prefix
from django.core.handlers.exception import convert_exception_to_response
from django.http import HttpResponseBase
from django.urls import set_script_prefix

from routing.api import views
from routing.api.arrival import ARRIVAL_ATTRIBUTE, Arrival
from routing.api.asgi_types import Message, Receive, Scope, Send
from routing.api.body_read import BodyRefused, ClientGone, read_body, refusal_response, with_length
from routing.api.gateway_auth import CALLER_ATTRIBUTE, caller_from_scope, mark_served_open
from routing.config.runtime import current_table
from routing.gateway.gateway_error import GatewayError

# /v1 paths anyone may read: the API's description.
PUBLIC_PATHS = frozenset({"/v1/openapi.json"})


class BoundedASGIHandler(ASGIHandler):
    """Django's own ASGI handler (middleware, sessions, CSRF: the admin and the auditor pages) with the body
    read by routing/api/body_read.py: in memory, under DATA_UPLOAD_MAX_MEMORY_SIZE and GOMODEL_BODY_TIMEOUT.

    Django's would spool any body, however large, to a temporary file with blocking writes on the event loop,
    wait for it forever, and let a chunked body (no Content-Length) past its own size check.
    """

    async def handle(self, scope: Scope, receive: Receive, send: Send) -> None:
        try:
            body = await read_body(scope, receive, Arrival.now())
        except ClientGone:
            return
        except BodyRefused as too_large_or_slow:
            # No request_started was sent, so the response is not closed (its close sends request_finished).
            await self.send_response(refusal_response(scope, too_large_or_slow), send)
            return
        await super().handle(with_length(scope, body), _replay(body, receive), send)

    async def read_body(self, receive: Receive) -> IO[bytes]:
        """The body ``handle`` read already, handed on by ``_replay`` as its first message."""
        message = await receive()
        if message["type"] == "http.disconnect":
            raise RequestAborted
        return io.BytesIO(message.get("body", b""))


def _replay(body: bytes, receive: Receive) -> Receive:
    """``receive`` whose first message is the whole of ``body``, already read; then the client's own messages
    (the disconnect Django listens for while the view runs)."""
    first: list[Message] = [{"type": "http.request", "body": body, "more_body": False}]

    async def replayed() -> Message:
        if first:
            return first.pop()
        return await receive()

    return replayed


class ProxyASGIHandler(ASGIHandler):
    def load_middleware(self, is_async: bool = False) -> None:
        self._view_middleware: list[Callable[..., HttpResponseBase | None]] = []
        self._template_response_middleware: list[Callable[..., HttpResponseBase]] = []
        self._exception_middleware: list[Callable[..., HttpResponseBase | None]] = []
        # django-stubs leaves out BaseHandler's private _get_response_async, which this handler chains to directly.
        self._middleware_chain = convert_exception_to_response(self._get_response_async)  # type: ignore[attr-defined]

    async def handle(self, scope: Scope, receive: Receive, send: Send) -> None:
        arrival = Arrival.now()
        caller = None
        if scope["path"].startswith("/v1/") and scope["path"] not in PUBLIC_PATHS:
            try:  # from the headers, before the body is read: an unknown caller cannot make us wait for it
                caller = caller_from_scope(scope, current_table())
            except GatewayError as exc:
                refusal = views.error_response(views.inbound_of_scope(scope), exc)
                await self.send_response(refusal, send)
                refusal.close()
                return
        try:  # in memory, under the path's limit and GOMODEL_BODY_TIMEOUT (routing/api/body_read.py)
            body = await read_body(scope, receive, arrival)
        except ClientGone:
            return
        except BodyRefused as too_large_or_slow:
            refusal = refusal_response(scope, too_large_or_slow)
            await self.send_response(refusal, send)
            refusal.close()
            return
        body_file = io.BytesIO(body)
        scope = with_length(scope, body)
        set_script_prefix(get_script_prefix(scope))
        created = self.create_request(scope, body_file)  # (the request, None) or (None, the error response)
        if created[0] is None:
            error_response = created[1]
            body_file.close()
            await self.send_response(error_response, send)
            error_response.close()
            return
        request = created[0]
        setattr(request, ARRIVAL_ATTRIBUTE, arrival)
        if caller is not None:
            setattr(request, CALLER_ATTRIBUTE, caller)

        async def process_request() -> HttpResponseBase:
            response = await self.run_get_response(request)
            mark_served_open(response, caller)
            with contextlib.suppress(asyncio.CancelledError):  # the client went away while it was being sent
                await self.send_response(response, send)
            return response

        listening = asyncio.create_task(self.listen_for_disconnect(receive))
        processing = asyncio.create_task(process_request())
        tasks = [listening, processing]
        await asyncio.wait(tasks, return_when=asyncio.FIRST_COMPLETED)
        for task in tasks:
            if task.done():
                with contextlib.suppress(RequestAborted):
                    task.result()
            else:
                task.cancel()  # a disconnect cancels the view, and with it the upstream request
                with contextlib.suppress(asyncio.CancelledError):
                    await task
        try:
            response = processing.result()
        except asyncio.CancelledError:
            pass
        else:
            # Closing runs request_finished receivers; on this path they find no database connection
            # opened by the event loop's thread, so they are cheap and need no worker thread.
            response.close()
        body_file.close()

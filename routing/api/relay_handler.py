"""The ASGI handler for the relay endpoints: ``POST /v1/chat/completions``, ``/v1/messages``, ``/v1/responses``
and ``/v1/embeddings``.

They are the gateway's hot path, so this handler does only what they need around the Django views in
``routing/api/views.py``: authenticate the caller from the headers (routing/api/gateway_auth.py) and answer
a 401 without reading the body, read the body into memory (routing/api/body_read.py: refused while it
arrives past ``GOMODEL_MAX_BODY_BYTES`` or ``GOMODEL_BODY_TIMEOUT``), build the Django request
(routing/api/relay_request.py), call the view
in the request's own task, and send the response. A watcher waits for the client's disconnect and cancels
that task, which cancels the upstream request.

What it leaves out, measured to cost ~15% of a worker's CPU under load: URL resolution (fixed paths),
the body spooled to a temporary file, a second task per request and ``asyncio.wait``, and the
``request_started``/``request_finished`` signals, whose only receivers close the database connections of
the current thread, which this path never opens (database work runs in ``routing.clients.db_thread``). Every other
``/v1/`` path, and any method but POST, goes to the fuller ``ProxyASGIHandler``.
"""

from __future__ import annotations

import asyncio
import logging
from collections.abc import Awaitable, Callable
from typing import Any, cast

from django.http import HttpRequest, HttpResponse, HttpResponseBase, StreamingHttpResponse

from routing.api import views
from routing.api.arrival import ARRIVAL_ATTRIBUTE, Arrival
from routing.api.asgi_types import ASGIApp, Receive, Scope, Send
from routing.api.body_read import BodyRefused, ClientGone, read_body, refusal_response
from routing.api.gateway_auth import CALLER_ATTRIBUTE, caller_from_scope, mark_served_open
from routing.api.relay_request import RelayRequest
from routing.config.runtime import current_table
from routing.gateway.gateway_error import GatewayError
from routing.gateway.response_headers import encoded_header_items
from routing.providers.errors import Inbound

log = logging.getLogger("gomodel.relay")

View = Callable[[HttpRequest], Awaitable[HttpResponseBase]]

ROUTES: dict[str, tuple[View, Inbound]] = {
    "/v1/chat/completions": (views.chat_completions, "openai"),
    "/v1/messages": (views.messages, "anthropic"),
    "/v1/responses": (views.responses, "openai"),
    "/v1/embeddings": (views.embeddings, "openai"),
}


class RelayHandler:
    def __init__(self, fallback: ASGIApp) -> None:
        self.fallback = fallback

    async def __call__(self, scope: Scope, receive: Receive, send: Send) -> None:
        route = ROUTES.get(scope["path"])
        if route is None or scope["method"] != "POST":
            await self.fallback(scope, receive, send)
            return
        view, inbound = route
        arrival = Arrival.now()  # the request's deadline starts here, before its body has arrived
        try:  # from the headers, before a byte of the body is read: an unknown caller cannot make us wait
            caller = caller_from_scope(scope, current_table())
        except GatewayError as exc:
            await _send(views.error_response(inbound, exc), send)
            return
        try:
            body = await read_body(scope, receive, arrival)
        except ClientGone:
            return
        except BodyRefused as refusal:  # too large or too slow, refused while it arrived
            await _send(refusal_response(scope, refusal), send)
            return
        request = RelayRequest(scope, body)
        setattr(request, CALLER_ATTRIBUTE, caller)
        setattr(request, ARRIVAL_ATTRIBUTE, arrival)
        task = asyncio.current_task()
        if task is None:
            raise RuntimeError("the relay handler runs inside the request's task")
        gone: list[bool] = []
        watcher = asyncio.get_running_loop().create_task(_watch_disconnect(receive, task, gone))
        try:
            try:
                response = await view(request)
            except asyncio.CancelledError:
                raise
            except Exception:  # a bug, not a client mistake: logged, and a 500 the client's SDK can read
                log.exception("unhandled error on %s", scope["path"])
                response = views.error_response(inbound, GatewayError(
                    500, "The gateway failed on this request; the error is in the gateway's log.",
                    code="internal_error"))
            mark_served_open(response, caller)
            await _send(response, send)
        except asyncio.CancelledError:
            if not gone:
                raise
            task.uncancel()  # the client went away: nothing more to send, and the server needs no error
        finally:
            watcher.cancel()


async def _watch_disconnect(receive: Receive, task: asyncio.Task[Any], gone: list[bool]) -> None:
    message = await receive()
    if message["type"] == "http.disconnect":
        gone.append(True)
        task.cancel()


async def _send(response: HttpResponseBase, send: Send) -> None:
    headers = encoded_header_items(response)
    frames = getattr(response, "source", None)  # the engine's frames are bytes already
    try:
        await send({"type": "http.response.start", "status": response.status_code, "headers": headers})
        if isinstance(response, HttpResponse):  # not streaming: the whole body is in memory
            await send({"type": "http.response.body", "body": response.content})
            return
        if frames is None:  # any other streaming response: Django's own async iteration
            frames = aiter(cast(StreamingHttpResponse, response))  # HttpResponseBase's other kind
        async for frame in frames:
            await send({"type": "http.response.body", "body": frame, "more_body": True})
        await send({"type": "http.response.body", "body": b""})
    finally:
        # Closing runs the generator's own clean-up (the provider connection, the attempt's outcome, health,
        # audit) now, also when the client went away mid-stream or before its first frame, rather than
        # whenever the garbage collector finds it.
        close = getattr(frames, "aclose", None)
        if close is not None:
            await close()

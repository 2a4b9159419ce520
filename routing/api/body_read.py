"""Reading a request body from ASGI: into memory, refused while it arrives when too large or too slow.

Every handler reads its body here (the relay handler, the Django handler of the other ``/v1`` paths and the
probes, and the full Django handler of the admin and the auditor pages), so no path buffers an unlimited body
or waits for one forever, and none spools it to a temporary file, a blocking write on the event loop:

* **size**: ``GOMODEL_MAX_BODY_BYTES`` for ``/v1/``; Django's ``DATA_UPLOAD_MAX_MEMORY_SIZE`` (2.5 MB)
  everywhere else, whose forms are small. A declared ``Content-Length`` over the limit is refused before
  a byte is read, a chunked body as soon as its bytes pass it: 413.
* **time**: the whole upload must arrive within ``GOMODEL_BODY_TIMEOUT`` of the request's arrival, or
  408 (routing/api/slow_uploads.py); a client that trickles a byte a second holds no worker for longer.

Both refusals close the connection (``Connection: close``): the rest of the body is not worth reading.
The time limit runs from the request's arrival (routing/api/arrival.py), which is also when its deadline starts.
"""

from __future__ import annotations

import asyncio

from django.http import HttpResponse

from routing.api import views
from routing.api.arrival import Arrival
from routing.api.asgi_types import Receive, Scope
from routing.api.slow_uploads import UploadTooSlow, watch_upload
from routing.gateway.gateway_error import GatewayError
from routing.ops.settings_cache import cached_settings

API_PREFIX = "/v1/"


class ClientGone(Exception):
    """The client disconnected before its whole body arrived: there is nobody to answer."""


class BodyRefused(Exception):
    """The body is over its path's limit (413) or did not arrive in time (408)."""

    def __init__(self, status: int, message: str, code: str) -> None:
        super().__init__(message)
        self.status = status
        self.message = message
        self.code = code


def body_limit(path: str) -> int:
    """The largest body ``path`` accepts, in bytes."""
    if path.startswith(API_PREFIX):
        return int(cached_settings.GOMODEL_MAX_BODY_BYTES)
    # Django lets DATA_UPLOAD_MAX_MEMORY_SIZE be None (no limit); here a body always has one.
    other = cached_settings.DATA_UPLOAD_MAX_MEMORY_SIZE
    return int(other) if other is not None else int(cached_settings.GOMODEL_MAX_BODY_BYTES)


async def read_body(scope: Scope, receive: Receive, arrival: Arrival) -> bytes:
    """The whole body of the request ``scope`` describes; BodyRefused past its limit or its time, ClientGone
    when the client leaves first."""
    limit = body_limit(scope["path"])
    declared = _declared_length(scope)
    if declared is not None and declared > limit:
        raise _too_large(limit)
    timeout = float(cached_settings.GOMODEL_BODY_TIMEOUT)
    try:
        watch = watch_upload(arrival.monotonic + timeout, timeout)
    except UploadTooSlow:
        raise _too_slow(timeout) from None
    try:
        return await _read(receive, limit)
    except asyncio.CancelledError:
        if watch.cut_off():
            raise _too_slow(timeout) from None
        raise
    finally:
        watch.end()


async def _read(receive: Receive, limit: int) -> bytes:
    message = await receive()
    if message["type"] == "http.disconnect":
        raise ClientGone
    first: bytes = message.get("body", b"")
    if not message.get("more_body", False):  # the usual case: the whole body in one message
        if len(first) > limit:
            raise _too_large(limit)
        return first
    parts = [first]
    size = len(first)
    while True:
        if size > limit:
            raise _too_large(limit)
        message = await receive()
        if message["type"] == "http.disconnect":
            raise ClientGone
        chunk: bytes = message.get("body", b"")
        size += len(chunk)
        parts.append(chunk)
        if not message.get("more_body", False):
            break
    if size > limit:
        raise _too_large(limit)
    return b"".join(parts)


def _declared_length(scope: Scope) -> int | None:
    for name, value in scope.get("headers", ()):
        if name.lower() == b"content-length":
            text = value.strip()
            return int(text) if text.isdigit() and len(text) < 20 else None
    return None


def _too_large(limit: int) -> BodyRefused:
    return BodyRefused(413, f"The request body is larger than the limit of {limit} bytes.", "request_too_large")


def _too_slow(timeout: float) -> BodyRefused:
    return BodyRefused(408, f"The request body did not arrive within {timeout:g}s (GOMODEL_BODY_TIMEOUT).",
                       "request_timeout")


def refusal_response(scope: Scope, refusal: BodyRefused) -> HttpResponse:
    """The refusal as an answer: in the client's error envelope on ``/v1``, short plain text elsewhere."""
    if scope["path"].startswith(API_PREFIX):
        exc = GatewayError(refusal.status, refusal.message, code=refusal.code, error_class="permanent",
                           headers={"Connection": "close"})
        return views.error_response(views.inbound_of_scope(scope), exc)
    response = HttpResponse(refusal.message + "\n", status=refusal.status, content_type="text/plain; charset=utf-8")
    response["Connection"] = "close"
    return response


def with_length(scope: Scope, body: bytes) -> Scope:
    """``scope`` with the body's real length when the client sent none (a chunked upload), so Django's form
    parsing and its own size check see the body that arrived."""
    headers = scope.get("headers", ())
    if not body or any(name.lower() == b"content-length" for name, _ in headers):
        return scope
    return {**scope, "headers": [*headers, (b"content-length", str(len(body)).encode("ascii"))]}

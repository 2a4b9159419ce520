"""The client's answer when its body is bytes already: a Django ``HttpResponse``, built in fewer steps.

``HttpResponse(body, content_type=..., status=...)`` checks the status, converts the Content-Type through the
header charset check, asks ``make_bytes`` about the body and builds a ``SimpleCookie``: about twenty Python calls
for what, on a relayed JSON answer, is bytes and an ASCII content type. ``BytesResponse`` sets the same
attributes directly (tests/gateway/test_bytes_response.py holds it to ``HttpResponse`` attribute by attribute),
stores its headers through ``set_headers`` (which falls back to Django's conversion for anything unusual), and
makes the cookie jar only when something reads it (the relay handler never does; Django's handler does).
It relies on ``HttpResponseBase``'s attribute names, with Django pinned in pyproject.toml.
"""

from __future__ import annotations

from collections.abc import Callable, Mapping
from http.cookies import SimpleCookie

from django.http import HttpResponse
from django.http.response import ResponseHeaders
from django.utils.functional import cached_property

from routing.gateway.response_headers import set_headers


class BytesResponse(HttpResponse):
    """An ``HttpResponse`` of ``body`` (bytes), its Content-Type and other headers set as Django would set them."""

    def __init__(self, body: bytes, content_type: str, headers: Mapping[str, str] | None = None,
                 status: int = 200) -> None:
        if not 100 <= status <= 599:
            raise ValueError("HTTP status code must be an integer from 100 to 599.")
        self.headers = ResponseHeaders({})
        set_headers(self, {"Content-Type": content_type})
        if headers:
            set_headers(self, headers)
        self._charset = None
        self._resource_closers: list[Callable[[], object]] = []
        self._handler_class = None
        self.closed = False
        self.status_code = status
        self._reason_phrase = None
        self._container = [body]

    @cached_property
    def cookies(self) -> SimpleCookie:  # type: ignore[override]
        return SimpleCookie()

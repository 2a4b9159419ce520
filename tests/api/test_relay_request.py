"""RelayRequest is the request ASGIRequest would build, field by field, for every kind of scope."""

from __future__ import annotations

import io

import pytest
from django.core.handlers.asgi import ASGIRequest
from django.test import override_settings

from routing.api import relay_request
from routing.api.relay_request import RelayRequest
from routing.api.views import client_headers

SDK_HEADERS = [
    (b"host", b"127.0.0.1:8000"),
    (b"accept-encoding", b"gzip, deflate"),
    (b"connection", b"keep-alive"),
    (b"accept", b"application/json"),
    (b"content-type", b"application/json"),
    (b"user-agent", b"OpenAI/Python 2.8.1"),
    (b"authorization", b"Bearer gm-abc"),
    (b"content-length", b"71"),
]

SCOPES = {
    "sdk": {"headers": SDK_HEADERS},
    "repeated and underscored headers": {"headers": [
        (b"x-api-key", b"one"), (b"x_api_key", b"spoof"), (b"X-Api-Key", b"two"), (b"accept", b"a"),
        (b"accept", b"b"), (b"content-type", b"application/json"), (b"content-type", b"text/plain")]},
    "content type with a charset": {"headers": [(b"content-type", b"application/json; charset=latin-1")]},
    "content type with an unknown charset": {"headers": [(b"content-type", b"application/json; charset=nope")]},
    "content type with an odd case": {"headers": [(b"content-type", b"Application/JSON")]},
    "no content type": {"headers": [(b"accept", b"*/*")]},
    "latin-1 value": {"headers": [(b"x-note", "caf\xe9".encode("latin-1"))]},
    "latin-1 name": {"headers": [("x-stra\xdfe".encode("latin-1"), b"v"), (b"x-Mixed-Case", b"w")]},
    "query string as bytes": {"query_string": b"a=1&b=%C3%A9", "headers": SDK_HEADERS},
    "query string as str": {"query_string": "a=1", "headers": []},
    "root path": {"root_path": "/gw", "path": "/gw/v1/chat/completions", "headers": SDK_HEADERS},
    "no client, no server": {"client": None, "server": None, "headers": SDK_HEADERS},
    "lower-case method": {"method": "post", "headers": []},
}


def _scope(extra: dict) -> dict:
    scope = {"type": "http", "method": "POST", "path": "/v1/chat/completions", "query_string": b"",
             "root_path": "", "client": ("127.0.0.1", 50123), "server": ("127.0.0.1", 8000), "scheme": "http"}
    scope.update(extra)
    return scope


def _fields(request) -> dict:
    fields = dict(vars(request))
    fields.pop("lower_headers", None)  # ours alone: held to views.client_headers below
    body = fields.pop("_stream").read()
    return {**fields, "body": body, "GET": request.GET.dict(), "COOKIES": request.COOKIES,
            "encoding": request.encoding, "scheme": request.scheme}


@pytest.mark.parametrize("name", list(SCOPES))
def test_a_relay_request_has_every_field_an_asgi_request_has(name: str) -> None:
    scope = _scope(SCOPES[name])
    ours, django_s = RelayRequest(scope, b'{"model": "m"}'), ASGIRequest(scope, io.BytesIO(b'{"model": "m"}'))
    assert _fields(ours) == _fields(django_s)
    assert ours.lower_headers == client_headers(django_s)  # the headers it collected, as the views read them
    assert ours.lower_headers == {name.lower(): value for name, value in django_s.headers.items()}


def test_the_name_table_gives_the_same_request_once_full() -> None:
    scope = _scope(SCOPES["repeated and underscored headers"])
    expected = _fields(ASGIRequest(scope, io.BytesIO(b"")))
    saved = dict(relay_request._META_KEYS)
    relay_request._META_KEYS.clear()
    try:
        for index in range(relay_request.MAX_KNOWN_NAMES + 10):  # a client sending ever new header names
            RelayRequest(_scope({"headers": [(f"x-n{index}".encode(), b"v")]}), b"")
        assert len(relay_request._META_KEYS) == relay_request.MAX_KNOWN_NAMES
        assert _fields(RelayRequest(scope, b"")) == expected
    finally:
        relay_request._META_KEYS.clear()
        relay_request._META_KEYS.update(saved)


@override_settings(FORCE_SCRIPT_NAME="/forced")
def test_a_forced_script_name_is_applied_as_django_applies_it() -> None:
    scope = _scope({"path": "/forced/v1/chat/completions", "root_path": "/gw", "headers": SDK_HEADERS})
    assert _fields(RelayRequest(scope, b"")) == _fields(ASGIRequest(scope, io.BytesIO(b"")))

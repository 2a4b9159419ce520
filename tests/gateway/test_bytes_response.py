"""``BytesResponse`` is the ``HttpResponse`` Django would build for the same bytes and headers, attribute by
attribute. (Every JSON answer the engine relays is one, so the suite's tests through Django's test client and
through the relay handler read it as the clients do.)"""

from __future__ import annotations

from typing import Any

import pytest
from django.http import HttpResponse

from routing.gateway.bytes_response import BytesResponse

BODY = b'{"id":"chatcmpl-1","choices":[]}'
HEADERS = {"X-Request-Id": "abc", "X-GoModel-Target": "m\u00e9t\u00e9o", "X-GoModel-Attempts": "1"}


def django_built(body: bytes, content_type: str, headers: dict[str, str], status: int = 200) -> HttpResponse:
    response = HttpResponse(body, content_type=content_type, status=status)
    for name, value in headers.items():
        response[name] = value
    return response


def state_of(response: HttpResponse) -> dict[str, Any]:
    return {name: value for name, value in vars(response).items() if name not in ("headers", "cookies")}


@pytest.mark.parametrize(("content_type", "headers", "status"), [
    ("application/json", HEADERS, 200),
    ("application/json; charset=utf-8", {}, 201),
    ("text/event-stream", {"Cache-Control": "no-cache"}, 599),
])
def test_it_holds_what_httpresponse_holds(content_type: str, headers: dict[str, str], status: int) -> None:
    ours, django = BytesResponse(BODY, content_type, headers, status), django_built(BODY, content_type, headers, status)
    assert state_of(ours) == state_of(django)
    assert ours.headers._store == django.headers._store  # the non-ASCII value is MIME-encoded as Django does
    assert ours.serialize() == django.serialize()
    assert (ours.content, ours.status_code, ours.reason_phrase, ours.charset) == \
        (django.content, django.status_code, django.reason_phrase, django.charset)


def test_its_cookie_jar_is_made_when_read_and_works() -> None:
    response = BytesResponse(BODY, "application/json")
    assert "cookies" not in vars(response)
    response.set_cookie("session", "v")
    assert response.cookies["session"].value == "v"
    assert "Set-Cookie: session=v" in response.cookies.output()


def test_a_status_out_of_range_is_refused_as_django_refuses_it() -> None:
    with pytest.raises(ValueError, match="from 100 to 599"):
        BytesResponse(BODY, "application/json", status=600)
    with pytest.raises(ValueError, match="from 100 to 599"):
        HttpResponse(BODY, status=600)

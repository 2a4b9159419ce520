"""The response headers set without Django's per-header conversion end up as Django itself stores them."""

from __future__ import annotations

import pytest
from django.http import BadHeaderError, HttpResponse

from routing.gateway.response_headers import encoded_header_items, set_headers

HEADERS = {"X-Request-Id": "abc123", "X-GoModel-Target": "sim/instant", "X-GoModel-Cost-Usd": "0.00001200",
           "X-GoModel-Category": "modèle", "X-GoModel-Name": "名前", "X-Tab": "a\tb"}


def test_the_stored_headers_are_djangos() -> None:
    expected = HttpResponse(b"{}", content_type="application/json")
    fast = HttpResponse(b"{}", content_type="application/json")
    for name, value in HEADERS.items():
        expected[name] = value
    set_headers(fast, HEADERS)
    assert fast.headers._store == expected.headers._store
    assert list(fast.items()) == list(expected.items())
    assert fast["x-gomodel-name"] == expected["X-GoModel-Name"]  # MIME-encoded by Django, both ways


@pytest.mark.parametrize("headers", [{"X-Bad": "a\r\nSet-Cookie: x"}, {"X-Bad\n": "a"}])
def test_a_line_break_is_refused_as_django_refuses_it(headers: dict[str, str]) -> None:
    with pytest.raises(BadHeaderError):
        set_headers(HttpResponse(b""), headers)


@pytest.mark.parametrize("headers", [HEADERS, {}, {"X-Empty": "", "X-Latin": "caf\u00e9"}])
def test_the_encoded_headers_are_each_header_encoded(headers: dict[str, str]) -> None:
    response = HttpResponse(b"{}", content_type="application/json")
    set_headers(response, headers)
    assert encoded_header_items(response) == [(name.encode("latin-1"), value.encode("latin-1"))
                                              for name, value in response.items()]

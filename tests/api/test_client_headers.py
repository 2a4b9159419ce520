"""The views' lower-case header map is the one Django's ``request.headers`` gives, lower-cased."""

from __future__ import annotations

import io

from django.core.handlers.asgi import ASGIRequest
from django.test import RequestFactory

from routing.api.views import client_headers


def _expected(request: object) -> dict[str, str]:
    return {name.lower(): value for name, value in request.headers.items()}  # type: ignore[attr-defined]


def test_a_test_client_request() -> None:
    request = RequestFactory().post("/v1/chat/completions", data=b"{}", content_type="application/json",
                                    headers={"X-GoModel-Tier": "hard", "Anthropic-Version": "2023-06-01"})
    assert client_headers(request) == _expected(request)
    assert client_headers(request)["x-gomodel-tier"] == "hard"


def test_an_asgi_request_with_odd_names() -> None:
    headers = [(b"host", b"127.0.0.1"), (b"content-type", b"application/json"), (b"content-length", b"2"),
               (b"x_under_score", b"a"), (b"x-dup", b"1"), (b"x-dup", b"2"), ("x-\u00df\u00b5".encode("latin-1"), b"b"),
               (b"content_type", b"text/plain")]
    scope = {"type": "http", "method": "POST", "path": "/v1/chat/completions", "query_string": b"",
             "root_path": "", "headers": headers, "client": ("127.0.0.1", 1), "server": ("127.0.0.1", 8000)}
    request = ASGIRequest(scope, io.BytesIO(b"{}"))
    assert client_headers(request) == _expected(request)
    assert list(client_headers(request)) == list(_expected(request))

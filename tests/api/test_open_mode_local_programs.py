"""``GOMODEL_AUTH=open`` serves local programs only: a web page the local user has open (cross-site ``Origin``,
``Sec-Fetch-Site``, a ``text/plain`` body) or a rebound host name is refused, curl and the SDKs are served.

Through Django's test client (the views' own authentication), the ASGI handlers with scripted ``receive`` and
``send`` (authentication from the scope, before the body), and a real gateway process with the OpenAI and
Anthropic SDKs.
"""

from __future__ import annotations

import asyncio
import json
from dataclasses import dataclass
from pathlib import Path
from typing import Any

import anthropic
import httpx2
import openai
import pytest
from django.test import Client

from routing.api.django_handler import ProxyASGIHandler
from routing.api.relay_handler import RelayHandler
from routing.config.runtime import runtime
from routing.core.table import KeySpec, ModelSpec, ProviderSpec, RoutingTable
from routing.models import hash_secret
from tests.e2e.conftest import fresh_database
from tests.gateway_process import run_gateway

pytestmark = pytest.mark.django_db

SECRET = "gm-open-mode-test-key-0123456789"
CHAT = {"model": "nothing-by-this-name", "messages": [{"role": "user", "content": "hi"}]}
SERVED = 404  # past access and every body check: the model is unknown


@pytest.fixture(autouse=True)
def open_mode(settings: Any) -> None:
    settings.GOMODEL_AUTH = "open"
    settings.ALLOWED_HOSTS = ["127.0.0.1", "localhost", "[::1]", "testserver", "gateway.internal", ".corp.example"]
    runtime.swap(RoutingTable.build(version=1, providers=[ProviderSpec("p", "openai", "http://127.0.0.1:9/v1")],
                                    models=[ModelSpec(name="m", provider="p", upstream="m")],
                                    keys=[KeySpec(id=1, name="k", secret_hash=hash_secret(SECRET))]))


def post(client: Client, path: str = "/v1/chat/completions", content_type: str = "application/json",
         **headers: Any) -> Any:
    return client.post(path, json.dumps(CHAT), content_type=content_type, **headers)


# -- the ASGI handlers, as in production: authentication from the scope, before the body ------------------


def scope(path: str, method: str, headers: list[tuple[bytes, bytes]]) -> dict[str, Any]:
    return {"type": "http", "asgi": {"version": "3.0"}, "http_version": "1.1", "method": method, "scheme": "http",
            "path": path, "raw_path": path.encode(), "query_string": b"", "root_path": "",
            "headers": [(b"content-length", b"1000000"), *headers],
            "client": ("127.0.0.1", 5000), "server": ("127.0.0.1", 8000)}


class UnreadBody:
    def __init__(self) -> None:
        self.sent: list[dict[str, Any]] = []

    async def receive(self) -> dict[str, Any]:
        raise AssertionError("the body was read before the sender was checked")

    async def send(self, message: dict[str, Any]) -> None:
        self.sent.append(message)


JSON = (b"content-type", b"application/json")


@dataclass
class Answer:
    status: int
    json: Any


def asgi(path: str, method: str, headers: list[tuple[bytes, bytes]]) -> Answer:
    """The answer of the relay handler (and the Django handler behind it) to a request from 127.0.0.1."""
    body = json.dumps(CHAT).encode() if method == "POST" else b""
    pieces = [{"type": "http.request", "body": body, "more_body": False}]
    sent: list[dict[str, Any]] = []

    async def receive() -> dict[str, Any]:
        if pieces:
            return pieces.pop()
        await asyncio.Event().wait()  # then nothing: the client waits for its answer
        raise AssertionError("unreachable")

    async def send(message: dict[str, Any]) -> None:
        sent.append(message)

    request = scope(path, method, headers)
    request["headers"] = [(b"content-length", str(len(body)).encode()), *headers]
    asyncio.run(asyncio.wait_for(RelayHandler(fallback=ProxyASGIHandler())(request, receive, send), 5))
    content = b"".join(m.get("body", b"") for m in sent if m["type"] == "http.response.body")
    return Answer(sent[0]["status"], json.loads(content))


@pytest.mark.parametrize("host", ["localhost", "localhost:8000", "127.0.0.1:8000", "127.9.0.1", "[::1]:8000",
                                  "LOCALHOST:1", "gateway.internal:8000", "ai.corp.example", None])
def test_it_serves_a_local_program_addressing_a_loopback_or_allowed_host(host: str | None) -> None:
    headers = [(b"host", host.encode())] if host is not None else []  # none: the server's own loopback address
    assert asgi("/v1/chat/completions", "POST", [*headers, JSON]).status == SERVED
    assert asgi("/v1/models", "GET", headers).status == 200


@pytest.mark.parametrize("host", ["attacker.example", "attacker.example:8000", "127.0.0.1.attacker.example",
                                  "localhost.attacker.example", "10.0.0.5:8000"])
def test_it_refuses_a_rebound_host_name(host: str) -> None:
    for path, method, headers in [("/v1/chat/completions", "POST", [JSON]), ("/v1/models", "GET", []),
                                  ("/v1/ledger/entry/some-key", "GET", []), ("/v1/routing/explain", "POST", [JSON])]:
        answer = asgi(path, method, [(b"host", host.encode()), *headers])
        assert answer.status == 403, path
        error = answer.json["error"]
        assert error["code"] == "not_a_local_program"
        assert "neither a loopback name" in error["message"]
        assert "http://127.0.0.1:<port>/v1" in error["message"]


def test_a_host_served_before_is_refused_once_allowed_hosts_drops_it(settings: Any) -> None:
    host = [(b"host", b"gateway.internal:8000")]
    assert asgi("/v1/models", "GET", host).status == 200
    settings.ALLOWED_HOSTS = ["127.0.0.1", "localhost"]  # the verdict kept for this Host is for the old list
    assert asgi("/v1/models", "GET", host).status == 403
    settings.ALLOWED_HOSTS = ["gateway.internal"]
    assert asgi("/v1/models", "GET", host).status == 200


def test_hosts_a_client_invents_are_checked_each_time_but_never_fill_memory() -> None:
    from routing.api.gateway_auth import _LOCAL_HOSTS, is_local_host

    invented = [f"h{i}.attacker.example" for i in range(3 * _LOCAL_HOSTS.LIMIT)]
    assert not any(is_local_host(host) for host in invented)
    assert len(_LOCAL_HOSTS.verdicts) <= _LOCAL_HOSTS.LIMIT
    assert is_local_host("localhost:9")  # a full table still gives every other Host its verdict
    assert not is_local_host(invented[-1])


@pytest.mark.parametrize("origin", ["https://attacker.example", "http://localhost:3000", "null",
                                    "http://127.0.0.1:8001", "http://gateway.internal:8000"])
def test_it_refuses_a_page_on_another_origin(client: Client, origin: str) -> None:
    for response in (post(client, HTTP_HOST="127.0.0.1:8000", HTTP_ORIGIN=origin),
                     client.get("/v1/ledger/entry/some-key", HTTP_HOST="127.0.0.1:8000", HTTP_ORIGIN=origin)):
        assert response.status_code == 403
        assert "a web page on another site sent it" in response.json()["error"]["message"]


@pytest.mark.parametrize(("origin", "host"), [("http://127.0.0.1:8000", "127.0.0.1:8000"),
                                              ("http://localhost", "localhost:80"),
                                              ("http://[::1]:8000", "[::1]:8000")])
def test_it_serves_the_gateways_own_origin(client: Client, origin: str, host: str) -> None:
    assert post(client, HTTP_HOST=host, HTTP_ORIGIN=origin, HTTP_SEC_FETCH_SITE="same-origin").status_code == SERVED


@pytest.mark.parametrize("site", ["cross-site", "same-site", "Cross-Site"])
def test_it_refuses_what_the_browser_says_another_origin_sent(client: Client, site: str) -> None:
    for response in (post(client, HTTP_SEC_FETCH_SITE=site), client.get("/v1/models", HTTP_SEC_FETCH_SITE=site)):
        assert response.status_code == 403
        assert f"Sec-Fetch-Site: {site}" in response.json()["error"]["message"]


@pytest.mark.parametrize("content_type", ["text/plain", "application/x-www-form-urlencoded",
                                          "multipart/form-data; boundary=x", "application/jsonx"])
def test_it_refuses_a_body_not_declared_json_with_415(client: Client, content_type: str) -> None:
    response = post(client, content_type=content_type)
    assert response.status_code == 415
    error = response.json()["error"]
    assert error["code"] == "unsupported_media_type"
    assert "send Content-Type: application/json" in error["message"]


def test_it_takes_json_with_parameters_and_answers_in_anthropics_envelope(client: Client) -> None:
    assert post(client, content_type="application/json; charset=utf-8").status_code == SERVED
    refused = post(client, "/v1/messages", content_type="text/plain")
    assert refused.status_code == 415
    assert refused.json()["type"] == "error"
    assert "application/json" in refused.json()["error"]["message"]
    page = post(client, "/v1/messages", HTTP_ORIGIN="https://attacker.example")
    assert page.status_code == 403
    assert page.json()["error"]["type"] == "permission_error"


def test_a_valid_key_is_served_from_a_page_and_any_host() -> None:
    # The key is the protection a page cannot have: with it, a browser application may call the gateway.
    keyed = asgi("/v1/chat/completions", "POST", [(b"host", b"gateway.example.com"), (b"content-type", b"text/plain"),
                                                  (b"origin", b"https://app.example"),
                                                  (b"authorization", f"Bearer {SECRET}".encode())])
    assert keyed.status == SERVED


# -- refused before the body is read ----------------------------------------------------------------------------


@pytest.mark.parametrize(("path", "method", "headers", "status"), [
    ("/v1/chat/completions", "POST", [(b"host", b"127.0.0.1:8000"), (b"content-type", b"text/plain")], 415),
    ("/v1/messages", "POST", [(b"host", b"attacker.example:8000"), (b"content-type", b"application/json")], 403),
    ("/v1/responses", "POST", [(b"host", b"localhost:8000"), (b"origin", b"https://attacker.example"),
                               (b"content-type", b"application/json")], 403),
    ("/v1/ledger/claim", "POST", [(b"host", b"localhost:8000"), (b"content-type", b"text/plain")], 415),
    ("/v1/models", "GET", [(b"host", b"attacker.example")], 403),
    ("/v1/ledger/entry/k", "GET", [(b"host", b"127.0.0.1:8000"), (b"sec-fetch-site", b"cross-site")], 403),
])
def test_the_handlers_refuse_a_page_before_reading_the_body(path: str, method: str,
                                                           headers: list[tuple[bytes, bytes]], status: int) -> None:
    peer = UnreadBody()
    handler = RelayHandler(fallback=ProxyASGIHandler())
    asyncio.run(asyncio.wait_for(handler(scope(path, method, headers), peer.receive, peer.send), 5))
    assert peer.sent[0]["status"] == status


# -- a real gateway process: curl-like clients and the SDKs keep working ----------------------------------------


def test_a_real_gateway_serves_the_sdks_and_refuses_a_cross_site_page(tmp_path: Path) -> None:
    # A database of its own: the requests it serves are audited, and the suite's test database is shared by the
    # tests that count revisions.
    env = {"GOMODEL_AUTH": "open", "GOMODEL_MASTER_KEY": ""}
    with fresh_database("open_mode") as url, run_gateway(tmp_path, {**env, "DATABASE_URL": url}) as gateway:
        base = gateway.base_url
        sdk = openai.OpenAI(base_url=f"{base}/v1", api_key="unused", max_retries=0)
        with pytest.raises(openai.NotFoundError):  # served: the model is unknown to this configuration
            sdk.chat.completions.create(model="nothing-by-this-name", messages=[{"role": "user", "content": "hi"}])
        assert isinstance(sdk.models.list().data, list)
        claude = anthropic.Anthropic(base_url=base, api_key="unused", max_retries=0)
        with pytest.raises(anthropic.NotFoundError):
            claude.messages.create(model="nothing-by-this-name", max_tokens=5,
                                   messages=[{"role": "user", "content": "hi"}])
        # What a page's fetch(..., {mode: "no-cors", body: "..."}) sends, and a rebound name.
        page = httpx2.post(f"{base}/v1/chat/completions", content=json.dumps(CHAT), timeout=10,
                           headers={"Content-Type": "text/plain;charset=UTF-8", "Origin": "https://attacker.example",
                                    "Sec-Fetch-Site": "cross-site"})
        assert page.status_code == 403
        plain = httpx2.post(f"{base}/v1/chat/completions", content=json.dumps(CHAT), timeout=10,
                            headers={"Content-Type": "text/plain"})
        assert plain.status_code == 415
        rebound = httpx2.get(f"{base}/v1/models", headers={"Host": f"attacker.example:{gateway.port}"}, timeout=10)
        assert rebound.status_code == 403

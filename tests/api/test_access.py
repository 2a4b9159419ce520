"""Who may call /v1: keys by default (also while none exists), open to loopback only when GOMODEL_AUTH says so.

Requests go through Django's test client (the views' own authentication) and through the two ASGI handlers
with scripted ``receive``/``send`` (authentication from the scope, before any body is read).
"""

from __future__ import annotations

import asyncio
import json
import time
from typing import Any

import pytest
from django.http import HttpResponse
from django.test import Client

from routing.api import relay_handler
from routing.api.django_handler import ProxyASGIHandler
from routing.api.gateway_auth import CALLER_ATTRIBUTE
from routing.api.relay_handler import RelayHandler
from routing.config.runtime import runtime
from routing.core.table import KeySpec, ModelSpec, ProviderSpec, RoutingTable
from routing.models import hash_secret

pytestmark = pytest.mark.django_db

SECRET = "gm-access-test-key-0123456789"
LIMITED_SECRET = "gm-access-limited-key-0123456789"
EXPIRED_SECRET = "gm-access-expired-key-0123456789"
KEY = KeySpec(id=11, name="full", secret_hash=hash_secret(SECRET))
LIMITED = KeySpec(id=12, name="limited", secret_hash=hash_secret(LIMITED_SECRET), allowed_models=frozenset({"allowed"}))
EXPIRED = KeySpec(id=13, name="old", secret_hash=hash_secret(EXPIRED_SECRET), expires_at=time.time() - 60)
CHAT = {"model": "nothing-by-this-name", "messages": [{"role": "user", "content": "hi"}]}


def keyed_table(*keys: KeySpec, version: int = 1) -> RoutingTable:
    return RoutingTable.build(
        version=version,
        providers=[ProviderSpec("p", "openai", "http://127.0.0.1:9/v1")],
        models=[ModelSpec(name="allowed", provider="p", upstream="a"),
                ModelSpec(name="other", provider="p", upstream="b")],
        keys=list(keys),
    )


def post(client: Client, path: str, body: dict[str, Any] | None = None, **extra: Any) -> Any:
    return client.post(path, json.dumps(body if body is not None else CHAT), content_type="application/json", **extra)


def bearer(secret: str) -> dict[str, str]:
    return {"HTTP_AUTHORIZATION": f"Bearer {secret}"}


@pytest.mark.parametrize(
    ("method", "path", "envelope"),
    [("POST", "/v1/chat/completions", "openai"), ("POST", "/v1/messages", "anthropic"), ("GET", "/v1/models", "openai"),
     ("POST", "/v1/routing/explain", "openai"), ("POST", "/v1/ledger/claim", "openai"),
     ("GET", "/v1/ledger/entry/some-key", "openai"), ("GET", "/v1/no-such-endpoint", "openai")],
)
def test_it_refuses_every_request_while_no_key_exists_and_says_how_to_create_one(
        client: Client, method: str, path: str, envelope: str) -> None:
    runtime.swap(RoutingTable(version=1))
    response = post(client, path) if method == "POST" else client.get(path)
    assert response.status_code == 401
    assert response["WWW-Authenticate"] == 'Bearer realm="gomodel"'
    body = response.json()
    if envelope == "anthropic":
        assert body["type"] == "error"
        assert body["error"]["type"] == "authentication_error"
    else:
        assert body["error"]["code"] == "invalid_api_key"
    message = body["error"]["message"]
    assert "refuses every request" in message
    assert "GOMODEL_MASTER_KEY" in message
    assert "manage.py createkey" in message
    assert "admin" in message


def test_it_needs_a_valid_live_key_once_keys_exist(client: Client) -> None:
    runtime.swap(keyed_table(KEY, EXPIRED))
    missing = post(client, "/v1/chat/completions")
    assert missing.status_code == 401
    assert "Missing gateway key" in missing.json()["error"]["message"]
    wrong = post(client, "/v1/chat/completions", **bearer("gm-not-a-key"))
    assert wrong.status_code == 401
    assert wrong.json()["error"]["message"] == "Invalid gateway key."
    expired = post(client, "/v1/chat/completions", **bearer(EXPIRED_SECRET))
    assert expired.status_code == 401
    assert "expired" in expired.json()["error"]["message"]
    served = post(client, "/v1/chat/completions", **bearer(SECRET))
    assert served.status_code == 404  # past authentication: the model is simply unknown
    by_header = post(client, "/v1/messages", {**CHAT, "max_tokens": 5}, HTTP_X_API_KEY=SECRET)
    assert by_header.status_code == 404


def test_it_stays_closed_when_the_last_key_is_gone(client: Client) -> None:
    runtime.swap(keyed_table(KEY, version=1))
    assert post(client, "/v1/chat/completions", **bearer(SECRET)).status_code == 404
    runtime.swap(keyed_table(version=2))  # what the reload compiles once the last key is revoked or deleted
    assert post(client, "/v1/chat/completions").status_code == 401
    assert post(client, "/v1/chat/completions", **bearer(SECRET)).status_code == 401
    assert client.get("/v1/models").status_code == 401


@pytest.mark.parametrize("peer", ["127.0.0.1", "127.8.9.10", "::1", "::ffff:127.0.0.1"])
def test_it_serves_a_loopback_peer_without_a_valid_key_in_open_mode(client: Client, settings: Any,
                                                                    peer: str) -> None:
    settings.GOMODEL_AUTH = "open"
    runtime.swap(keyed_table())
    assert post(client, "/v1/chat/completions", REMOTE_ADDR=peer).status_code == 404
    # The SDKs insist on sending a key; a local client's placeholder is not held against it.
    assert post(client, "/v1/chat/completions", REMOTE_ADDR=peer, **bearer("unused")).status_code == 404
    assert [m["id"] for m in client.get("/v1/models", REMOTE_ADDR=peer).json()["data"]] == ["allowed", "other"]


@pytest.mark.parametrize(
    ("peer", "headers"),
    [("10.1.2.3", {}), ("192.168.0.7", {}), ("2001:db8::1", {}),
     ("127.0.0.1", {"HTTP_X_FORWARDED_FOR": "127.0.0.1"}), ("127.0.0.1", {"HTTP_FORWARDED": "for=127.0.0.1"}),
     ("127.0.0.1", {"HTTP_X_REAL_IP": "127.0.0.1"})],
)
def test_it_refuses_other_peers_and_relayed_requests_in_open_mode(client: Client, settings: Any, peer: str,
                                                                  headers: dict[str, str]) -> None:
    settings.GOMODEL_AUTH = "open"
    runtime.swap(keyed_table())
    response = post(client, "/v1/chat/completions", REMOTE_ADDR=peer, **headers)
    assert response.status_code == 401
    assert "serves only clients on its own machine" in response.json()["error"]["message"]


def test_it_still_recognises_a_valid_key_in_open_mode(client: Client, settings: Any) -> None:
    settings.GOMODEL_AUTH = "open"
    runtime.swap(keyed_table(LIMITED))
    # From elsewhere a valid key is needed and enough.
    assert post(client, "/v1/chat/completions", REMOTE_ADDR="10.1.2.3", **bearer(LIMITED_SECRET)).status_code == 404
    # A local caller with a key gets that key's model list, not the open one.
    refused = post(client, "/v1/chat/completions", {**CHAT, "model": "other"}, **bearer(LIMITED_SECRET))
    assert refused.status_code == 403
    assert refused.json()["error"]["code"] == "model_not_allowed"


def test_it_answers_403_on_explain_for_a_model_the_key_may_not_use(client: Client) -> None:
    runtime.swap(keyed_table(LIMITED))
    refused = post(client, "/v1/routing/explain", {**CHAT, "model": "other"}, **bearer(LIMITED_SECRET))
    assert refused.status_code == 403
    assert refused.json()["error"]["code"] == "model_not_allowed"
    assert refused.json()["error"]["param"] == "model"
    allowed = post(client, "/v1/routing/explain", {**CHAT, "model": "allowed"}, **bearer(LIMITED_SECRET))
    assert allowed.status_code == 200
    assert allowed.json()["target"] == "allowed"
    anthropic = post(client, "/v1/routing/explain?shape=anthropic", {**CHAT, "model": "other", "max_tokens": 5},
                     **bearer(LIMITED_SECRET))
    assert anthropic.status_code == 403
    assert anthropic.json()["error"]["type"] == "permission_error"


# ---------------------------------------------------------------------------------------------------------
# The ASGI handlers: authentication from the scope, before the body.
# ---------------------------------------------------------------------------------------------------------


def asgi_scope(path: str, method: str = "POST", headers: list[tuple[bytes, bytes]] | None = None,
               client: tuple[str, int] = ("127.0.0.1", 5000)) -> dict[str, Any]:
    return {"type": "http", "asgi": {"version": "3.0"}, "http_version": "1.1", "method": method, "scheme": "http",
            "path": path, "raw_path": path.encode(), "query_string": b"", "root_path": "",
            "headers": [(b"content-type", b"application/json"), (b"content-length", b"1000000"), *(headers or [])],
            "client": client, "server": ("127.0.0.1", 8000)}


class UnreadBody:
    """An ASGI peer whose body never arrives: a handler that waits for it fails the test."""

    def __init__(self) -> None:
        self.sent: list[dict[str, Any]] = []

    async def receive(self) -> dict[str, Any]:
        raise AssertionError("the body was read before the caller was authenticated")

    async def send(self, message: dict[str, Any]) -> None:
        self.sent.append(message)

    @property
    def status(self) -> int:
        return int(self.sent[0]["status"])

    @property
    def body(self) -> dict[str, Any]:
        return json.loads(b"".join(m.get("body", b"") for m in self.sent if m["type"] == "http.response.body"))


async def _must_not_run(request: Any) -> HttpResponse:
    raise AssertionError("the view must not be called")


@pytest.mark.parametrize(("path", "envelope"), [("/v1/chat/completions", "openai"), ("/v1/messages", "anthropic")])
def test_it_answers_401_from_the_relay_handler_without_reading_the_body(
        monkeypatch: pytest.MonkeyPatch, path: str, envelope: str) -> None:
    runtime.swap(keyed_table(KEY))
    monkeypatch.setitem(relay_handler.ROUTES, path, (_must_not_run, envelope))
    peer = UnreadBody()
    handler = RelayHandler(fallback=ProxyASGIHandler())
    asyncio.run(asyncio.wait_for(handler(asgi_scope(path, headers=[(b"x-api-key", b"wrong")]), peer.receive,
                                         peer.send), 5))
    assert peer.status == 401
    if envelope == "anthropic":
        assert peer.body["error"]["type"] == "authentication_error"
    else:
        assert peer.body["error"]["code"] == "invalid_api_key"


@pytest.mark.parametrize(("method", "path"), [("GET", "/v1/models"), ("POST", "/v1/routing/explain"),
                                              ("POST", "/v1/ledger/claim"), ("GET", "/v1/chat/completions"),
                                              ("POST", "/v1/unknown")])
def test_it_answers_401_from_the_django_handler_without_reading_the_body(method: str, path: str) -> None:
    runtime.swap(keyed_table(KEY))
    peer = UnreadBody()
    handler = RelayHandler(fallback=ProxyASGIHandler())
    asyncio.run(asyncio.wait_for(handler(asgi_scope(path, method), peer.receive, peer.send), 5))
    assert peer.status == 401
    assert "Missing gateway key" in peer.body["error"]["message"]


def test_it_hands_the_authenticated_key_to_the_view(monkeypatch: pytest.MonkeyPatch) -> None:
    runtime.swap(keyed_table(KEY))
    seen: list[Any] = []

    async def view(request: Any) -> HttpResponse:
        seen.append(getattr(request, CALLER_ATTRIBUTE).key)
        return HttpResponse(b"{}", content_type="application/json")

    monkeypatch.setitem(relay_handler.ROUTES, "/v1/chat/completions", (view, "openai"))
    sent: list[dict[str, Any]] = []
    pieces = [{"type": "http.request", "body": b"{}", "more_body": False}]

    async def receive() -> dict[str, Any]:
        if pieces:
            return pieces.pop()
        await asyncio.Event().wait()  # then nothing: the client waits for its answer
        raise AssertionError("unreachable")

    async def send(message: dict[str, Any]) -> None:
        sent.append(message)

    scope = asgi_scope("/v1/chat/completions", headers=[(b"authorization", f"Bearer {SECRET}".encode())])
    scope["headers"] = [h for h in scope["headers"] if h[0] != b"content-length"]
    asyncio.run(asyncio.wait_for(RelayHandler(fallback=ProxyASGIHandler())(scope, receive, send), 5))
    assert sent[0]["status"] == 200
    assert seen == [KEY]

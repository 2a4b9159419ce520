"""Bounded input on every path: a body over its limit or too slow is refused while it arrives, the deadline
covers the upload, and a body nested too deeply or carrying a pattern RE2 cannot run is a 400.

The three ASGI handlers are driven in process with scripted ``receive``/``send``; a real gateway process
under uvicorn and under granian is driven over raw sockets for the slow and the oversized clients.
"""

from __future__ import annotations

import asyncio
import json
import re
import socket
from collections.abc import Iterator
from typing import Any

import httpx2
import pytest
from django.test import Client

from routing.api import slow_uploads
from routing.api.arrival import Arrival
from routing.api.body_read import read_body
from routing.api.django_handler import BoundedASGIHandler, ProxyASGIHandler
from routing.api.relay_handler import RelayHandler
from routing.config.runtime import runtime
from routing.core.table import ModelSpec, ProviderSpec, RoutingTable
from routing.simulator import SimulatorServer
from tests.gateway import support
from tests.gateway_process import Gateway, run_gateway

simulator = support.simulator
sim = support.sim
fresh_state = support.fresh_state

CHAT = "/v1/chat/completions"
MESSAGES = "/v1/messages"


@pytest.fixture(autouse=True)
def open_access(settings: Any) -> None:
    """Loopback clients without a key are served: these tests are about bodies, not keys."""
    settings.GOMODEL_AUTH = "open"
    runtime.swap(RoutingTable.build(version=1, providers=[ProviderSpec("p", "openai", "http://127.0.0.1:9/v1")],
                                    models=[ModelSpec(name="m", provider="p", upstream="m")]))


# -- in process: scripted clients -------------------------------------------------------------------------------


def scope(path: str, method: str = "POST", headers: dict[str, str] | None = None) -> dict[str, Any]:
    pairs = [(b"content-type", b"application/json")]
    pairs += [(name.lower().encode(), value.encode()) for name, value in (headers or {}).items()]
    return {"type": "http", "asgi": {"version": "3.0"}, "http_version": "1.1", "method": method, "scheme": "http",
            "path": path, "raw_path": path.encode(), "query_string": b"", "root_path": "", "headers": pairs,
            "client": ("127.0.0.1", 5000), "server": ("127.0.0.1", 8000)}


class ScriptedClient:
    """Sends its body pieces one message at a time; ``stall`` holds the next piece back until set."""

    def __init__(self, pieces: list[bytes], stall_after: int | None = None) -> None:
        self.pieces = list(pieces)
        self.stall_after = stall_after
        self.delivered = 0
        self.stall = asyncio.Event()
        self.sent: list[dict[str, Any]] = []

    async def receive(self) -> dict[str, Any]:
        if self.stall_after is not None and self.delivered >= self.stall_after:
            await self.stall.wait()
        if self.pieces:
            self.delivered += 1
            body = self.pieces.pop(0)
            return {"type": "http.request", "body": body, "more_body": bool(self.pieces)}
        await asyncio.Event().wait()  # the client stays connected and says nothing more
        raise AssertionError("unreachable")

    async def send(self, message: dict[str, Any]) -> None:
        self.sent.append(message)

    @property
    def status(self) -> int:
        return int(next(m["status"] for m in self.sent if m["type"] == "http.response.start"))

    @property
    def headers(self) -> dict[str, str]:
        start = next(m for m in self.sent if m["type"] == "http.response.start")
        return {name.decode().lower(): value.decode() for name, value in start["headers"]}

    @property
    def body(self) -> bytes:
        return b"".join(m.get("body", b"") for m in self.sent if m["type"] == "http.response.body")


def serve(app: Any, request_scope: dict[str, Any], client: ScriptedClient) -> None:
    async def scenario() -> None:
        # Bounded: a handler that waited for the body forever fails the test instead of hanging it.
        await asyncio.wait_for(app(request_scope, client.receive, client.send), timeout=20)

    asyncio.run(scenario())


async def _not_reached(scope: dict[str, Any], receive: Any, send: Any) -> None:
    raise AssertionError("the relay handler passed a relay route on")


def relay() -> RelayHandler:
    return RelayHandler(fallback=_not_reached)


def assert_envelope(client: ScriptedClient, envelope: str, status: int, words: str) -> None:
    assert client.status == status, client.body
    body = json.loads(client.body)
    if envelope == "anthropic":
        assert body["type"] == "error", body
        assert words in body["error"]["message"], body
    else:
        assert words in body["error"]["message"], body
        assert body["error"]["code"] == {413: "request_too_large", 408: "request_timeout"}[status]
    assert client.headers["connection"] == "close"


@pytest.mark.parametrize(("path", "envelope"), [(CHAT, "openai"), (MESSAGES, "anthropic")])
def test_it_refuses_a_declared_length_over_the_limit_before_reading_a_byte(settings: Any, path: str,
                                                                           envelope: str) -> None:
    settings.GOMODEL_MAX_BODY_BYTES = 4096
    client = ScriptedClient([b"{" + b" " * 100])
    serve(relay(), scope(path, headers={"content-length": "10000000000"}), client)
    assert_envelope(client, envelope, 413, "larger than the limit of 4096 bytes")
    assert client.delivered == 0


def test_it_refuses_a_chunked_body_as_soon_as_it_passes_the_limit(settings: Any) -> None:
    settings.GOMODEL_MAX_BODY_BYTES = 4096
    client = ScriptedClient([b"x" * 3000] * 10)  # no Content-Length: only the bytes tell
    serve(relay(), scope(CHAT), client)
    assert_envelope(client, "openai", 413, "4096 bytes")
    assert client.delivered == 2  # the rest was never read


@pytest.mark.parametrize(("path", "envelope"), [(CHAT, "openai"), (MESSAGES, "anthropic")])
def test_it_gives_up_on_a_body_that_trickles(settings: Any, path: str, envelope: str) -> None:
    settings.GOMODEL_BODY_TIMEOUT = 0.3
    client = ScriptedClient([b'{"model": "m", ', b'"messages": []}'], stall_after=1)
    serve(relay(), scope(path), client)
    assert_envelope(client, envelope, 408, "did not arrive within 0.3s (GOMODEL_BODY_TIMEOUT)")


@pytest.mark.parametrize(
    ("method", "path", "envelope"),
    [("POST", "/v1/routing/explain", "openai"), ("POST", "/v1/messages/count_tokens", "anthropic"),
     ("GET", "/v1/models", "openai"), ("GET", "/v1/no-such-endpoint", "openai")],
)
def test_the_other_api_paths_refuse_in_the_clients_envelope(settings: Any, method: str, path: str,
                                                            envelope: str) -> None:
    settings.GOMODEL_MAX_BODY_BYTES = 4096
    settings.GOMODEL_BODY_TIMEOUT = 0.3
    too_large = ScriptedClient([b"x" * 3000] * 3)
    serve(ProxyASGIHandler(), scope(path, method), too_large)
    assert_envelope(too_large, envelope, 413, "4096 bytes")
    trickling = ScriptedClient([b"{", b"}"], stall_after=1)
    serve(ProxyASGIHandler(), scope(path, method), trickling)
    assert_envelope(trickling, envelope, 408, "GOMODEL_BODY_TIMEOUT")


@pytest.mark.parametrize(("handler", "path"), [(ProxyASGIHandler, "/health"), (ProxyASGIHandler, "/metrics"),
                                               (BoundedASGIHandler, "/admin/login/"), (BoundedASGIHandler, "/audit/")])
def test_the_admin_and_the_probes_have_a_smaller_limit_and_answer_in_plain_text(
        settings: Any, handler: type, path: str) -> None:
    settings.GOMODEL_MAX_BODY_BYTES = 1_000_000
    settings.DATA_UPLOAD_MAX_MEMORY_SIZE = 4096
    declared = ScriptedClient([b"x"])
    serve(handler(), scope(path, headers={"content-length": "5000"}), declared)
    chunked = ScriptedClient([b"x" * 3000] * 3)
    serve(handler(), scope(path), chunked)
    for client in (declared, chunked):
        assert client.status == 413
        assert client.headers["content-type"] == "text/plain; charset=utf-8"
        assert client.body == b"The request body is larger than the limit of 4096 bytes.\n"
        assert client.headers["connection"] == "close"
    assert declared.delivered == 0
    assert chunked.delivered == 2


def test_the_admin_gives_up_on_a_body_that_trickles(settings: Any) -> None:
    settings.GOMODEL_BODY_TIMEOUT = 0.3
    client = ScriptedClient([b"username=a", b"&password=b"], stall_after=1)
    serve(BoundedASGIHandler(), scope("/admin/login/", headers={"content-type": "application/x-www-form-urlencoded"}),
          client)
    assert client.status == 408
    assert client.body == b"The request body did not arrive within 0.3s (GOMODEL_BODY_TIMEOUT).\n"


def test_a_read_cancelled_by_anyone_else_stays_cancelled(settings: Any) -> None:
    """A server shutting down cancels a read: that must propagate, not become a 408, and leave nothing watched."""
    settings.GOMODEL_BODY_TIMEOUT = 30

    async def scenario() -> None:
        client = ScriptedClient([b"{", b"}"], stall_after=1)
        reading = asyncio.create_task(read_body(scope(CHAT), client.receive, Arrival.now()))
        await support.eventually(lambda: client.delivered == 1, what="the first piece read")
        reading.cancel()
        with pytest.raises(asyncio.CancelledError):
            await reading
        assert all(not sweeper.reads and not sweeper.cut_off for sweeper in slow_uploads._sweepers.values())

    asyncio.run(scenario())


# -- the deadline covers the upload ------------------------------------------------------------------------------


def test_the_deadline_starts_when_the_request_arrives_not_when_its_body_is_in(sim: SimulatorServer) -> None:
    runtime.swap(support.routing_table(sim.base_url))
    body = json.dumps({"model": "primary", "messages": [{"role": "user", "content": "hi"}]}).encode()
    headers = {"x-gomodel-deadline-ms": "150"}

    async def upload(slow: bool) -> ScriptedClient:
        client = ScriptedClient([body[:10], body[10:]], stall_after=1)
        serving = asyncio.create_task(relay()(scope(CHAT, headers=headers), client.receive, client.send))
        if slow:
            await asyncio.sleep(0.3)  # the upload itself takes longer than the client's deadline
        client.stall.set()
        await asyncio.wait_for(serving, timeout=20)
        return client

    quick = support.run(upload(slow=False))
    assert quick.status == 200, quick.body
    assert len(sim.received("primary")) == 1
    slow = support.run(upload(slow=True))
    assert slow.status == 504, slow.body
    assert json.loads(slow.body)["error"]["code"] == "deadline_exceeded"
    assert len(sim.received("primary")) == 1  # no upstream attempt for the request whose time was spent


# -- JSON nesting and client patterns: 400s naming the problem ---------------------------------------------------


def post(client: Client, path: str, body: bytes, **headers: str) -> Any:
    return client.post(path, body, content_type="application/json", **headers)


def nested(depth: int) -> str:
    return "[" * depth + "]" * depth


@pytest.mark.parametrize(("path", "envelope"), [(CHAT, "openai"), (MESSAGES, "anthropic")])
def test_it_refuses_100_000_nested_arrays_with_a_400(client: Client, path: str, envelope: str) -> None:
    body = f'{{"model": "m", "max_tokens": 5, "messages": [], "metadata": {nested(100_000)}}}'.encode()
    response = post(client, path, body)
    assert response.status_code == 400
    error = response.json()["error"]
    assert "nests objects and arrays deeper than 64 levels" in error["message"]
    if envelope == "openai":
        assert error["code"] == "json_too_deep"


def test_it_finds_deep_nesting_inside_a_body_of_long_strings(client: Client) -> None:
    text = "[{" * 5_000 + "lorem ipsum " * 20_000  # brackets inside strings are text, not nesting
    messages = [{"role": "user", "content": text} for _ in range(5)]
    deep = json.loads("[" * 63 + "]" * 63)  # with the body itself and "metadata": 65 levels
    too_deep = post(client, CHAT, json.dumps({"model": "m", "messages": messages, "metadata": {"x": deep}}).encode())
    assert too_deep.status_code == 400
    assert too_deep.json()["error"]["code"] == "json_too_deep"
    deep = json.loads("[" * 62 + "]" * 62)  # 64 levels: the bound itself is allowed
    fine = post(client, CHAT, json.dumps({"model": "no-such-model", "messages": messages,
                                          "metadata": {"x": deep}}).encode())
    assert fine.status_code == 404, fine.json()  # past every body check: the model is unknown


def test_it_refuses_a_response_format_pattern_re2_cannot_run(client: Client) -> None:
    schema = {"type": "object", "properties": {"code": {"type": "string", "pattern": "^(\\w)\\1$"}}}
    body = {"model": "m", "messages": [{"role": "user", "content": "hi"}],
            "response_format": {"type": "json_schema", "json_schema": {"name": "x", "schema": schema}}}
    response = post(client, CHAT, json.dumps(body).encode())
    assert response.status_code == 400
    error = response.json()["error"]
    assert error["param"] == "response_format"
    assert "/properties/code/pattern: RE2 cannot compile it (invalid escape sequence: \\1)" in error["message"]


@pytest.mark.parametrize(
    ("path", "tool", "param"),
    [(CHAT, {"type": "function", "function": {"name": "f", "parameters": {"pattern": "(?=x)"}}},
      "tools[0].function.parameters"),
     (MESSAGES, {"name": "f", "input_schema": {"properties": {"a": {"pattern": "(a)\\1"}}}}, "tools[0].input_schema")],
)
def test_it_refuses_a_tool_schema_pattern_re2_cannot_run_naming_the_tool(client: Client, path: str,
                                                                         tool: dict[str, Any], param: str) -> None:
    body = {"model": "m", "max_tokens": 5, "messages": [{"role": "user", "content": "hi"}], "tools": [tool]}
    response = post(client, path, json.dumps(body).encode())
    assert response.status_code == 400
    message = response.json()["error"]["message"]
    assert message.startswith(f"{param}: the JSON schema cannot be used: /"), message
    assert "RE2 cannot compile it" in message


# -- a real gateway process: raw sockets ------------------------------------------------------------------------


@pytest.fixture(scope="module", params=["uvicorn", "granian"])
def gateway(request: pytest.FixtureRequest, django_db_setup: None,
            tmp_path_factory: pytest.TempPathFactory) -> Iterator[Gateway]:
    env = {"GOMODEL_AUTH": "open", "GOMODEL_MASTER_KEY": "", "GOMODEL_BODY_TIMEOUT": "1s",
           "GOMODEL_MAX_BODY_BYTES": "100000"}
    with run_gateway(tmp_path_factory.mktemp("body-limits"), env, server=request.param) as running:
        yield running


def exchange(gateway: Gateway, head: str, body: bytes = b"") -> tuple[int, dict[str, str], bytes]:
    """Send ``head`` and ``body``, then read the answer until the gateway closes the connection (the payload
    as sent, chunked or not)."""
    with socket.create_connection(("127.0.0.1", gateway.port), timeout=20) as sock:
        sock.sendall(head.encode() + b"\r\n" + body)
        received = b""
        while True:
            chunk = sock.recv(65536)  # a gateway that waits for the rest of the body times out here
            if not chunk:
                break
            received += chunk
    header_block, _, payload = received.partition(b"\r\n\r\n")
    lines = header_block.decode("latin-1").split("\r\n")
    headers = dict(line.split(": ", 1) for line in lines[1:])
    return int(lines[0].split()[1]), {k.lower(): v for k, v in headers.items()}, payload


def request_head(method: str, path: str, *headers: str) -> str:
    return "".join(f"{line}\r\n" for line in (f"{method} {path} HTTP/1.1", "Host: 127.0.0.1", *headers))


@pytest.mark.services
@pytest.mark.parametrize("path", [CHAT, "/v1/routing/explain", "/admin/login/"])
def test_a_real_server_answers_408_to_a_client_that_stops_sending(gateway: Gateway, path: str) -> None:
    head = request_head("POST", path, "Content-Type: application/json", "Content-Length: 1000")
    status, headers, payload = exchange(gateway, head, b'{"model": ')
    assert status == 408
    assert b"did not arrive within 1s (GOMODEL_BODY_TIMEOUT)" in payload


@pytest.mark.services
def test_a_real_server_refuses_a_declared_10_gb_body_without_waiting_for_it(gateway: Gateway) -> None:
    head = request_head("POST", MESSAGES, "Content-Type: application/json", "Content-Length: 10000000000")
    status, headers, payload = exchange(gateway, head)
    assert status == 413
    assert b'{"type":"error","error":{"type":"request_too_large"' in payload  # Anthropic's envelope


@pytest.mark.services
def test_a_real_server_refuses_a_large_admin_body_in_plain_text(gateway: Gateway) -> None:
    large = b"username=" + b"a" * 3_000_000
    declared = httpx2.post(f"{gateway.base_url}/admin/login/", content=large, timeout=30,
                           headers={"Content-Type": "application/x-www-form-urlencoded"})
    chunked = httpx2.post(f"{gateway.base_url}/admin/login/", content=iter([large[:1_000_000]] * 3), timeout=30,
                          headers={"Content-Type": "application/x-www-form-urlencoded"})
    for response in (declared, chunked):
        assert response.status_code == 413
        assert response.headers["content-type"] == "text/plain; charset=utf-8"
        assert response.text == "The request body is larger than the limit of 2621440 bytes.\n"


@pytest.mark.services
@pytest.mark.django_db(transaction=True)
def test_a_real_server_hands_a_chunked_admin_form_to_django_whole(gateway: Gateway) -> None:
    with httpx2.Client(base_url=gateway.base_url, timeout=30) as browser:
        page = browser.get("/admin/login/")
        token = re.search(r'name="csrfmiddlewaretoken" value="([^"]+)"', page.text)
        assert token is not None
        form = httpx2.Request("POST", "/admin/login/", files={"username": (None, "nobody")},
                              data={"csrfmiddlewaretoken": token.group(1), "password": "wrong"})
        multipart = form.read()
        boundary = form.headers["content-type"]
        # Sent in pieces without a Content-Length: Django's multipart parser reads nothing of a body it has
        # no length for, so the CSRF token would be missing and the answer a 403.
        answer = browser.post("/admin/login/", content=iter([multipart[:50], multipart[50:]]),
                              headers={"Content-Type": boundary, "Referer": f"{gateway.base_url}/admin/login/"})
    assert answer.status_code == 200, answer.text[:500]
    assert "Please enter the correct username and password" in answer.text
    assert 'value="nobody"' in answer.text

"""The relay endpoints' ASGI handler, driven in process with scripted ``receive``/``send``.

The view behind a route is replaced (``ROUTES`` is the handler's own seam) where a test needs a view that
waits or fails; the body limit and the disconnect paths never reach a view.
"""

from __future__ import annotations

import asyncio
import json
from collections.abc import AsyncIterator, Awaitable, Callable
from typing import Any

import pytest
from django.http import HttpResponse

from routing.api import relay_handler
from routing.api.relay_handler import RelayHandler
from routing.gateway.client_answer import RelayStream


@pytest.fixture(autouse=True)
def open_to_loopback(settings: Any) -> None:
    """These tests are about the body and the view; who may call is tests/api/test_access.py's subject."""
    settings.GOMODEL_AUTH = "open"


def scope(path: str = "/v1/chat/completions", method: str = "POST") -> dict[str, Any]:
    return {"type": "http", "asgi": {"version": "3.0"}, "http_version": "1.1", "method": method, "scheme": "http",
            "path": path, "raw_path": path.encode(), "query_string": b"", "root_path": "",
            "headers": [(b"content-type", b"application/json")], "client": ("127.0.0.1", 5000),
            "server": ("127.0.0.1", 8000)}


class Client:
    """Feeds body pieces, then either waits for the response to end or disconnects when told to."""

    def __init__(self, pieces: list[bytes], disconnect: asyncio.Event | None = None) -> None:
        self.pieces = list(pieces)
        self.disconnect = disconnect or asyncio.Event()
        self.sent: list[dict[str, Any]] = []

    async def receive(self) -> dict[str, Any]:
        if self.pieces:
            body = self.pieces.pop(0)
            return {"type": "http.request", "body": body, "more_body": bool(self.pieces)}
        await self.disconnect.wait()
        return {"type": "http.disconnect"}

    async def send(self, message: dict[str, Any]) -> None:
        self.sent.append(message)

    @property
    def status(self) -> int | None:
        starts = [m for m in self.sent if m["type"] == "http.response.start"]
        return starts[0]["status"] if starts else None

    @property
    def body(self) -> bytes:
        return b"".join(m.get("body", b"") for m in self.sent if m["type"] == "http.response.body")


async def fallback(scope: dict[str, Any], receive: Any, send: Any) -> None:
    await send({"type": "http.response.start", "status": 299, "headers": []})
    await send({"type": "http.response.body", "body": b"fallback"})


def run(coro: Callable[[], Awaitable[None]]) -> None:
    asyncio.run(coro())


@pytest.mark.parametrize(("path", "envelope"), [("/v1/chat/completions", "openai"), ("/v1/messages", "anthropic")])
def test_a_body_over_the_limit_is_a_413_in_the_clients_envelope_without_reaching_the_view(
        settings: Any, monkeypatch: pytest.MonkeyPatch, path: str, envelope: str) -> None:
    settings.GOMODEL_MAX_BODY_BYTES = 1024
    monkeypatch.setitem(relay_handler.ROUTES, path, (_must_not_run, envelope))

    async def scenario() -> None:
        client = Client([b"x" * 600, b"x" * 600, b"x" * 600])  # no Content-Length: only the pieces tell
        await RelayHandler(fallback)(scope(path), client.receive, client.send)
        assert client.status == 413
        error = json.loads(client.body)
        if envelope == "openai":
            assert error["error"]["code"] == "request_too_large"
            assert "1024 bytes" in error["error"]["message"]
        else:
            assert error["type"] == "error"
            assert "1024 bytes" in error["error"]["message"]

    run(scenario)


async def _must_not_run(request: Any) -> HttpResponse:
    raise AssertionError("the view must not be called")


def test_a_client_gone_while_sending_its_body_gets_nothing_and_raises_nothing(monkeypatch: pytest.MonkeyPatch) -> None:
    monkeypatch.setitem(relay_handler.ROUTES, "/v1/chat/completions", (_must_not_run, "openai"))

    async def scenario() -> None:
        gone = asyncio.Event()
        gone.set()
        client = Client([b'{"model": '], gone)
        client.pieces = []  # the first message is the disconnect itself
        await RelayHandler(fallback)(scope(), client.receive, client.send)
        assert client.sent == []

    run(scenario)


def test_a_disconnect_while_the_view_works_cancels_it(monkeypatch: pytest.MonkeyPatch) -> None:
    working, cancelled = asyncio.Event(), asyncio.Event()

    async def slow_view(request: Any) -> HttpResponse:
        working.set()
        try:
            await asyncio.sleep(30)
        except asyncio.CancelledError:
            cancelled.set()
            raise
        return HttpResponse(b"late")

    monkeypatch.setitem(relay_handler.ROUTES, "/v1/chat/completions", (slow_view, "openai"))

    async def scenario() -> None:
        gone = asyncio.Event()
        client = Client([b"{}"], gone)
        handling = asyncio.create_task(RelayHandler(fallback)(scope(), client.receive, client.send))
        await asyncio.wait_for(working.wait(), 2)  # the client leaves only once the view is at work
        gone.set()
        await asyncio.wait_for(handling, 2)  # ends quietly: the server is not handed a CancelledError
        assert cancelled.is_set()
        assert client.sent == []

    run(scenario)


def test_the_view_gets_the_body_and_its_response_is_sent(monkeypatch: pytest.MonkeyPatch) -> None:
    async def echo(request: Any) -> HttpResponse:
        response = HttpResponse(request.body[::-1], content_type="application/json", status=201)
        response["X-Seen"] = request.headers["content-type"]
        return response

    monkeypatch.setitem(relay_handler.ROUTES, "/v1/chat/completions", (echo, "openai"))

    async def scenario() -> None:
        client = Client([b"abc", b"def"])
        await RelayHandler(fallback)(scope(), client.receive, client.send)
        assert client.status == 201
        assert client.body == b"fedcba"
        start = client.sent[0]
        assert (b"X-Seen", b"application/json") in start["headers"]

    run(scenario)


def test_a_failing_view_is_a_500_in_the_clients_envelope_without_a_traceback(
        monkeypatch: pytest.MonkeyPatch, caplog: pytest.LogCaptureFixture) -> None:
    async def broken(request: Any) -> HttpResponse:
        raise RuntimeError("internal detail")

    monkeypatch.setitem(relay_handler.ROUTES, "/v1/chat/completions", (broken, "openai"))

    async def scenario() -> None:
        client = Client([b"{}"])
        await RelayHandler(fallback)(scope(), client.receive, client.send)
        assert client.status == 500
        assert json.loads(client.body)["error"]["code"] == "internal_error"
        assert b"internal detail" not in client.body
        assert b"Traceback" not in client.body

    run(scenario)
    assert "internal detail" in caplog.text  # the operator finds it in the log


@pytest.mark.parametrize(("path", "method"), [("/v1/chat/completions", "GET"), ("/v1/models", "GET"),
                                              ("/v1/ledger/claim", "POST")])
def test_other_paths_and_methods_go_to_the_fallback(path: str, method: str) -> None:
    async def scenario() -> None:
        client = Client([b""])
        await RelayHandler(fallback)(scope(path, method), client.receive, client.send)
        assert client.status == 299
        assert client.body == b"fallback"

    run(scenario)


def test_a_stream_whose_client_leaves_before_its_first_frame_is_closed(monkeypatch: pytest.MonkeyPatch) -> None:
    closed: list[bool] = []
    kept: list[RelayStream] = []  # held, so only the handler (not the garbage collector) can close the frames

    async def frames() -> AsyncIterator[bytes]:
        try:
            yield b""  # started before it is handed on, as the engine's stream is
            yield b"data: {}\n\n"
        finally:
            closed.append(True)  # the engine's clean-up: the provider connection closes here

    async def streaming_view(request: Any) -> RelayStream:
        source = frames()
        await anext(source)
        kept.append(RelayStream(source, content_type="text/event-stream"))
        return kept[0]

    monkeypatch.setitem(relay_handler.ROUTES, "/v1/chat/completions", (streaming_view, "openai"))

    class SlowToStart(Client):
        """The response head is still being written when the client hangs up."""

        def __init__(self, pieces: list[bytes], disconnect: asyncio.Event) -> None:
            super().__init__(pieces, disconnect)
            self.starting = asyncio.Event()

        async def send(self, message: dict[str, Any]) -> None:
            if message["type"] == "http.response.start":
                self.starting.set()
                await asyncio.sleep(30)
            await super().send(message)

    async def scenario() -> None:
        gone = asyncio.Event()
        client = SlowToStart([b"{}"], gone)
        handling = asyncio.create_task(RelayHandler(fallback)(scope(), client.receive, client.send))
        await asyncio.wait_for(client.starting.wait(), 2)
        gone.set()
        await asyncio.wait_for(handling, 2)
        assert closed == [True]

    run(scenario)

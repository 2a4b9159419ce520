"""The provider call as the request path bounds it, against a scripted provider on loopback (exact bytes):

- a cancelled request (the client hung up) closes the provider connection at once, at every point: JSON
  and stream, before the first byte, mid-body, before and after the stream was committed to, and while
  waiting for a connection slot;
- a full connection pool is the gateway's own 503, never a provider failure;
- a stream that trickles cannot outlast the request's deadline.
"""

from __future__ import annotations

import asyncio
import json
import random
from collections.abc import Awaitable, Callable, Iterator
from typing import Any

import pytest
from django.http import StreamingHttpResponse

from routing.clients import upstream
from routing.clients.http1 import UpstreamResponse
from routing.core.contracts import effective_contract
from routing.core.features import extract_features
from routing.core.requirements import requirements_from_features
from routing.core.table import ModelSpec, ProviderSpec, RoutingTable, TargetRef, VirtualModelSpec
from routing.gateway import engine
from routing.gateway.attempt import AttemptSpec, run_json_attempt, start_stream_attempt
from routing.gateway.attempt_loop import validation_rules
from routing.gateway.state import GatewayState, state
from tests.clients.http1.scripted import Server, read_request
from tests.gateway.support import answer, counted, eventually, request, run

Handler = Callable[[asyncio.StreamReader, asyncio.StreamWriter], Awaitable[None]]

SSE_HEAD = b"HTTP/1.1 200 OK\r\ncontent-type: text/event-stream\r\ntransfer-encoding: chunked\r\n\r\n"
JSON_HEAD = b"HTTP/1.1 200 OK\r\ncontent-type: application/json\r\ncontent-length: 400\r\n\r\n"


def sse(delta: dict[str, Any], finish: str | None = None) -> bytes:
    """One OpenAI stream event as one HTTP chunk."""
    event = {"id": "chatcmpl-1", "object": "chat.completion.chunk", "created": 1, "model": "m",
             "choices": [{"index": 0, "delta": delta, "finish_reason": finish}]}
    data = b"data: " + json.dumps(event).encode() + b"\n\n"
    return b"%x\r\n%s\r\n" % (len(data), data)


ROLE = sse({"role": "assistant"})
HELLO = sse({"content": "Hello"})
DONE = sse({}, "stop") + b"%x\r\ndata: [DONE]\n\n\r\n0\r\n\r\n" % len(b"data: [DONE]\n\n")


def scripted_table(url: str) -> RoutingTable:
    models = [ModelSpec(name=name, provider="scripted", upstream=name) for name in ("first", "second")]
    return RoutingTable.build(
        version=1, providers=[ProviderSpec("scripted", "openai", f"{url}/v1")], models=models,
        virtual_models=[VirtualModelSpec("pair", "failover", (TargetRef("first"), TargetRef("second")))],
    )


def attempt_spec(table: RoutingTable, *, stream: bool, timeout_s: float = 30.0) -> AttemptSpec:
    body: dict[str, Any] = {"model": "first", "messages": [{"role": "user", "content": "hello"}], "stream": stream}
    rules = validation_rules(effective_contract(requirements_from_features(extract_features(body, "openai")), None))
    return AttemptSpec(provider=table.providers["scripted"], model=table.models["first"], body=body, inbound="openai",
                       stream=stream, api_key="", timeout_s=timeout_s, rules=rules, client_wants_usage=False)


@pytest.fixture(autouse=True)
def fresh_state(settings: Any) -> Iterator[GatewayState]:
    settings.REDIS_URL = ""
    state.renew()
    state.rng = random.Random(0)
    yield state
    state.renew()


@pytest.fixture
def responses(monkeypatch: pytest.MonkeyPatch) -> list[UpstreamResponse]:
    """Every upstream response the request path receives (the real ones: ``upstream.send`` is only watched)."""
    seen: list[UpstreamResponse] = []
    send = upstream.send

    async def watched(request: upstream.UpstreamRequest) -> UpstreamResponse:
        response = await send(request)
        seen.append(response)
        return response

    monkeypatch.setattr(upstream, "send", watched)
    return seen


def writes(*parts: bytes) -> Handler:
    """A provider that reads the request, writes ``parts`` and then says nothing more."""

    async def handler(reader: asyncio.StreamReader, writer: asyncio.StreamWriter) -> None:
        await read_request(reader)
        for part in parts:
            writer.write(part)
        await writer.drain()

    return handler


def read_up_to(response_count: int, body_bytes: int) -> Callable[[list[UpstreamResponse]], bool]:
    """The attempt holds ``response_count`` responses and has taken ``body_bytes`` of the last one's body."""
    return lambda seen: len(seen) == response_count and (
        body_bytes == 0 or (seen[-1].received >= body_bytes and not seen[-1].chunks))


@pytest.mark.parametrize(("stream", "parts", "reached"), [
    (False, (), read_up_to(0, 0)),
    (False, (JSON_HEAD + b'{"id": "chatcmpl-1", "obj',), read_up_to(1, 1)),
    (True, (), read_up_to(0, 0)),
    (True, (SSE_HEAD, ROLE), read_up_to(1, len(ROLE) - 10)),
], ids=["json before the first byte", "json mid-body", "stream before the first byte",
        "stream before its first content"])
def test_a_cancelled_attempt_closes_the_provider_connection_at_once(
        responses: list[UpstreamResponse], stream: bool, parts: tuple[bytes, ...],
        reached: Callable[[list[UpstreamResponse]], bool]) -> None:
    async def scenario() -> None:
        async with Server(writes(*parts)) as server:
            spec = attempt_spec(scripted_table(f"http://127.0.0.1:{server.port}"), stream=stream)
            task = asyncio.create_task(start_stream_attempt(spec) if stream else run_json_attempt(spec))
            await eventually(lambda: server.connections == 1 and reached(responses), what="the attempt's progress")
            task.cancel()
            with pytest.raises(asyncio.CancelledError):
                await task
            await eventually(lambda: server.open == 0, what="the close of the provider connection")

    run(scenario())


def test_a_committed_stream_closed_before_its_first_frame_closes_the_provider_connection(
        audit_events: list[dict[str, Any]]) -> None:
    async def scenario() -> None:
        async with Server(writes(SSE_HEAD, ROLE, HELLO)) as server:
            table = scripted_table(f"http://127.0.0.1:{server.port}")
            response = await engine.handle(request(table, "first", stream=True))
            assert isinstance(response, StreamingHttpResponse)
            # The client hung up before the handler sent a frame: the handler closes the frames unread.
            await response.source.aclose()  # type: ignore[attr-defined]
            await eventually(lambda: server.open == 0, what="the close of the provider connection")

    run(scenario())
    [event] = audit_events
    assert event["attempts"][0]["reason"] == "client_disconnected"
    assert state.health.get("first").in_flight == 0


def test_a_committed_stream_cancelled_mid_way_closes_the_provider_connection() -> None:
    async def scenario() -> None:
        async with Server(writes(SSE_HEAD, ROLE, HELLO, HELLO)) as server:
            table = scripted_table(f"http://127.0.0.1:{server.port}")
            response = await engine.handle(request(table, "first", stream=True))
            frames = response.source  # type: ignore[attr-defined]
            got: list[bytes] = []

            async def relay() -> None:  # as the relay handler sends a stream
                try:
                    async for frame in frames:
                        got.append(frame)
                finally:
                    await frames.aclose()

            task = asyncio.create_task(relay())
            # Both content chunks reached the client (in one piece or two: frames go out one read at a time).
            await eventually(lambda: b"".join(got).count(b'"Hello"') >= 2, what="the first frames")
            task.cancel()
            with pytest.raises(asyncio.CancelledError):
                await task
            await eventually(lambda: server.open == 0, what="the close of the provider connection")

    run(scenario())


def test_a_request_cancelled_while_waiting_for_a_connection_slot_opens_none(settings: Any) -> None:
    settings.GOMODEL_UPSTREAM_MAX_CONNECTIONS_PER_ORIGIN = 1

    async def scenario() -> None:
        async with Server(writes()) as server:
            table = scripted_table(f"http://127.0.0.1:{server.port}")
            holding = asyncio.create_task(run_json_attempt(attempt_spec(table, stream=False)))
            await eventually(lambda: server.connections == 1, what="the first request's connection")
            waiting = asyncio.create_task(start_stream_attempt(attempt_spec(table, stream=True)))
            await eventually(lambda: len(upstream.pool.get()._waiters) == 1, what="the second request waiting")
            waiting.cancel()
            with pytest.raises(asyncio.CancelledError):
                await waiting
            assert not upstream.pool.get()._waiters
            holding.cancel()
            with pytest.raises(asyncio.CancelledError):
                await holding
            await eventually(lambda: server.open == 0, what="the close of the provider connection")
            assert server.connections == 1

    run(scenario())


def test_a_full_connection_pool_is_the_gateway_s_own_503_and_blames_no_provider(
        settings: Any, audit_events: list[dict[str, Any]]) -> None:
    settings.GOMODEL_UPSTREAM_MAX_CONNECTIONS_PER_ORIGIN = 1
    settings.GOMODEL_UPSTREAM_CONNECT_TIMEOUT = 0.1
    before = counted("gomodel_upstream_pool_exhausted_total", provider="scripted")

    async def scenario() -> None:
        async with Server(writes()) as server:
            table = scripted_table(f"http://127.0.0.1:{server.port}")
            holding = asyncio.create_task(run_json_attempt(attempt_spec(table, stream=False)))
            await eventually(lambda: server.connections == 1, what="the first request's connection")
            reply = await answer(request(table, "pair"))
            assert reply.status == 503
            assert reply.headers["Retry-After"] == "1"
            assert reply.error["code"] == "gateway_overloaded"
            holding.cancel()
            with pytest.raises(asyncio.CancelledError):
                await holding

    run(scenario())
    assert counted("gomodel_upstream_pool_exhausted_total", provider="scripted") == before + 1
    [event] = audit_events
    assert [(a["target"], a["reason"], a["action"]) for a in event["attempts"]] == [
        ("first", "gateway_overloaded", "gave_up")]  # no retry, no fallback
    for name in ("first", "second"):
        health = state.health.get(name)
        assert health.cooldown_until is None
        assert health.consecutive_failures == 0
        assert health.in_flight == 0


def test_a_trickling_stream_is_cut_at_the_request_deadline() -> None:
    async def trickle(reader: asyncio.StreamReader, writer: asyncio.StreamWriter) -> None:
        await read_request(reader)
        writer.write(SSE_HEAD + ROLE)
        for _ in range(100):  # a word every 50 ms for 5 s, each well within the idle timeout
            writer.write(HELLO)
            await writer.drain()
            await asyncio.sleep(0.05)
        writer.write(DONE)
        await writer.drain()

    async def scenario() -> None:
        async with Server(trickle) as server:
            table = scripted_table(f"http://127.0.0.1:{server.port}")
            reply = await answer(request(table, "first", stream=True, headers={"X-GoModel-Deadline-Ms": "1000"}))
            assert reply.status == 200
            assert "[DONE]" not in reply.events
            assert "failed mid-way" in reply.events[-1]
            assert sum("Hello" in event for event in reply.events) < 100  # fewer words than the provider had
            await eventually(lambda: server.open == 0, what="the close of the provider connection")

    run(scenario())

"""Every answer's audit event is handed over before the client has the answer's last bytes.

The handover is where the event is written to the audit journal (audit/delivery/journal.py), so this order is what
makes a gateway killed right after an answer lose no revision of it: a JSON answer is audited before the
engine returns it; a stream is audited before the frames that complete it (OpenAI's ``[DONE]``, Anthropic's
``message_stop``), whether the provider's format is the client's or is translated.
"""

from __future__ import annotations

import asyncio
import json
from typing import Any

import pytest
from django.http import HttpResponse

from audit.delivery.journal import encode_event
from routing.core.table import ProviderSpec, RoutingTable
from routing.gateway import engine
from routing.gateway.client_answer import RelayStream
from routing.gateway.state import GatewayState
from routing.providers.errors import Inbound
from routing.simulator import SimulatorServer
from tests.gateway import support
from tests.gateway.support import attempts_of, request, run

simulator, sim, table, fresh_state = support.simulator, support.sim, support.table, support.fresh_state


def test_a_json_answer_is_audited_before_the_engine_returns_it(
        sim: SimulatorServer, table: RoutingTable, audit_events: list[dict[str, Any]]) -> None:
    call = request(table, "primary", "audit me first")

    async def scenario() -> HttpResponse:
        response = await engine.handle(call)
        assert isinstance(response, HttpResponse)
        assert [e["request_id"] for e in audit_events] == [call.request_id]  # not one byte sent yet
        return response

    assert run(scenario()).status_code == 200
    assert attempts_of(audit_events[0]) == [("primary", "ok", "accepted", "accepted")]


@pytest.mark.parametrize(("inbound", "model", "last_event"), [
    ("openai", "primary", b"data: [DONE]"),        # OpenAI to OpenAI: the provider's bytes passed through
    ("anthropic", "claude", b"event: message_stop"),  # Anthropic to Anthropic: passed through
    ("anthropic", "primary", b"event: message_stop"),  # OpenAI to Anthropic: translated, closed by the gateway
    ("openai", "claude", b"data: [DONE]"),         # Anthropic to OpenAI: translated
], ids=["openai-passthrough", "anthropic-passthrough", "openai-to-anthropic", "anthropic-to-openai"])
def test_a_stream_is_audited_before_the_frames_that_complete_it(
        sim: SimulatorServer, table: RoutingTable, audit_events: list[dict[str, Any]],
        inbound: Inbound, model: str, last_event: bytes) -> None:
    call = request(table, model, "a story, please", inbound=inbound, stream=True)

    async def scenario() -> list[tuple[bytes, int]]:
        response = await engine.handle(call)
        assert isinstance(response, RelayStream)
        # Each piece as the relay handler sends it, with the number of events handed over at that moment.
        return [(frame, len(audit_events)) async for frame in response.source]

    pieces = run(scenario())
    [closing] = [audited for frame, audited in pieces if last_event in frame]
    assert closing == 1
    [event] = audit_events
    assert (event["request_id"], event["status"], event["validation"]) == (call.request_id, 200, "accepted")
    assert event["usage"]["output_tokens"] > 0
    assert event["output_text"]
    assert attempts_of(event)[0][1:] == ("ok", "accepted", "accepted")


@pytest.mark.parametrize("stream", [False, True], ids=["json", "stream"])
def test_the_journal_takes_a_real_event_on_its_fast_path(
        sim: SimulatorServer, table: RoutingTable, audit_events: list[dict[str, Any]], stream: bool) -> None:
    """A field that marshal refuses would send every event through JSON, several times slower (bench/)."""
    run(support.answer(request(table, "pair", "count the cost", stream=stream)))
    [event] = audit_events
    assert encode_event(event)[:1] == b"m"


USAGE = {"prompt_tokens": 11, "completion_tokens": 7, "total_tokens": 18}


def _sse(chunk: dict[str, Any] | str) -> bytes:
    return b"data: " + (chunk if isinstance(chunk, str) else json.dumps(chunk)).encode() + b"\n\n"


def _chunk(delta: dict[str, Any], finish: str | None = None) -> dict[str, Any]:
    return {"id": "c1", "object": "chat.completion.chunk", "created": 1, "model": "raw",
            "choices": [{"index": 0, "delta": delta, "finish_reason": finish}]}


async def _openai_upstream(reader: asyncio.StreamReader, writer: asyncio.StreamWriter) -> None:
    """An OpenAI stream whose finish reason comes in one write and, 50 ms later, the usage chunk and [DONE]
    (as OpenAI sends them over a real network, unlike the simulator's single closing write)."""
    head = await reader.readuntil(b"\r\n\r\n")
    length = next(int(line.split(b":")[1]) for line in head.split(b"\r\n")
                  if line.lower().startswith(b"content-length"))
    await reader.readexactly(length)
    writer.write(b"HTTP/1.1 200 OK\r\ncontent-type: text/event-stream\r\ntransfer-encoding: chunked\r\n\r\n")

    def send(data: bytes) -> None:
        writer.write(b"%x\r\n%s\r\n" % (len(data), data))

    send(_sse(_chunk({"role": "assistant", "content": "Hello"})) + _sse(_chunk({}, "stop")))
    await writer.drain()
    await asyncio.sleep(0.05)
    send(_sse({"id": "c1", "object": "chat.completion.chunk", "created": 1, "model": "raw", "choices": [],
               "usage": USAGE}) + _sse("[DONE]"))
    writer.write(b"0\r\n\r\n")
    await writer.drain()
    writer.close()


def test_a_stream_whose_usage_follows_its_finish_reason_is_audited_with_that_usage_before_its_done(
        fresh_state: GatewayState, audit_events: list[dict[str, Any]]) -> None:
    async def scenario() -> list[tuple[bytes, int]]:
        server = await asyncio.start_server(_openai_upstream, "127.0.0.1", 0)
        port = server.sockets[0].getsockname()[1]
        table = RoutingTable.build(version=901, providers=[ProviderSpec("raw", "openai", f"http://127.0.0.1:{port}/v1")],
                                   models=[support._model("raw-model", "raw", upstream_name="raw")])
        call = request(table, "raw-model", "hello", stream=True, stream_options={"include_usage": True})
        try:
            response = await engine.handle(call)
            assert isinstance(response, RelayStream)
            return [(frame, len(audit_events)) async for frame in response.source]
        finally:
            server.close()

    pieces = run(scenario())
    [closing] = [audited for frame, audited in pieces if b"data: [DONE]" in frame]
    assert closing == 1
    assert any(b'"finish_reason": "stop"' in frame and audited == 0 for frame, audited in pieces)  # not settled there
    [event] = audit_events
    assert (event["usage"]["input_tokens"], event["usage"]["output_tokens"]) == (11, 7)
    assert event["cost_usd"] > 0

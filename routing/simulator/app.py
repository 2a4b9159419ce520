"""The simulator as a plain ASGI 3 application: route each request, and record every generation request
from arrival to its end (see ``exchange`` for what happens in between)."""

from __future__ import annotations

import asyncio
import json
import secrets
import time
from collections.abc import Mapping
from dataclasses import replace
from pathlib import Path
from typing import Any
from urllib.parse import parse_qsl

from routing.simulator.asgi_io import BodyTooLarge, Connection, Receive, Scope, Send
from routing.simulator.config import SimulatorConfig, load_config
from routing.simulator.control import ControlEndpoints
from routing.simulator.count_tokens import serve_count_tokens
from routing.simulator.exchange import JSON_HEADER, Exchange, admit, answer, refuse
from routing.simulator.model_calls import answer_models
from routing.simulator.recorder import auth_summary, masked_headers, masked_query
from routing.simulator.routes import (
    CONTROL,
    COUNT_TOKENS,
    EMBED,
    GENERATE,
    HEALTH,
    MODEL,
    MODELS,
    OPENAI,
    Route,
    match_route,
)
from routing.simulator.state import SimulatorState
from routing.simulator.wire.base import UNKNOWN_PATH, Problem, RenderContext
from routing.simulator.wire.bedrock_embeddings import serve_bedrock_embeddings
from routing.simulator.wire.cohere_embeddings import serve_cohere_embeddings
from routing.simulator.wire.embeddings import serve_embeddings
from routing.simulator.wire.vertex_embeddings import serve_vertex_embeddings

SHUTDOWN = "shutdown"
# Embedding formats answered by their own module; the rest (OpenAI, Azure, Gemini) by ``wire.embeddings``.
_EMBED_SERVERS = {"vertex": serve_vertex_embeddings, "cohere": serve_cohere_embeddings,
                  "bedrock": serve_bedrock_embeddings}
# Bodies above this size are counted but not kept, so 10,000 records of large prompts stay small.
RECORDED_BODY_BYTES = 1024 * 1024


class SimulatorApp:
    """An ASGI application impersonating OpenAI, Azure OpenAI, Anthropic and Gemini endpoints."""

    def __init__(self, config: SimulatorConfig | Mapping[str, Any] | str | Path | None = None) -> None:
        self.state = SimulatorState(load_config(config))
        self._control = ControlEndpoints(self.state)
        self._loop: asyncio.AbstractEventLoop | None = None
        self._closing: asyncio.Future[None] | None = None

    async def __call__(self, scope: Scope, receive: Receive, send: Send) -> None:
        if scope["type"] == "http":
            await self._http(scope, receive, send)
        elif scope["type"] == "lifespan":
            await self._lifespan(receive, send)

    def close(self) -> None:
        """End every held request now (server shutdown); callable from any thread."""
        loop, closing = self._loop, self._closing
        if loop is None or closing is None or loop.is_closed():
            return

        def resolve() -> None:
            if not closing.done():
                closing.set_result(None)

        try:
            running = asyncio.get_running_loop()
        except RuntimeError:
            running = None
        if running is loop:
            resolve()
        else:
            loop.call_soon_threadsafe(resolve)

    # -- plumbing -----------------------------------------------------------------------------------

    async def _lifespan(self, receive: Receive, send: Send) -> None:
        while True:
            message = await receive()
            if message["type"] == "lifespan.startup":
                self._loop, self._closing = None, None
                await send({"type": "lifespan.startup.complete"})
            elif message["type"] == "lifespan.shutdown":
                self.close()
                await send({"type": "lifespan.shutdown.complete"})
                return

    def _closing_future(self) -> asyncio.Future[None]:
        if self._closing is None:
            self._loop = asyncio.get_running_loop()
            self._closing = self._loop.create_future()
        return self._closing

    async def _http(self, scope: Scope, receive: Receive, send: Send) -> None:
        conn = Connection(scope, receive, send, self._closing_future())
        headers = {name.decode("latin-1").lower(): value.decode("latin-1") for name, value in scope["headers"]}
        query = scope.get("query_string", b"").decode("latin-1")
        method, path = scope["method"], scope["path"]
        route = match_route(method, path, query=query, anthropic_version="anthropic-version" in headers)
        try:
            if route.action == GENERATE:
                await self._generate(conn, route, headers, query)
            elif route.action == EMBED:
                serve = _EMBED_SERVERS.get(route.wire.name, serve_embeddings)
                await serve(self.state, conn, route, headers, query)
            elif route.action == COUNT_TOKENS:
                await serve_count_tokens(self.state, conn, route, headers, query)
            elif route.action == CONTROL:
                await self._control.handle(conn, method, path, query)
            elif route.action in (MODELS, MODEL):
                await answer_models(conn, self.state, route.wire, headers, query,
                                    route.model if route.action == MODEL else None)
            elif route.action == HEALTH:
                await conn.respond(200, [JSON_HEADER], b'{"status":"ok"}')
            else:
                reply = OPENAI.error(Problem(UNKNOWN_PATH, 404, path=f"{method} {path}"))
                await conn.respond(reply.status, [JSON_HEADER], reply.body)
        except asyncio.CancelledError:
            # The server is stopping with this request still held: drop it quietly rather than have the
            # server log a traceback for every held connection.
            if not conn.disconnected:
                await conn.abort()
        finally:
            conn.finish()

    # -- generation ---------------------------------------------------------------------------------

    async def _generate(self, conn: Connection, route: Route, headers: dict[str, str], query_string: str) -> None:
        started = time.perf_counter()
        query = dict(parse_qsl(query_string, keep_blank_values=True))
        too_large = False
        try:
            raw = await conn.read_body()
        except BodyTooLarge:
            raw, too_large = b"", True
        body, parsed = _json_body(raw)
        body_model: str = body["model"] if isinstance(body, dict) and isinstance(body.get("model"), str) else ""
        target: str = route.deployment or route.model or body_model
        model = body_model or target  # the name echoed in the answer
        config = self.state.config
        behaviour = config.behaviour_for(target) if target else config.defaults
        known_keys = {k: i for i, k in enumerate(behaviour.api_keys)} if behaviour and behaviour.api_keys else None
        key_header, key = route.wire.credentials(headers, query)
        record = self.state.recorder.open(
            method=conn.scope["method"],
            path=conn.scope["path"],
            query=masked_query(query_string),
            wire=route.wire.name,
            model=model or None,
            deployment=route.deployment,
            headers=masked_headers(conn.scope["headers"]),
            auth=auth_summary(key_header, key, known_keys),
            body=body if parsed and len(raw) <= RECORDED_BODY_BYTES else None,
            body_text=None if parsed else raw[:4096].decode("utf-8", "replace"),
            body_bytes=len(raw),
            stream=route.stream if route.stream is not None else isinstance(body, dict) and body.get("stream") is True,
        )
        ctx = RenderContext(model=model, token=secrets.token_hex(12), created=int(time.time()),
                            chunks=behaviour.chunk_count if behaviour else 8)
        exchange = Exchange(conn, record, route.wire, ctx, target, behaviour, key, known_keys)
        try:
            admitted = admit(exchange, headers=headers, query=query, body=body, parsed=parsed, too_large=too_large)
            if isinstance(admitted, Problem):
                await refuse(exchange, admitted)
                return
            prompt = admitted if route.stream is None else replace(admitted, stream=route.stream)
            record["stream"] = prompt.stream
            fault = self.state.faults.draw(self.state.fault_keys(conn.scope["path"], route.deployment, target))
            record["fault"] = fault.kind if fault else None
            await answer(exchange, self.state, prompt, fault)
        finally:
            if conn.server_closing and not conn.completed and not conn.disconnected:  # shutdown mid-answer
                await conn.abort()
                record["outcome"] = SHUTDOWN
            record["duration_ms"] = round((time.perf_counter() - started) * 1000, 3)
            record["chunks_sent"] = conn.chunks_sent
            if record["outcome"] == "pending":
                record["outcome"] = "disconnected" if conn.disconnected else "completed"
            self.state.recorder.close(record, counted_model=target or None)


def _json_body(raw: bytes) -> tuple[Any, bool]:
    try:
        return json.loads(raw), True
    except ValueError:
        return None, False

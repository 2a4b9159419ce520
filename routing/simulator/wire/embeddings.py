"""Embeddings in the OpenAI, Azure OpenAI and Gemini formats, deterministic and with the chat faults.

A vector is a hashed bag of the input's words (``embedding_vector``): the same input always gets the same
vector, inputs that share their words get near ones and inputs that share none nearly orthogonal ones; it has
the model's ``dimensions`` (or the size the request asks for, ``dimensions`` / ``outputDimensionality``) and unit
length, like real embedding models' vectors. The checks
before the answer are the chat ones (provider headers, the key, JSON, the model under ``strict_models``),
then the fault draw: error faults answer with the provider's error, ``timeout`` and ``connect_refused`` hold
or drop the connection, ``slow`` delays, ``malformed_json`` and ``stream_cut`` corrupt or cut the JSON body.
Token counts follow the chat estimate (about four characters a token; a token id list counts its ids); Gemini
reports none, as the real API does.
"""

from __future__ import annotations

import base64
import functools
import hashlib
import json
import re
import secrets
import struct
import time
from collections.abc import Awaitable, Callable, Sequence
from typing import Any
from urllib.parse import parse_qsl

from routing.simulator.asgi_io import BodyTooLarge, Connection
from routing.simulator.delivery import deliver_json
from routing.simulator.exchange import (
    DISCONNECTED,
    JSON_HEADER,
    REFUSED,
    TIMED_OUT,
    Exchange,
    _fault_problem,
    _key_problem,
    _retry_headers,
    refuse,
)
from routing.simulator.faults import ERROR_KINDS, Fault
from routing.simulator.prompt import Prompt
from routing.simulator.recorder import auth_summary, masked_headers, masked_query
from routing.simulator.routes import GEMINI, Route
from routing.simulator.state import SimulatorState
from routing.simulator.wire.base import INVALID_JSON, INVALID_REQUEST, MODEL_NOT_FOUND, Problem, RenderContext

MAX_DIMENSIONS = 16_384  # beyond any real model's vectors; a larger request is refused, not computed


_WORD = re.compile(r"\w+")


def embedding_vector(model: str, text: str, dimensions: int) -> list[float]:
    """A unit vector of ``dimensions`` numbers derived from ``model`` and ``text`` alone: a hashed bag of words.

    Each word (case folded) has a pseudo-random vector of its own, derived from a SHA-256 of the model and the word;
    a text's vector is the sum of its words' vectors, normalised. So texts that share their words are near
    (the same words in any order are the same vector), texts that share none are nearly orthogonal in enough
    dimensions, and semantic behaviour is testable without a model. A text without a word is hashed whole."""
    words = _WORD.findall(text.casefold()) or [f"\x00{text}"]
    total = [0.0] * dimensions
    for word in words:
        for i, value in enumerate(_word_vector(model, word, dimensions)):
            total[i] += value
    norm = sum(v * v for v in total) ** 0.5 or 1.0
    return [round(v / norm, 6) for v in total]


@functools.lru_cache(maxsize=4096)
def _word_vector(model: str, word: str, dimensions: int) -> tuple[float, ...]:
    raw = b""
    counter = 0
    seed = f"{model}\x00{word}".encode()
    while len(raw) < dimensions * 4:
        raw += hashlib.sha256(seed + counter.to_bytes(4, "big")).digest()
        counter += 1
    return tuple((int.from_bytes(raw[i * 4:i * 4 + 4], "big") / 0xFFFFFFFF) * 2.0 - 1.0 for i in range(dimensions))


def _tokens(item: str | list[int]) -> int:
    return len(item) if isinstance(item, list) else max(1, (len(item) + 3) // 4)


def _openai_inputs(body: dict[str, Any]) -> list[str | list[int]] | Problem:
    raw = body.get("input")

    def token_list(value: Any) -> bool:
        return isinstance(value, list) and bool(value) and all(isinstance(t, int) and not isinstance(t, bool)
                                                                for t in value)

    if isinstance(raw, str) and raw:
        return [raw]
    if token_list(raw):
        return [raw]
    if isinstance(raw, list) and raw and all((isinstance(i, str) and i) or token_list(i) for i in raw):
        return list(raw)
    return Problem(INVALID_REQUEST, 400, message="'input' must be a non-empty string, a list of strings, or a "
                                                 "list of token id lists.", param="input")


def _gemini_inputs(body: dict[str, Any]) -> tuple[list[str], int | None] | Problem:
    requests = body.get("requests")
    if not isinstance(requests, list) or not requests:
        return Problem(INVALID_REQUEST, 400, message="requests: at least one request is required.", param="requests")
    texts: list[str] = []
    size: int | None = None
    for i, entry in enumerate(requests):
        content = entry.get("content") if isinstance(entry, dict) else None
        parts = content.get("parts") if isinstance(content, dict) else None
        if not isinstance(parts, list) or not parts or not all(isinstance(p, dict) and isinstance(p.get("text"), str)
                                                               for p in parts):
            return Problem(INVALID_REQUEST, 400, message=f"requests[{i}].content: text parts are required.",
                           param=f"requests[{i}].content")
        texts.append("".join(p["text"] for p in parts))
        wanted = entry.get("outputDimensionality")
        if wanted is not None:
            if not isinstance(wanted, int) or isinstance(wanted, bool) or wanted < 1:
                return Problem(INVALID_REQUEST, 400, message="outputDimensionality must be a positive integer.",
                               param=f"requests[{i}].outputDimensionality")
            size = wanted
    if size is not None and size > MAX_DIMENSIONS:
        return Problem(INVALID_REQUEST, 400, message=f"outputDimensionality must be at most {MAX_DIMENSIONS}.",
                       param="requests[0].outputDimensionality")
    return texts, size


def _body(route: Route, model: str, inputs: Sequence[str | list[int]], size: int,
          encoding: str) -> tuple[bytes, int]:
    vectors = [embedding_vector(model, item if isinstance(item, str) else json.dumps(item), size) for item in inputs]
    tokens = sum(_tokens(item) for item in inputs)
    if route.wire is GEMINI:
        return json.dumps({"embeddings": [{"values": v} for v in vectors]}).encode(), tokens

    def encoded(vector: list[float]) -> Any:
        if encoding == "base64":
            return base64.b64encode(struct.pack(f"<{len(vector)}f", *vector)).decode("ascii")
        return vector

    body = {"object": "list", "model": model,
            "data": [{"object": "embedding", "index": i, "embedding": encoded(v)} for i, v in enumerate(vectors)],
            "usage": {"prompt_tokens": tokens, "total_tokens": tokens}}
    return json.dumps(body).encode(), tokens


async def serve_embeddings(state: SimulatorState, conn: Connection, route: Route, headers: dict[str, str],
                           query_string: str) -> None:
    """Answer one embeddings request, recorded like a generation request."""
    await serve_json_endpoint(state, conn, route, headers, query_string, endpoint="embeddings", respond=_answer)


Respond = Callable[..., Awaitable[None]]


async def serve_json_endpoint(state: SimulatorState, conn: Connection, route: Route, headers: dict[str, str],
                              query_string: str, *, endpoint: str, respond: Respond) -> None:
    """Read, record and hand a JSON request to ``respond(state, exchange, route, body, parsed=, too_large=,
    headers=, query=)``; the record is closed however the answer ends."""
    started = time.perf_counter()
    query = dict(parse_qsl(query_string, keep_blank_values=True))
    try:
        raw, too_large = await conn.read_body(), False
    except BodyTooLarge:
        raw, too_large = b"", True
    try:
        body, parsed = json.loads(raw), True
    except ValueError:
        body, parsed = None, False
    body_model = body["model"] if isinstance(body, dict) and isinstance(body.get("model"), str) else ""
    target: str = route.deployment or route.model or body_model
    model = body_model or target
    config = state.config
    behaviour = config.behaviour_for(target) if target else config.defaults
    known_keys = {k: i for i, k in enumerate(behaviour.api_keys)} if behaviour and behaviour.api_keys else None
    key_header, key = route.wire.credentials(headers, query)
    record = state.recorder.open(method="POST", path=conn.scope["path"], query=masked_query(query_string),
                                 wire=route.wire.name, model=model or None, deployment=route.deployment,
                                 endpoint=endpoint, headers=masked_headers(conn.scope["headers"]),
                                 auth=auth_summary(key_header, key, known_keys),
                                 body=body if parsed and len(raw) <= 1024 * 1024 else None,
                                 body_text=None if parsed else raw[:4096].decode("utf-8", "replace"),
                                 body_bytes=len(raw), stream=False)
    ctx = RenderContext(model=model, token=secrets.token_hex(12), created=int(time.time()))
    exchange = Exchange(conn, record, route.wire, ctx, target, behaviour, key, known_keys)
    try:
        await respond(state, exchange, route, body, parsed=parsed, too_large=too_large, headers=headers, query=query)
    finally:
        record["duration_ms"] = round((time.perf_counter() - started) * 1000, 3)
        if record["outcome"] == "pending":
            record["outcome"] = "disconnected" if conn.disconnected else "completed"
        state.recorder.close(record, counted_model=target or None)


def admission_problem(exchange: Exchange, body: Any, *, parsed: bool, too_large: bool, headers: dict[str, str],
                      query: dict[str, str]) -> Problem | None:
    """The chat checks before a body is read: provider headers, the key, size, JSON, the model."""
    problem = exchange.wire.precheck(headers, query, exchange.target) or _key_problem(
        exchange.wire, exchange.key, exchange.known_keys, exchange.target)
    if problem is not None:
        return problem
    if too_large:
        return Problem(INVALID_REQUEST, 413, model=exchange.target, message="Request too large.")
    if not parsed:
        return Problem(INVALID_JSON, 400, model=exchange.target)
    if not isinstance(body, dict):
        return Problem(INVALID_REQUEST, 400, model=exchange.target, message="The request body must be a JSON object.")
    if exchange.behaviour is None:
        return Problem(MODEL_NOT_FOUND, 404, model=exchange.target)
    return None


def _admit(exchange: Exchange, route: Route, body: Any, *, parsed: bool, too_large: bool, headers: dict[str, str],
           query: dict[str, str]) -> tuple[list[str | list[int]], int | None, str] | Problem:
    """(inputs, the size asked for, the encoding), or the Problem the provider would answer with."""
    problem = admission_problem(exchange, body, parsed=parsed, too_large=too_large, headers=headers, query=query)
    if problem is not None:
        return problem
    if route.wire is GEMINI:
        gemini = _gemini_inputs(body)
        if isinstance(gemini, Problem):
            return gemini
        return list(gemini[0]), gemini[1], "float"
    inputs = _openai_inputs(body)
    if isinstance(inputs, Problem):
        return inputs
    size = body.get("dimensions")
    if size is not None and (not isinstance(size, int) or isinstance(size, bool) or not 1 <= size <= MAX_DIMENSIONS):
        return Problem(INVALID_REQUEST, 400, message="'dimensions' must be a positive integer.", param="dimensions")
    encoding = body.get("encoding_format") or "float"
    if encoding not in ("float", "base64"):
        return Problem(INVALID_REQUEST, 400, message="'encoding_format' must be float or base64.",
                       param="encoding_format")
    return inputs, size, encoding


async def _answer(state: SimulatorState, exchange: Exchange, route: Route, body: Any, *, parsed: bool,
                  too_large: bool, headers: dict[str, str], query: dict[str, str]) -> None:
    admitted = _admit(exchange, route, body, parsed=parsed, too_large=too_large, headers=headers, query=query)
    if isinstance(admitted, Problem):
        await refuse(exchange, admitted)
        return
    inputs, size, encoding = admitted
    behaviour = exchange.behaviour
    assert behaviour is not None
    payload, tokens = _body(route, exchange.ctx.model, inputs, size or behaviour.dimensions, encoding)
    chars = sum(len(i) if isinstance(i, str) else 4 * len(i) for i in inputs)
    await deliver_with_faults(state, exchange, route, payload, input_chars=chars, tokens=tokens)


async def deliver_with_faults(state: SimulatorState, exchange: Exchange, route: Route, payload: bytes, *,
                              input_chars: int, tokens: int) -> None:
    """Draw the request's fault, then misbehave as it says or send ``payload`` (a JSON answer) on schedule."""
    conn, record, behaviour = exchange.conn, exchange.record, exchange.behaviour
    assert behaviour is not None
    fault: Fault | None = state.faults.draw(state.fault_keys(conn.scope["path"], route.deployment, exchange.target))
    record["fault"] = fault.kind if fault else None
    kind = fault.kind if fault is not None else None
    if fault is not None and kind == "connect_refused":
        await conn.abort(reset=fault.param("reset"))
        record["outcome"] = REFUSED
        return
    if fault is not None and kind == "timeout":
        held = await conn.pause(fault.param("seconds"))
        if held:
            await conn.abort()
        if held or conn.disconnected:
            record["outcome"] = TIMED_OUT if held else DISCONNECTED
        return
    if fault is not None and (kind in ERROR_KINDS or kind == "stream_error"):
        prompt = Prompt(model=exchange.target, input_chars=input_chars)
        await refuse(exchange, _fault_problem(exchange, fault, prompt), _retry_headers(fault))
        return
    record["status"] = 200
    record["usage"] = {"input_tokens": tokens, "output_tokens": 0}
    record["cost_usd"] = behaviour.cost_usd(input_tokens=tokens, cached_tokens=0, output_tokens=0)
    extra_s = float(fault.param("ms")) / 1000.0 if fault is not None and kind in ("slow", "slow_first_byte") else 0.0
    record["outcome"] = await deliver_json(
        conn, 200, [JSON_HEADER, *exchange.wire.response_headers(exchange.ctx)], payload,
        delay_s=behaviour.answer_delay_s() + extra_s, cut=kind == "stream_cut", corrupt=kind == "malformed_json")

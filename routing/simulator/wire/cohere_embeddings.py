"""Cohere Embed v2: ``POST .../v2/embed``, deterministic, with the chat faults.

The body is ``{"model", "texts": [...], "input_type", "embedding_types"?: ["float", ...], "output_dimension"?,
"truncate"?}``; ``input_type`` is required, as it is for Cohere's v3 and v4 models. The answer is
``{"id", "embeddings": {"<type>": [[...], ...]}, "texts", "meta": {"api_version": {"version": "2"},
"billed_units": {"input_tokens": n}}, "response_type": "embeddings_by_type"}``: one list per asked type
(``float``, ``int8``, ``uint8``, ``base64``; ``float`` when none is asked), each vector the one ``embeddings``
derives for the model and text, so it equals the other formats' vector for the same input. Token counts are
about four characters a token. Errors are Cohere's ``{"id", "message"}``.
"""

from __future__ import annotations

import base64
import json
import struct
from typing import Any

from routing.simulator.asgi_io import Connection
from routing.simulator.exchange import Exchange, refuse
from routing.simulator.routes import Route
from routing.simulator.state import SimulatorState
from routing.simulator.wire.base import INVALID_REQUEST, Problem
from routing.simulator.wire.embeddings import (
    MAX_DIMENSIONS,
    admission_problem,
    deliver_with_faults,
    embedding_vector,
    serve_json_endpoint,
)

INPUT_TYPES = ("search_document", "search_query", "classification", "clustering", "image")
EMBEDDING_TYPES = ("float", "int8", "uint8", "base64")  # binary and ubinary are not simulated
TRUNCATE = ("NONE", "START", "END")
MAX_TEXTS = 96


async def serve_cohere_embeddings(state: SimulatorState, conn: Connection, route: Route, headers: dict[str, str],
                                  query_string: str) -> None:
    await serve_json_endpoint(state, conn, route, headers, query_string, endpoint="embeddings", respond=_answer)


def _invalid(message: str, param: str) -> Problem:
    return Problem(INVALID_REQUEST, 400, message=f"invalid request: {message}", param=param)


def _inputs(body: dict[str, Any]) -> tuple[list[str], int | None, list[str]] | Problem:
    """(texts, the size asked for, the embedding types), or the Problem Cohere would answer with."""
    texts = body.get("texts")
    if not isinstance(texts, list) or not texts or not all(isinstance(t, str) and t for t in texts):
        return _invalid("texts must be a non-empty list of non-empty strings", "texts")
    if len(texts) > MAX_TEXTS:
        return _invalid(f"total number of texts must be at most {MAX_TEXTS} - received {len(texts)}", "texts")
    if body.get("input_type") not in INPUT_TYPES:
        return _invalid("valid input_type must be provided with the provided model", "input_type")
    types = body.get("embedding_types", ["float"])
    if not isinstance(types, list) or not types or not all(t in EMBEDDING_TYPES for t in types):
        return _invalid(f"embedding_types must be a list of {', '.join(EMBEDDING_TYPES)}", "embedding_types")
    size = body.get("output_dimension")
    if size is not None and (not isinstance(size, int) or isinstance(size, bool) or not 1 <= size <= MAX_DIMENSIONS):
        return _invalid("output_dimension must be a positive integer", "output_dimension")
    if body.get("truncate", "END") not in TRUNCATE:
        return _invalid("truncate must be one of NONE, START, END", "truncate")
    return list(texts), size, list(dict.fromkeys(types))


def _encoded(vector: list[float], kind: str) -> Any:
    if kind == "int8":
        return [round(v * 127) for v in vector]
    if kind == "uint8":
        return [round(v * 127) + 128 for v in vector]
    if kind == "base64":
        return base64.b64encode(struct.pack(f"<{len(vector)}f", *vector)).decode("ascii")
    return vector


def _response_id(token: str) -> str:
    hexed = (token + "0" * 32)[:32]
    return f"{hexed[:8]}-{hexed[8:12]}-{hexed[12:16]}-{hexed[16:20]}-{hexed[20:32]}"


async def _answer(state: SimulatorState, exchange: Exchange, route: Route, body: Any, *, parsed: bool,
                  too_large: bool, headers: dict[str, str], query: dict[str, str]) -> None:
    problem = admission_problem(exchange, body, parsed=parsed, too_large=too_large, headers=headers, query=query)
    admitted = problem if problem is not None else _inputs(body)
    if isinstance(admitted, Problem):
        await refuse(exchange, admitted)
        return
    texts, wanted, types = admitted
    behaviour = exchange.behaviour
    assert behaviour is not None
    size = wanted or behaviour.dimensions
    vectors = [embedding_vector(exchange.ctx.model, text, size) for text in texts]
    tokens = sum(max(1, (len(text) + 3) // 4) for text in texts)
    payload = json.dumps({
        "id": _response_id(exchange.ctx.token),
        "embeddings": {kind: [_encoded(vector, kind) for vector in vectors] for kind in types},
        "texts": texts,
        "meta": {"api_version": {"version": "2"}, "billed_units": {"input_tokens": tokens}},
        "response_type": "embeddings_by_type",
    }).encode()
    await deliver_with_faults(state, exchange, route, payload, input_chars=sum(len(t) for t in texts), tokens=tokens)

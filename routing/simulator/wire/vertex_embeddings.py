"""Vertex AI embeddings: ``POST .../publishers/google/models/{model}:predict``, deterministic, with the chat faults.

The body is ``{"instances": [{"content": text, "task_type"?: ...}, ...], "parameters": {"outputDimensionality":
N}?}``; the answer ``{"predictions": [{"embeddings": {"values": [...], "statistics": {"token_count": n,
"truncated": false}}}], "metadata": {"billableCharacterCount": c}}``, each vector the one ``embeddings`` derives for
the model and text (so it equals the other formats' vector for the same input), token counts at about four
characters a token, as a float the way Vertex writes them.
"""

from __future__ import annotations

import json
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


async def serve_vertex_embeddings(state: SimulatorState, conn: Connection, route: Route, headers: dict[str, str],
                                  query_string: str) -> None:
    await serve_json_endpoint(state, conn, route, headers, query_string, endpoint="embeddings", respond=_answer)


def _inputs(body: dict[str, Any]) -> tuple[list[str], int | None] | Problem:
    instances = body.get("instances")
    if not isinstance(instances, list) or not instances:
        return Problem(INVALID_REQUEST, 400, message="instances: at least one instance is required.",
                       param="instances")
    texts: list[str] = []
    for i, instance in enumerate(instances):
        content = instance.get("content") if isinstance(instance, dict) else None
        if not isinstance(content, str) or not content:
            return Problem(INVALID_REQUEST, 400, message=f"instances[{i}].content: a non-empty string is required.",
                           param=f"instances[{i}].content")
        texts.append(content)
    parameters = body.get("parameters") or {}
    wanted = parameters.get("outputDimensionality") if isinstance(parameters, dict) else None
    if wanted is not None and (not isinstance(wanted, int) or isinstance(wanted, bool)
                               or not 1 <= wanted <= MAX_DIMENSIONS):
        return Problem(INVALID_REQUEST, 400, message="parameters.outputDimensionality must be a positive integer.",
                       param="parameters.outputDimensionality")
    return texts, wanted


async def _answer(state: SimulatorState, exchange: Exchange, route: Route, body: Any, *, parsed: bool,
                  too_large: bool, headers: dict[str, str], query: dict[str, str]) -> None:
    problem = admission_problem(exchange, body, parsed=parsed, too_large=too_large, headers=headers, query=query)
    admitted = problem if problem is not None else _inputs(body)
    if isinstance(admitted, Problem):
        await refuse(exchange, admitted)
        return
    texts, wanted = admitted
    behaviour = exchange.behaviour
    assert behaviour is not None
    size = wanted or behaviour.dimensions
    predictions = []
    tokens = 0
    for text in texts:
        count = max(1, (len(text) + 3) // 4)
        tokens += count
        predictions.append({"embeddings": {"values": embedding_vector(exchange.ctx.model, text, size),
                                           "statistics": {"token_count": float(count), "truncated": False}}})
    payload = json.dumps({"predictions": predictions,
                          "metadata": {"billableCharacterCount": sum(len(t) for t in texts)}}).encode()
    await deliver_with_faults(state, exchange, route, payload, input_chars=sum(len(t) for t in texts), tokens=tokens)

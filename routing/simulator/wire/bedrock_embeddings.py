"""Bedrock InvokeModel for embedding models: ``POST .../model/{modelId}/invoke``, deterministic, with the chat faults.

The model id's family decides the body (``wire.bedrock.embedding_inputs``): Amazon Titan Text Embeddings
(``{"inputText", "dimensions"?, "normalize"?}``, one text; answer ``{"embedding", "embeddingsByType",
"inputTextTokenCount"}``) or Cohere Embed (``{"texts", "input_type", "embedding_types"?, "output_dimension"?}``,
up to 96 texts; answer ``{"id", "embeddings", "texts", "response_type"}``, without token counts, as on Bedrock).
Each vector is the one ``embeddings`` derives for the model and text. Authentication and errors are the Bedrock
wire's (SigV4 or a bearer API key; ``{"message"}`` with ``x-amzn-ErrorType``).
"""

from __future__ import annotations

from collections.abc import Mapping, Sequence
from typing import Any

from routing.simulator.asgi_io import Connection
from routing.simulator.exchange import Exchange, refuse
from routing.simulator.routes import Route
from routing.simulator.state import SimulatorState
from routing.simulator.wire.base import INVALID_REQUEST, Problem, RequestError, dumps
from routing.simulator.wire.embeddings import (
    admission_problem,
    deliver_with_faults,
    embedding_vector,
    serve_json_endpoint,
)


async def serve_bedrock_embeddings(state: SimulatorState, conn: Connection, route: Route, headers: dict[str, str],
                                   query_string: str) -> None:
    await serve_json_endpoint(state, conn, route, headers, query_string, endpoint="embeddings", respond=_answer)


async def _answer(state: SimulatorState, exchange: Exchange, route: Route, body: Any, *, parsed: bool,
                  too_large: bool, headers: dict[str, str], query: dict[str, str]) -> None:
    problem = admission_problem(exchange, body, parsed=parsed, too_large=too_large, headers=headers, query=query)
    if problem is None:
        try:
            texts, wanted = embedding_inputs(exchange.target, body)
        except RequestError as exc:
            problem = Problem(INVALID_REQUEST, 400, model=exchange.target, message=exc.message, param=exc.param)
    if problem is not None:
        await refuse(exchange, problem)
        return
    behaviour = exchange.behaviour
    assert behaviour is not None
    vectors = [embedding_vector(exchange.ctx.model, text, wanted or behaviour.dimensions) for text in texts]
    tokens = sum(max(1, (len(text) + 3) // 4) for text in texts)
    payload = embedding_body(exchange.target, body, vectors, texts, tokens, exchange.ctx.token)
    await deliver_with_faults(state, exchange, route, payload, input_chars=sum(len(t) for t in texts), tokens=tokens)


TITAN = "amazon.titan-embed"
COHERE = "cohere.embed"


def embedding_family(model: str) -> str:
    head = model.rsplit("/", 1)[-1]
    for candidate in (head, head.split(".", 1)[-1]):
        for family in (TITAN, COHERE):
            if candidate.startswith(family):
                return family
    return ""


def embedding_inputs(model: str, body: Mapping[str, Any]) -> tuple[list[str], int | None]:
    """(texts, the size asked for) of an InvokeModel embeddings body; RequestError when Bedrock refuses it."""
    family = embedding_family(model)
    if family == TITAN:
        text = body.get("inputText")
        if not isinstance(text, str) or not text:
            raise RequestError("Malformed input request: #: required key [inputText] not found", "inputText")
        if set(body) - {"inputText", "dimensions", "normalize", "embeddingTypes"}:
            extra = sorted(set(body) - {"inputText", "dimensions", "normalize", "embeddingTypes"})[0]
            raise RequestError(f"Malformed input request: #: extraneous key [{extra}] is not permitted", extra)
        size = body.get("dimensions")
        if size is not None and size not in (256, 512, 1024):
            raise RequestError("Malformed input request: #/dimensions: must be one of 256, 512, 1024", "dimensions")
        return [text], size
    if family == COHERE:
        texts = body.get("texts")
        if not isinstance(texts, list) or not texts or not all(isinstance(t, str) and t for t in texts):
            raise RequestError("Malformed input request: #: required key [texts] not found", "texts")
        if len(texts) > 96:
            raise RequestError("Malformed input request: #/texts: expected maximum item count: 96", "texts")
        if body.get("input_type") not in ("search_document", "search_query", "classification", "clustering"):
            raise RequestError("Malformed input request: #: required key [input_type] not found", "input_type")
        size = body.get("output_dimension")
        if size is not None and (not isinstance(size, int) or isinstance(size, bool) or size < 1):
            raise RequestError("Malformed input request: #/output_dimension: expected type: Integer",
                               "output_dimension")
        return list(texts), size
    raise RequestError(f"The provided model identifier is not an embedding model: {model}", "modelId")


def embedding_body(model: str, body: Mapping[str, Any], vectors: Sequence[list[float]], texts: Sequence[str],
                   tokens: int, token: str) -> bytes:
    """The InvokeModel answer of the model's family."""
    if embedding_family(model) == TITAN:
        return dumps({"embedding": vectors[0], "embeddingsByType": {"float": vectors[0]},
                      "inputTextTokenCount": tokens})
    if body.get("embedding_types"):
        return dumps({"id": _response_id(token), "embeddings": {"float": list(vectors)}, "texts": list(texts),
                      "response_type": "embeddings_by_type"})
    return dumps({"id": _response_id(token), "embeddings": list(vectors), "texts": list(texts),
                  "response_type": "embeddings_floats"})


def _response_id(token: str) -> str:
    hexed = (token + "0" * 32)[:32]
    return f"{hexed[:8]}-{hexed[8:12]}-{hexed[12:16]}-{hexed[16:20]}-{hexed[20:32]}"

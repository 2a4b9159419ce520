"""Embeddings: what an embedding model must declare, which models may stand in for each other, and the request.

Pure: the config loaders and the admin call ``embedding_field_problems`` and ``target_mix_problem``; the gateway
calls ``parse_embeddings_request`` on a client body and ``encode_base64`` on the vectors it answers with.
A fallback between embedding models is only safe when both produce vectors of the same space: the same
``family`` and the same ``dimensions``, so a virtual model over embedding models requires both to match.
"""

from __future__ import annotations

import base64
import struct
from collections.abc import Iterable, Sequence
from dataclasses import dataclass
from typing import Any

ENCODING_FORMATS = ("float", "base64")
MAX_INPUTS = 2048  # OpenAI's own limit on inputs per request


def embedding_field_problems(endpoints: Iterable[str], dimensions: int | None, family: str) -> dict[str, str]:
    """{field: problem} for a model's ``dimensions`` and ``family`` given what it serves."""
    problems: dict[str, str] = {}
    if "embeddings" in endpoints:
        if dimensions is None:
            problems["dimensions"] = "an embedding model needs its vector size (dimensions)"
        if not (family or "").strip():
            problems["family"] = "an embedding model needs its family, e.g. text-embedding-3"
        if "chat" in endpoints:
            problems["endpoints"] = "a model serves either chat or embeddings, not both"
    else:
        if dimensions is not None:
            problems["dimensions"] = "only an embedding model (endpoints: [embeddings]) has dimensions"
        if (family or "").strip():
            problems["family"] = "only an embedding model (endpoints: [embeddings]) has a family"
    return problems


@dataclass(frozen=True, slots=True)
class EmbeddingFacts:
    """What a virtual model's target check reads of one concrete model."""

    name: str
    endpoints: frozenset[str]
    dimensions: int | None
    family: str


def target_mix_problem(leaves: Sequence[EmbeddingFacts]) -> tuple[str, str] | None:
    """(field, problem) when the models behind one virtual model cannot stand in for each other, else None.

    Chat and embedding models never mix; embedding models mix only within one family and one size.
    """
    embedding = [leaf for leaf in leaves if "embeddings" in leaf.endpoints]
    if not embedding:
        return None
    chat = [leaf.name for leaf in leaves if "embeddings" not in leaf.endpoints]
    if chat:
        return ("endpoints", f'mixes embedding models ({embedding[0].name}) with chat models ({chat[0]}); '
                             "a virtual model's targets must serve the same endpoint")
    first = embedding[0]
    for leaf in embedding[1:]:
        if leaf.family != first.family:
            return ("family", f'targets of different embedding families: {first.name} is "{first.family}", '
                              f'{leaf.name} is "{leaf.family}"; a fallback would return vectors of another space')
        if leaf.dimensions != first.dimensions:
            return ("dimensions", f"targets of different dimensions: {first.name} has {first.dimensions}, "
                                  f"{leaf.name} has {leaf.dimensions}; a fallback would return vectors of another "
                                  "size")
    return None


class EmbeddingsRequestError(ValueError):
    """A client mistake in an embeddings body; ``param`` names the field."""

    def __init__(self, param: str, message: str) -> None:
        super().__init__(message)
        self.param = param
        self.message = message


@dataclass(frozen=True, slots=True)
class EmbeddingsRequest:
    """A checked embeddings body: each input is a string or a list of token ids."""

    model: str
    inputs: tuple[str | tuple[int, ...], ...]
    encoding_format: str = "float"
    dimensions: int | None = None
    user: str | None = None
    input_type: str | None = None  # what the texts are for (Cohere's search_query, search_document, ...)

    def estimated_tokens(self) -> int:
        """Input tokens as the gateway estimates them (a token array counts its ids; text ~4 characters/token)."""
        return sum(len(item) if isinstance(item, tuple) else max(1, (len(item) + 3) // 4) for item in self.inputs)


def _is_token_list(value: Any) -> bool:
    return isinstance(value, list) and bool(value) and all(
        isinstance(t, int) and not isinstance(t, bool) and t >= 0 for t in value)


def parse_embeddings_request(body: dict[str, Any]) -> EmbeddingsRequest:
    """The body checked field by field; EmbeddingsRequestError naming the first field that is wrong."""
    model = body.get("model")
    if not isinstance(model, str) or not model.strip():
        raise EmbeddingsRequestError("model", "model: expected the name of an embedding model")
    raw = body.get("input")
    inputs: list[str | tuple[int, ...]] = []
    if isinstance(raw, str):
        inputs = [raw]
    elif isinstance(raw, list) and _is_token_list(raw):
        inputs = [tuple(raw)]
    elif isinstance(raw, list) and raw:
        for i, item in enumerate(raw):
            if isinstance(item, str):
                inputs.append(item)
            elif _is_token_list(item):
                inputs.append(tuple(item))
            else:
                raise EmbeddingsRequestError(f"input[{i}]", f"input[{i}]: expected a non-empty string or a list of "
                                                            "token ids")
    else:
        raise EmbeddingsRequestError("input", "input: expected a string, a list of strings, a list of token ids "
                                              "or a list of token id lists")
    if len(inputs) > MAX_INPUTS:
        raise EmbeddingsRequestError("input", f"input: at most {MAX_INPUTS} inputs per request, got {len(inputs)}")
    for i, item in enumerate(inputs):
        if isinstance(item, str) and not item:
            raise EmbeddingsRequestError(f"input[{i}]" if isinstance(raw, list) else "input",
                                         "input: an input must not be an empty string")
    encoding = body.get("encoding_format", "float")
    if encoding is None:
        encoding = "float"
    if encoding not in ENCODING_FORMATS:
        raise EmbeddingsRequestError("encoding_format", f"encoding_format: expected one of "
                                                        f"{', '.join(ENCODING_FORMATS)}, got {encoding!r}")
    dimensions = body.get("dimensions")
    if dimensions is not None and (not isinstance(dimensions, int) or isinstance(dimensions, bool)
                                   or dimensions < 1):
        raise EmbeddingsRequestError("dimensions", f"dimensions: expected a positive integer, got {dimensions!r}")
    user = body.get("user")
    if user is not None and not isinstance(user, str):
        raise EmbeddingsRequestError("user", "user: expected a string")
    # Not OpenAI's: a retrieval hint that formats with such a field carry (Cohere); the others ignore it.
    input_type = body.get("input_type")
    if input_type is not None and (not isinstance(input_type, str) or not input_type):
        raise EmbeddingsRequestError("input_type", "input_type: expected a string such as search_query")
    return EmbeddingsRequest(model=model, inputs=tuple(inputs), encoding_format=encoding, dimensions=dimensions,
                             user=user, input_type=input_type)


def encode_base64(vector: Sequence[float]) -> str:
    """A vector as OpenAI's base64 encoding: little-endian float32 values, base64."""
    return base64.b64encode(struct.pack(f"<{len(vector)}f", *vector)).decode("ascii")

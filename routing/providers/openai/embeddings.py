"""Embeddings in OpenAI's format: ``POST {base_url}/embeddings`` for OpenAI and the presets with an embeddings
endpoint, Azure's deployment URL, and the answer every one of them gives.

Mistral takes ``output_dimension`` for ``dimensions`` and no ``user`` (dropped: a client hint that cannot change
the vectors); a keyless local preset gets no key header.
"""

from __future__ import annotations

from typing import Any
from urllib.parse import quote

from routing.core.answer import Usage
from routing.core.embeddings import EmbeddingsRequest
from routing.core.table import ModelSpec, ProviderSpec
from routing.providers.base import ProviderRequest, join_url
from routing.providers.common.vectors import finite_vector
from routing.providers.errors import MalformedResponse
from routing.providers.openai.azure_adapter import DEFAULT_API_VERSION
from routing.providers.openai.presets import PRESETS


def openai_embeddings_body(model: ModelSpec, request: EmbeddingsRequest, *, with_model: bool) -> dict[str, Any]:
    inputs: list[Any] = [list(item) if isinstance(item, tuple) else item for item in request.inputs]
    body: dict[str, Any] = {"input": inputs, "encoding_format": "float"}
    if with_model:
        body["model"] = model.upstream
    if request.dimensions is not None:
        body["dimensions"] = request.dimensions
    if request.user is not None:
        body["user"] = request.user
    return body


def openai_embeddings_request(provider: ProviderSpec, model: ModelSpec, request: EmbeddingsRequest,
                    api_key: str) -> ProviderRequest:
    headers = {"Authorization": f"Bearer {api_key}", "Content-Type": "application/json"}
    return ProviderRequest("POST", join_url(provider.base_url, "/embeddings"), headers,
                           openai_embeddings_body(model, request, with_model=True))


def preset_embeddings_request(provider: ProviderSpec, model: ModelSpec, request: EmbeddingsRequest,
                    api_key: str) -> ProviderRequest:
    preset = PRESETS[provider.kind]
    headers = {"Content-Type": "application/json"}
    if api_key or preset.needs_key:
        headers["Authorization"] = f"Bearer {api_key}"
    body = openai_embeddings_body(model, request, with_model=True)
    if provider.kind == "mistral":
        body.pop("user", None)
        if "dimensions" in body:
            body["output_dimension"] = body.pop("dimensions")
    return ProviderRequest("POST", join_url(provider.base_url or preset.base_url, "/embeddings"), headers, body)


def azure_embeddings_request(provider: ProviderSpec, model: ModelSpec, request: EmbeddingsRequest,
                   api_key: str) -> ProviderRequest:
    base = provider.base_url.rstrip("/").removesuffix("/openai")
    path = f"/openai/deployments/{quote(model.upstream, safe='')}/embeddings"
    url = join_url(base, path) + f"?api-version={quote(provider.api_version or DEFAULT_API_VERSION)}"
    headers = {"api-key": api_key, "Content-Type": "application/json"}
    return ProviderRequest("POST", url, headers, openai_embeddings_body(model, request, with_model=False))


def openai_embeddings_vectors(data: Any, count: int) -> tuple[list[list[float]], Usage | None]:
    items = data.get("data") if isinstance(data, dict) else None
    if not isinstance(items, list) or len(items) != count:
        raise MalformedResponse(f"the upstream returned no list of {count} embeddings")
    vectors: list[list[float] | None] = [None] * count
    for position, item in enumerate(items):
        if not isinstance(item, dict):
            raise MalformedResponse("an embedding entry is not an object")
        index = item.get("index", position)
        if not isinstance(index, int) or not 0 <= index < count or vectors[index] is not None:
            raise MalformedResponse("an embedding's index is missing, repeated or out of range")
        vectors[index] = finite_vector(item.get("embedding"), f"data[{position}].embedding")
    usage = data.get("usage")
    if not isinstance(usage, dict) or not isinstance(usage.get("prompt_tokens"), int):
        return [v for v in vectors if v is not None], None
    return [v for v in vectors if v is not None], Usage(input_tokens=max(0, usage["prompt_tokens"]))

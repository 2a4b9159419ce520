"""Embeddings on the Gemini API: ``POST {base_url}/v1beta/models/{upstream}:batchEmbedContents``, one request
entry per input, ``dimensions`` as ``outputDimensionality``; token id inputs have no Gemini equivalent (a 400)."""

from __future__ import annotations

from typing import Any
from urllib.parse import quote

from routing.core.answer import Usage
from routing.core.embeddings import EmbeddingsRequest
from routing.core.table import ModelSpec, ProviderSpec
from routing.providers.base import ProviderRequest, join_url
from routing.providers.common.vectors import finite_vector
from routing.providers.errors import CapabilityError, MalformedResponse


def gemini_embeddings_request(provider: ProviderSpec, model: ModelSpec, request: EmbeddingsRequest,
                    api_key: str) -> ProviderRequest:
    name = model.upstream.removeprefix("models/")
    entries: list[dict[str, Any]] = []
    for i, item in enumerate(request.inputs):
        if isinstance(item, tuple):
            param = f"input[{i}]" if len(request.inputs) > 1 else "input"
            raise CapabilityError("token_input", "Gemini embeds text only; token id inputs have no equivalent",
                                  param)
        entry: dict[str, Any] = {"model": f"models/{name}", "content": {"parts": [{"text": item}]}}
        if request.dimensions is not None:
            entry["outputDimensionality"] = request.dimensions
        entries.append(entry)
    url = join_url(provider.base_url, f"/models/{quote(name, safe='')}:batchEmbedContents", version="/v1beta")
    headers = {"x-goog-api-key": api_key, "Content-Type": "application/json"}
    return ProviderRequest("POST", url, headers, {"requests": entries})


def gemini_embeddings_vectors(data: Any, count: int) -> tuple[list[list[float]], Usage | None]:
    items = data.get("embeddings") if isinstance(data, dict) else None
    if not isinstance(items, list) or len(items) != count:
        raise MalformedResponse(f"the upstream returned no list of {count} embeddings")
    vectors = [finite_vector(item.get("values") if isinstance(item, dict) else None, f"embeddings[{i}].values")
               for i, item in enumerate(items)]
    return vectors, None  # batchEmbedContents reports no token counts

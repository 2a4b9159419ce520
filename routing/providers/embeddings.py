"""Embeddings on each provider format, to and from OpenAI's ``/v1/embeddings`` shape. Pure, like the adapters.

::

    build_embeddings_request(provider, model, request, api_key) -> UpstreamRequest   # TranslationError before sending
    parse_embeddings_response(kind, data, request, public_model) -> EmbeddingsAnswer  # MalformedResponse

- ``openai`` (and OpenAI-compatible hosts): ``POST {base_url}/embeddings``, the body as OpenAI defines it.
- OpenAI-compatible presets with an embeddings endpoint (``mistral``, ``together``, ``fireworks``, ``ollama``,
  ``vllm``, ``lmstudio``): the OpenAI request at the preset's base URL (no key header for a keyless local
  server); Mistral takes ``output_dimension`` for ``dimensions`` and no ``user`` (dropped: a client hint that
  cannot change the vectors). ``groq``, ``deepseek`` and ``openrouter`` have no embeddings endpoint here.
- ``azure_openai``: ``POST {base_url}/openai/deployments/{upstream}/embeddings?api-version=...``, no ``model``.
- ``gemini``: ``POST {base_url}/v1beta/models/{upstream}:batchEmbedContents``, one request per input;
  ``dimensions`` becomes ``outputDimensionality``. Gemini counts no tokens for embeddings, so the usage is the
  gateway's estimate and says so (``usage_estimated``); token-id inputs have no Gemini equivalent (a 400).
- ``bedrock``: ``POST {base_url}/model/{upstream}/invoke`` for Amazon Titan (one input per request) and Cohere
  Embed (up to 96), each in its own body (``bedrock_embeddings``); signed like Bedrock chat requests.
- ``cohere``: ``POST {base_url}/v2/embed`` (``routing.providers.cohere.embeddings``), ``input_type`` from the
  client's body or ``search_document``, with the provider's billed token counts.
- ``vertex``: ``POST .../publishers/google/models/{upstream}:predict`` (``routing.providers.vertex.embeddings``),
  with the provider's token counts.

Upstreams are always asked for floats; a client that wants ``base64`` gets the floats packed by the gateway
(little-endian float32, as OpenAI encodes them), so every provider answers both encodings the same way.
"""

from __future__ import annotations

from collections.abc import Callable
from dataclasses import dataclass
from typing import Any
from urllib.parse import quote

from routing.core.answer import Usage
from routing.core.embeddings import EmbeddingsRequest, encode_base64
from routing.core.table import ModelSpec, ProviderSpec
from routing.providers.base import UpstreamRequest, join_url, load_json_body
from routing.providers.bedrock.embeddings import bedrock_embeddings_request, bedrock_vectors
from routing.providers.cohere.embeddings import cohere_embeddings_request, cohere_embeddings_vectors
from routing.providers.common.vectors import finite_vector
from routing.providers.errors import CapabilityError, MalformedResponse
from routing.providers.openai.azure_adapter import DEFAULT_API_VERSION
from routing.providers.openai.presets import PRESETS
from routing.providers.vertex.embeddings import vertex_embeddings_request, vertex_embeddings_vectors


@dataclass(frozen=True, slots=True)
class EmbeddingsAnswer:
    """A 2xx embeddings answer: the OpenAI-shaped body for the client, its usage, and whether that usage is
    the gateway's estimate (the provider reported none)."""

    client_body: dict[str, Any]
    usage: Usage
    usage_estimated: bool = False


def _openai_body(model: ModelSpec, request: EmbeddingsRequest, *, with_model: bool) -> dict[str, Any]:
    inputs: list[Any] = [list(item) if isinstance(item, tuple) else item for item in request.inputs]
    body: dict[str, Any] = {"input": inputs, "encoding_format": "float"}
    if with_model:
        body["model"] = model.upstream
    if request.dimensions is not None:
        body["dimensions"] = request.dimensions
    if request.user is not None:
        body["user"] = request.user
    return body


def _openai_request(provider: ProviderSpec, model: ModelSpec, request: EmbeddingsRequest,
                    api_key: str) -> UpstreamRequest:
    headers = {"Authorization": f"Bearer {api_key}", "Content-Type": "application/json"}
    return UpstreamRequest("POST", join_url(provider.base_url, "/embeddings"), headers,
                           _openai_body(model, request, with_model=True))


def _preset_request(provider: ProviderSpec, model: ModelSpec, request: EmbeddingsRequest,
                    api_key: str) -> UpstreamRequest:
    preset = PRESETS[provider.kind]
    headers = {"Content-Type": "application/json"}
    if api_key or preset.needs_key:
        headers["Authorization"] = f"Bearer {api_key}"
    body = _openai_body(model, request, with_model=True)
    if provider.kind == "mistral":
        body.pop("user", None)
        if "dimensions" in body:
            body["output_dimension"] = body.pop("dimensions")
    return UpstreamRequest("POST", join_url(provider.base_url or preset.base_url, "/embeddings"), headers, body)


def _azure_request(provider: ProviderSpec, model: ModelSpec, request: EmbeddingsRequest,
                   api_key: str) -> UpstreamRequest:
    base = provider.base_url.rstrip("/").removesuffix("/openai")
    path = f"/openai/deployments/{quote(model.upstream, safe='')}/embeddings"
    url = join_url(base, path) + f"?api-version={quote(provider.api_version or DEFAULT_API_VERSION)}"
    headers = {"api-key": api_key, "Content-Type": "application/json"}
    return UpstreamRequest("POST", url, headers, _openai_body(model, request, with_model=False))


def _gemini_request(provider: ProviderSpec, model: ModelSpec, request: EmbeddingsRequest,
                    api_key: str) -> UpstreamRequest:
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
    return UpstreamRequest("POST", url, headers, {"requests": entries})


def _openai_vectors(data: Any, count: int) -> tuple[list[list[float]], Usage | None]:
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


def _gemini_vectors(data: Any, count: int) -> tuple[list[list[float]], Usage | None]:
    items = data.get("embeddings") if isinstance(data, dict) else None
    if not isinstance(items, list) or len(items) != count:
        raise MalformedResponse(f"the upstream returned no list of {count} embeddings")
    vectors = [finite_vector(item.get("values") if isinstance(item, dict) else None, f"embeddings[{i}].values")
               for i, item in enumerate(items)]
    return vectors, None  # batchEmbedContents reports no token counts


_Build = Callable[[ProviderSpec, ModelSpec, EmbeddingsRequest, str], UpstreamRequest]
_Read = Callable[[Any, int], tuple[list[list[float]], Usage | None]]
_FORMATS: dict[str, tuple[_Build, _Read]] = {
    "openai": (_openai_request, _openai_vectors),
    "azure_openai": (_azure_request, _openai_vectors),
    "gemini": (_gemini_request, _gemini_vectors),
    "cohere": (cohere_embeddings_request, cohere_embeddings_vectors),
    "bedrock": (bedrock_embeddings_request, bedrock_vectors),  # Titan and Cohere Embed (bedrock_embeddings)
    "vertex": (vertex_embeddings_request, vertex_embeddings_vectors),
    **{kind: (_preset_request, _openai_vectors) for kind in ("mistral", "together", "fireworks", "ollama", "vllm",
                                                              "lmstudio") if kind in PRESETS},
}


def serves_embeddings(kind: str) -> bool:
    """Whether the gateway can send embeddings to a provider of this kind."""
    return kind in _FORMATS


def build_embeddings_request(provider: ProviderSpec, model: ModelSpec, request: EmbeddingsRequest,
                             api_key: str) -> UpstreamRequest:
    """The upstream request; CapabilityError for a provider kind or an input the format cannot carry."""
    entry = _FORMATS.get(provider.kind)
    if entry is None:
        raise CapabilityError("embeddings", f"the {provider.kind} provider format has no embeddings endpoint in "
                                            "the gateway", "model")
    if request.dimensions is not None and model.dimensions is not None and request.dimensions > model.dimensions:
        # Models shorten their vectors (Matryoshka embeddings) but never lengthen them.
        raise CapabilityError("dimensions", f"dimensions: {model.name} makes vectors of at most {model.dimensions} "
                                            f"dimensions, {request.dimensions} were asked for", "dimensions")
    return entry[0](provider, model, request, api_key)


def _as_is(vector: list[float]) -> list[float]:
    return vector


def parse_embeddings_response(kind: str, data: bytes, request: EmbeddingsRequest, public_model: str, *,
                              dimensions: int | None = None) -> EmbeddingsAnswer:
    """The client's OpenAI-shaped answer from a 2xx body; MalformedResponse when it cannot be read, or when a
    vector is not of ``dimensions`` numbers (the size asked for, else the model's): a vector of another size
    is not comparable with the rest, so the attempt fails like any invalid answer and may fall back."""
    read = _FORMATS[kind][1]
    vectors, usage = read(load_json_body(data), len(request.inputs))
    if dimensions is not None and any(len(vector) != dimensions for vector in vectors):
        sizes = sorted({len(vector) for vector in vectors})
        raise MalformedResponse(f"vectors of {sizes} numbers where {dimensions} were expected")
    estimated = usage is None
    if usage is None:
        usage = Usage(input_tokens=request.estimated_tokens())
    encode: Callable[[list[float]], Any] = encode_base64 if request.encoding_format == "base64" else _as_is
    body = {
        "object": "list",
        "data": [{"object": "embedding", "index": i, "embedding": encode(vector)} for i, vector in enumerate(vectors)],
        "model": public_model,
        "usage": {"prompt_tokens": usage.input_tokens, "total_tokens": usage.input_tokens},
    }
    return EmbeddingsAnswer(body, usage, estimated)

"""Embeddings on each provider format, to and from OpenAI's ``/v1/embeddings`` shape. Pure, like the adapters.

::

    build_embeddings_request(provider, model, request, api_key) -> ProviderRequest   # TranslationError before sending
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
  Embed (up to 96), each in its own body (``routing.providers.bedrock.embeddings``); signed like Bedrock chat requests.
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

from routing.core.answer import Usage
from routing.core.embeddings import EmbeddingsRequest, encode_base64
from routing.core.table import ModelSpec, ProviderSpec
from routing.providers.base import ProviderRequest, load_json_body
from routing.providers.bedrock.embeddings import bedrock_embeddings_request, bedrock_vectors
from routing.providers.cohere.embeddings import cohere_embeddings_request, cohere_embeddings_vectors
from routing.providers.errors import CapabilityError, MalformedResponse
from routing.providers.gemini.embeddings import gemini_embeddings_request, gemini_embeddings_vectors
from routing.providers.openai.embeddings import (
    azure_embeddings_request,
    openai_embeddings_request,
    openai_embeddings_vectors,
    preset_embeddings_request,
)
from routing.providers.openai.presets import PRESETS
from routing.providers.vertex.embeddings import vertex_embeddings_request, vertex_embeddings_vectors


@dataclass(frozen=True, slots=True)
class EmbeddingsAnswer:
    """A 2xx embeddings answer: the OpenAI-shaped body for the client, its usage, and whether that usage is
    the gateway's estimate (the provider reported none)."""

    client_body: dict[str, Any]
    usage: Usage
    usage_estimated: bool = False


_Build = Callable[[ProviderSpec, ModelSpec, EmbeddingsRequest, str], ProviderRequest]
_Read = Callable[[Any, int], tuple[list[list[float]], Usage | None]]
_FORMATS: dict[str, tuple[_Build, _Read]] = {
    "openai": (openai_embeddings_request, openai_embeddings_vectors),
    "azure_openai": (azure_embeddings_request, openai_embeddings_vectors),
    "gemini": (gemini_embeddings_request, gemini_embeddings_vectors),
    "cohere": (cohere_embeddings_request, cohere_embeddings_vectors),
    "bedrock": (bedrock_embeddings_request, bedrock_vectors),  # Titan and Cohere Embed
    "vertex": (vertex_embeddings_request, vertex_embeddings_vectors),
    **{kind: (preset_embeddings_request, openai_embeddings_vectors)
       for kind in ("mistral", "together", "fireworks", "ollama", "vllm", "lmstudio") if kind in PRESETS},
}


def serves_embeddings(kind: str) -> bool:
    """Whether the gateway can send embeddings to a provider of this kind."""
    return kind in _FORMATS


def build_embeddings_request(provider: ProviderSpec, model: ModelSpec, request: EmbeddingsRequest,
                             api_key: str) -> ProviderRequest:
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

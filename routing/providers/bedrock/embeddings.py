"""Embeddings on Amazon Bedrock: ``POST {base_url}/model/{modelId}/invoke`` with the model family's own body.

The family is read from the model id (a regional profile prefix such as ``us.`` is skipped):

- ``amazon.titan-embed-*`` (Titan Text Embeddings v1, v2): ``{"inputText", "dimensions", "normalize"}``, ONE
  input per call; answer ``{"embedding", "inputTextTokenCount"}``. A batch of several inputs is refused with a
  400 naming ``input`` (a fan-out would multiply the calls, the latency and the failure modes of one request; a
  client batches against a model that takes batches). ``dimensions`` (256, 512 or 1024) and ``normalize: true``
  are sent to v2 only: v1 takes neither.
- ``cohere.embed-*`` (Cohere Embed v3 and v4 on Bedrock): ``{"texts", "input_type", "embedding_types":
  ["float"]}``, up to 96 inputs, ``input_type`` from the client's body (default ``search_document``); answer
  ``{"embeddings": {"float": [...]}}`` (or a bare list). ``dimensions`` becomes ``output_dimension`` on v4; v3
  makes vectors of one size only, so another size is refused. Cohere reports no token counts here: the usage is
  the gateway's estimate (``usage_estimated``).

Token-id inputs have no equivalent in either family (a 400). Signing is the chat requests' own (the request has
no API key header when SigV4 signs it, see bedrock_adapter).
"""

from __future__ import annotations

from typing import Any

from routing.core.answer import Usage
from routing.core.embeddings import EmbeddingsRequest
from routing.core.table import ModelSpec, ProviderSpec
from routing.providers.base import ProviderRequest
from routing.providers.bedrock.adapter import bedrock_headers, model_url
from routing.providers.common.vectors import finite_vector
from routing.providers.errors import CapabilityError, MalformedResponse

COHERE_MAX_TEXTS = 96  # Cohere Embed's own limit per call
TITAN_SIZES = (256, 512, 1024)  # the sizes Titan Text Embeddings v2 makes
_TITAN_V1 = ("titan-embed-text-v1", "titan-embed-g1")  # the first generation: no dimensions, no normalize
TITAN = "amazon.titan-embed"
COHERE = "cohere.embed"


def embedding_family(upstream: str) -> str:
    """``TITAN``, ``COHERE`` or "" for a Bedrock model id (an ARN's last part; a ``us.``-style prefix skipped)."""
    head = upstream.rsplit("/", 1)[-1]
    for candidate in (head, head.split(".", 1)[-1]):
        for family in (TITAN, COHERE):
            if candidate.startswith(family):
                return family
    return ""


def _texts(request: EmbeddingsRequest) -> list[str]:
    texts: list[str] = []
    for i, item in enumerate(request.inputs):
        if isinstance(item, tuple):
            param = f"input[{i}]" if len(request.inputs) > 1 else "input"
            raise CapabilityError("token_input", "Bedrock embeds text only; token id inputs have no equivalent",
                                  param)
        texts.append(item)
    return texts


def bedrock_embeddings_request(provider: ProviderSpec, model: ModelSpec, request: EmbeddingsRequest,
                               api_key: str) -> ProviderRequest:
    """The InvokeModel request for ``model``'s family; CapabilityError for what the family cannot take."""
    family = embedding_family(model.upstream)
    texts = _texts(request)
    headers = {**bedrock_headers(api_key), "Accept": "application/json"}
    url = model_url(provider, model, "invoke")
    if family == TITAN:
        if len(texts) != 1:
            raise CapabilityError("batch", f"{model.name} (Titan on Bedrock) embeds one input per request; "
                                           f"{len(texts)} were sent", "input")
        body: dict[str, Any] = {"inputText": texts[0]}
        if not any(first in model.upstream for first in _TITAN_V1):  # v2 and later: a size and unit-length vectors
            if request.dimensions is not None:
                if request.dimensions not in TITAN_SIZES:
                    raise CapabilityError("dimensions", f"{model.name} makes vectors of 256, 512 or 1024 dimensions",
                                          "dimensions")
                body["dimensions"] = request.dimensions
            body["normalize"] = True
        elif request.dimensions is not None and request.dimensions != model.dimensions:
            raise CapabilityError("dimensions", f"{model.name} makes vectors of one size only", "dimensions")
        return ProviderRequest("POST", url, headers, body)
    if family == COHERE:
        if len(texts) > COHERE_MAX_TEXTS:
            raise CapabilityError("batch", f"Cohere Embed on Bedrock takes at most {COHERE_MAX_TEXTS} inputs per "
                                           f"request; {len(texts)} were sent", "input")
        body = {"texts": texts, "input_type": request.input_type or "search_document", "embedding_types": ["float"]}
        if request.dimensions is not None:
            if "v4" in model.upstream:
                body["output_dimension"] = request.dimensions
            elif request.dimensions != model.dimensions:
                raise CapabilityError("dimensions", f"{model.name} makes vectors of one size only", "dimensions")
        return ProviderRequest("POST", url, headers, body)
    raise CapabilityError("embeddings", f"{model.name}: embeddings on Bedrock are translated for Amazon Titan "
                                        "(amazon.titan-embed-*) and Cohere Embed (cohere.embed-*) models", "model")


def bedrock_vectors(data: Any, count: int) -> tuple[list[list[float]], Usage | None]:
    """The vectors of a Titan or Cohere answer (told apart by their shape) and Titan's token count."""
    if not isinstance(data, dict):
        raise MalformedResponse("the embeddings answer is not a JSON object")
    if "embedding" in data:  # Titan
        vector = data["embedding"]
        if count != 1 or not isinstance(vector, list):
            raise MalformedResponse("the Titan answer holds no embedding")
        tokens = data.get("inputTextTokenCount")
        usage = Usage(input_tokens=tokens) if isinstance(tokens, int) and not isinstance(tokens, bool) \
            and tokens >= 0 else None
        return [finite_vector(vector, "embedding")], usage
    vectors = data.get("embeddings")
    if isinstance(vectors, dict):  # embedding_types asked for: {"float": [...]}
        vectors = vectors.get("float")
    if not isinstance(vectors, list) or len(vectors) != count or not all(isinstance(v, list) for v in vectors):
        raise MalformedResponse(f"the upstream returned no list of {count} embeddings")
    return [finite_vector(vector, f"embeddings[{i}]") for i, vector in enumerate(vectors)], None

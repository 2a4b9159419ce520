"""Embeddings on Cohere (``cohere`` providers): the Embed API v2.

``POST {base_url}/v2/embed`` with ``Authorization: Bearer <key>`` and ``{"model", "texts", "input_type",
"embedding_types": ["float"], "output_dimension"?}``; the answer's ``embeddings.float`` are the vectors in the
order of the texts and ``meta.billed_units.input_tokens`` is the usage (the provider's own count).

``input_type`` tells Cohere what the texts are for, and vectors made for one purpose are meant to be
compared with those of its counterpart (a ``search_query`` against ``search_document`` vectors). OpenAI's
request has no such field, so the client may send ``input_type`` next to ``input`` (the OpenAI SDKs pass it
through ``extra_body``); without it the gateway sends ``search_document``, the side a client embeds in bulk
when it builds an index. ``dimensions`` becomes ``output_dimension``. No ``truncate`` is sent, so Cohere's
default (``END``: an over-long text is cut at its end) applies. Token-id inputs have no Cohere equivalent,
and Cohere takes at most 96 texts per request: both are a 400 naming ``input`` (another target may serve it).
"""

from __future__ import annotations

from typing import Any

from routing.core.answer import Usage
from routing.core.embeddings import EmbeddingsRequest
from routing.core.table import ModelSpec, ProviderSpec
from routing.providers.base import ProviderRequest, join_url
from routing.providers.common.vectors import finite_vector
from routing.providers.errors import CapabilityError, MalformedResponse

DEFAULT_INPUT_TYPE = "search_document"
INPUT_TYPES = ("search_document", "search_query", "classification", "clustering")
MAX_TEXTS = 96  # Cohere's limit on texts per embed call


def cohere_embeddings_request(provider: ProviderSpec, model: ModelSpec, request: EmbeddingsRequest,
                              api_key: str) -> ProviderRequest:
    texts: list[str] = []
    for i, item in enumerate(request.inputs):
        if isinstance(item, tuple):
            param = f"input[{i}]" if len(request.inputs) > 1 else "input"
            raise CapabilityError("token_input", "Cohere embeds text only; token id inputs have no equivalent", param)
        texts.append(item)
    if len(texts) > MAX_TEXTS:
        raise CapabilityError("input", f"input: Cohere embeds at most {MAX_TEXTS} texts per request, got "
                                       f"{len(texts)}", "input")
    input_type = request.input_type or DEFAULT_INPUT_TYPE
    if input_type not in INPUT_TYPES:
        raise CapabilityError("input_type", f"input_type: Cohere takes one of {', '.join(INPUT_TYPES)}, got "
                                            f"{input_type!r}", "input_type")
    body: dict[str, Any] = {"model": model.upstream, "texts": texts, "input_type": input_type,
                            "embedding_types": ["float"]}
    if request.dimensions is not None:
        body["output_dimension"] = request.dimensions
    headers = {"Authorization": f"Bearer {api_key}", "Content-Type": "application/json"}
    return ProviderRequest("POST", join_url(provider.base_url, "/embed", version="/v2"), headers, body)


def cohere_embeddings_vectors(data: Any, count: int) -> tuple[list[list[float]], Usage | None]:
    """The vectors in input order and the billed input tokens (None when the answer carries no count)."""
    embeddings = data.get("embeddings") if isinstance(data, dict) else None
    floats = embeddings.get("float") if isinstance(embeddings, dict) else None
    if not isinstance(floats, list) or len(floats) != count:
        raise MalformedResponse(f"the upstream returned no list of {count} float embeddings")
    vectors = [finite_vector(vector, f"embeddings.float[{i}]") for i, vector in enumerate(floats)]
    meta = data.get("meta")
    billed = meta.get("billed_units") if isinstance(meta, dict) else None
    tokens = billed.get("input_tokens") if isinstance(billed, dict) else None
    # Cohere writes counts as JSON numbers that may carry a fraction part (7.0); a bool is no count.
    if isinstance(tokens, int | float) and not isinstance(tokens, bool) and tokens >= 0:
        return vectors, Usage(input_tokens=int(tokens))
    return vectors, None

"""Embeddings on Vertex AI (``vertex`` providers): Google's text-embedding models through ``:predict``.

``POST {base}/v1/projects/{project}/locations/{region}/publishers/google/models/{upstream}:predict`` with
``{"instances": [{"content": text}, ...], "parameters": {"outputDimensionality": N}}`` (the parameter only when
the client asked for ``dimensions``); the answer's ``predictions[i].embeddings.values`` are the vectors, in the
order of the inputs, and ``predictions[i].embeddings.statistics.token_count`` add up to the usage (the
provider's own count, unlike the Gemini API's ``batchEmbedContents``). Token-id inputs have no Vertex
equivalent (a 400 naming ``input``). No ``task_type`` is sent: OpenAI's request has no field for it, and
Google's default (``RETRIEVAL_QUERY``) is what an OpenAI client expects of a query embedding.
"""

from __future__ import annotations

from typing import Any

from routing.core.answer import Usage
from routing.core.embeddings import EmbeddingsRequest
from routing.core.table import ModelSpec, ProviderSpec
from routing.providers.base import ProviderRequest
from routing.providers.common.vectors import finite_vector
from routing.providers.errors import CapabilityError, MalformedResponse
from routing.providers.vertex.adapter import bearer_headers, publisher_url


def vertex_embeddings_request(provider: ProviderSpec, model: ModelSpec, request: EmbeddingsRequest,
                              api_key: str) -> ProviderRequest:
    instances: list[dict[str, Any]] = []
    for i, item in enumerate(request.inputs):
        if isinstance(item, tuple):
            param = f"input[{i}]" if len(request.inputs) > 1 else "input"
            raise CapabilityError("token_input", "Vertex AI embeds text only; token id inputs have no equivalent",
                                  param)
        instances.append({"content": item})
    body: dict[str, Any] = {"instances": instances}
    if request.dimensions is not None:
        body["parameters"] = {"outputDimensionality": request.dimensions}
    url = publisher_url(provider, "google", model.upstream.removeprefix("models/"), "predict")
    return ProviderRequest("POST", url, bearer_headers(api_key), body)


def vertex_embeddings_vectors(data: Any, count: int) -> tuple[list[list[float]], Usage | None]:
    """The vectors in input order and the summed token counts (None when any prediction lacks its count)."""
    predictions = data.get("predictions") if isinstance(data, dict) else None
    if not isinstance(predictions, list) or len(predictions) != count:
        raise MalformedResponse(f"the upstream returned no list of {count} predictions")
    vectors: list[list[float]] = []
    tokens = 0
    counted = True
    for i, prediction in enumerate(predictions):
        embeddings = prediction.get("embeddings") if isinstance(prediction, dict) else None
        if not isinstance(embeddings, dict):
            raise MalformedResponse(f"predictions[{i}] has no embeddings")
        vectors.append(finite_vector(embeddings.get("values"), f"predictions[{i}].embeddings.values"))
        statistics = embeddings.get("statistics")
        count_value = statistics.get("token_count") if isinstance(statistics, dict) else None
        # Vertex writes the count as a JSON number that may carry a fraction part (7.0); a bool is no count.
        if isinstance(count_value, int | float) and not isinstance(count_value, bool) and count_value >= 0:
            tokens += int(count_value)
        else:
            counted = False
    return vectors, Usage(input_tokens=tokens) if counted else None

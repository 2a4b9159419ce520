"""What ``/v1/routing/explain`` adds for an embeddings request: which planned targets would take it, and why not.

The plan (enabled, healthy, in the order the attempts would go) is the engine's; on top of it each target is
put through the very translation its attempt would run (``build_embeddings_request``, pure, with no key), so a
target the attempt would refuse before sending (dimensions above the model's, token-id inputs a format cannot
carry, more texts than the format takes, an ``input_type`` it does not know) is shown as excluded, with the
same reason and message, instead of as a candidate the request would merely skip.
"""

from __future__ import annotations

from typing import Any

from routing.core.embeddings import EmbeddingsRequest
from routing.core.table import ModelSpec, RoutingTable
from routing.providers import TranslationError
from routing.providers.embeddings import build_embeddings_request
from routing.providers.errors import CapabilityError


def explain_embeddings(request: EmbeddingsRequest, table: RoutingTable,
                       planned: list[ModelSpec]) -> tuple[list[str], list[dict[str, Any]], dict[str, Any]]:
    """(the candidates that would take the request in attempt order, the planned ones that would refuse it,
    the ``embeddings`` section of the explanation)."""
    candidates: list[str] = []
    refused: list[dict[str, Any]] = []
    targets: list[dict[str, Any]] = []
    for model in planned:
        provider = table.providers[model.provider]
        entry: dict[str, Any] = {
            "target": model.name,
            "provider_kind": provider.kind,
            "family": model.family,
            "dimensions": model.dimensions,
            "vector_size": request.dimensions or model.dimensions,
        }
        try:
            build_embeddings_request(provider, model, request, "")
        except TranslationError as exc:
            reason = exc.capability if isinstance(exc, CapabilityError) else exc.code
            refusal = {"target": model.name, "reason": reason, "message": exc.message, "param": exc.param}
            refused.append(refusal)
            entry.update(serves=False, reason=reason, message=exc.message)
        else:
            candidates.append(model.name)
            entry["serves"] = True
        targets.append(entry)
    section = {
        "inputs": len(request.inputs),
        "token_id_inputs": sum(1 for item in request.inputs if isinstance(item, tuple)),
        "estimated_input_tokens": request.estimated_tokens(),
        "dimensions": request.dimensions,
        "input_type": request.input_type,
        "encoding_format": request.encoding_format,
        "targets": targets,
    }
    return candidates, refused, section

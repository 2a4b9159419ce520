"""The Cohere Chat v2 wire format.

``POST {base_url}/v2/chat`` with ``Authorization: Bearer <key>``; ``base_url`` is the host
(``https://api.cohere.com``; a trailing ``/v2`` is tolerated). Both client shapes are translated: an
Anthropic client's body goes through the OpenAI form first (anthropic_to_openai, then openai_to_cohere),
and answers and streams come back the same way. Cohere's errors are ``{"id", "message"}``.
"""

from __future__ import annotations

import json
from typing import Any

from routing.core.answer import Answer, Usage
from routing.core.table import ModelSpec, ProviderSpec
from routing.providers.base import UpstreamError, join_url
from routing.providers.cohere.request import openai_to_cohere
from routing.providers.cohere.response import cohere_to_openai_completion, usage_from_cohere
from routing.providers.cohere.stream import CohereEventDecoder
from routing.providers.pivot_adapter import PivotAdapter
from routing.providers.streaming.decoding import ChunkDecoder


class CohereAdapter(PivotAdapter):
    kind = "cohere"

    def request_from_openai(self, body: dict[str, Any], *, model: ModelSpec, stream: bool) -> dict[str, Any]:
        return openai_to_cohere(body, model=model, stream=stream)

    def url(self, *, provider: ProviderSpec, model: ModelSpec, stream: bool) -> str:
        return join_url(provider.base_url, "/chat", version="/v2")

    def headers(self, api_key: str) -> dict[str, str]:
        return {"Authorization": f"Bearer {api_key}", "Content-Type": "application/json"}

    def parse_error(self, *, status: int, data: bytes) -> UpstreamError:
        try:
            body = json.loads(data)
        except (json.JSONDecodeError, UnicodeDecodeError, RecursionError):
            body = None
        if isinstance(body, dict) and isinstance(body.get("message"), str) and "error" not in body:
            return UpstreamError(status=status, message=body["message"])
        return super().parse_error(status=status, data=data)

    def completion_of(self, data: Any, *, public_model: str, created: int) -> tuple[dict[str, Any], Answer, Usage]:
        body, answer = cohere_to_openai_completion(data, public_model=public_model, created=created)
        return body, answer, usage_from_cohere(data.get("usage"))

    def stream_decoder(self, *, public_model: str, created: int) -> ChunkDecoder:
        return CohereEventDecoder(public_model=public_model, created=created)

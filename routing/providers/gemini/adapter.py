"""The Gemini API wire format (Google AI Studio's ``generativelanguage`` REST API).

``POST {base_url}/v1beta/models/{upstream}:generateContent`` (``:streamGenerateContent?alt=sse`` to
stream) with ``x-goog-api-key``; ``base_url`` is the host (``https://generativelanguage.googleapis.com``;
a trailing ``/v1beta`` is tolerated). Both client shapes are translated: an Anthropic client's body goes
through the OpenAI form first (anthropic_to_openai, then openai_to_gemini), and answers come back the
same way.
"""

from __future__ import annotations

from typing import Any
from urllib.parse import quote

from routing.core.answer import Answer, Usage
from routing.core.table import ModelSpec, ProviderSpec
from routing.providers.base import join_url
from routing.providers.common.usage import usage_from_gemini
from routing.providers.gemini.request import openai_to_gemini
from routing.providers.gemini.response import gemini_to_openai_completion
from routing.providers.gemini.stream import GeminiEventDecoder
from routing.providers.pivot_adapter import PivotAdapter
from routing.providers.streaming.decoding import ChunkDecoder


class GeminiAdapter(PivotAdapter):
    kind = "gemini"

    def request_from_openai(self, body: dict[str, Any], *, model: ModelSpec, stream: bool) -> dict[str, Any]:
        return openai_to_gemini(body, model=model)

    def url(self, *, provider: ProviderSpec, model: ModelSpec, stream: bool) -> str:
        name = quote(model.upstream.removeprefix("models/"), safe="")
        method = ":streamGenerateContent?alt=sse" if stream else ":generateContent"
        return join_url(provider.base_url, f"/models/{name}{method}", version="/v1beta")

    def headers(self, api_key: str) -> dict[str, str]:
        return {"x-goog-api-key": api_key, "Content-Type": "application/json"}

    def completion_of(self, data: Any, *, public_model: str, created: int) -> tuple[dict[str, Any], Answer, Usage]:
        body, answer = gemini_to_openai_completion(data, public_model=public_model, created=created)
        return body, answer, usage_from_gemini(data.get("usageMetadata"))

    def stream_decoder(self, *, public_model: str, created: int) -> ChunkDecoder:
        return GeminiEventDecoder(public_model=public_model, created=created)

"""The Cohere Chat v2 wire format.

``POST {base_url}/v2/chat`` with ``Authorization: Bearer <key>``; ``base_url`` is the host
(``https://api.cohere.com``; a trailing ``/v2`` is tolerated). Both client shapes are translated: an
Anthropic client's body goes through the OpenAI form first (anthropic_to_openai, then openai_to_cohere),
and answers and streams come back the same way. Cohere's errors are ``{"id", "message"}``.
"""

from __future__ import annotations

import json
from typing import Any

from routing.core.table import ModelSpec, ProviderSpec
from routing.providers.anthropic.inbound_request import anthropic_to_openai
from routing.providers.anthropic.inbound_response import openai_to_anthropic_message
from routing.providers.anthropic.inbound_stream import AnthropicEventEncoder
from routing.providers.base import Adapter, ParsedResponse, UpstreamError, join_url
from routing.providers.cohere.request import openai_to_cohere
from routing.providers.cohere.response import cohere_to_openai_completion, usage_from_cohere
from routing.providers.cohere.stream import CohereEventDecoder
from routing.providers.errors import Inbound
from routing.providers.streaming.encoding import OpenAIFrameEncoder
from routing.providers.streaming.translators import StreamTranslator, TranslatingStream


class CohereAdapter(Adapter):
    kind = "cohere"

    def payload(self, *, model: ModelSpec, body: dict[str, Any], inbound: Inbound, stream: bool) -> dict[str, Any]:
        pivot = anthropic_to_openai(body, model=model) if inbound == "anthropic" else body
        return openai_to_cohere(pivot, model=model, stream=stream)

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

    def translate_response(self, data: Any, *, inbound: Inbound, public_model: str, created: int) -> ParsedResponse:
        body, answer = cohere_to_openai_completion(data, public_model=public_model, created=created)
        usage = usage_from_cohere(data.get("usage"))
        if inbound == "anthropic":
            return ParsedResponse(openai_to_anthropic_message(body, public_model=public_model), answer, usage)
        return ParsedResponse(body, answer, usage)

    def translator(
        self, *, inbound: Inbound, public_model: str, client_wants_usage: bool, created: int
    ) -> StreamTranslator:
        encoder: OpenAIFrameEncoder | AnthropicEventEncoder = (
            AnthropicEventEncoder(public_model=public_model)
            if inbound == "anthropic"
            else OpenAIFrameEncoder(client_wants_usage=client_wants_usage)
        )
        return TranslatingStream(
            inbound=inbound, decoder=CohereEventDecoder(public_model=public_model, created=created), encoder=encoder
        )

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

from routing.core.table import ModelSpec, ProviderSpec
from routing.providers.anthropic.inbound_request import anthropic_to_openai
from routing.providers.anthropic.inbound_response import openai_to_anthropic_message
from routing.providers.anthropic.inbound_stream import AnthropicEventEncoder
from routing.providers.base import Adapter, ParsedResponse, join_url
from routing.providers.common.usage import usage_from_gemini
from routing.providers.errors import Inbound
from routing.providers.gemini.request import openai_to_gemini
from routing.providers.gemini.response import gemini_to_openai_completion
from routing.providers.gemini.stream import GeminiEventDecoder
from routing.providers.streaming.encoding import OpenAIFrameEncoder
from routing.providers.streaming.translators import StreamTranslator, TranslatingStream


class GeminiAdapter(Adapter):
    kind = "gemini"

    def payload(self, *, model: ModelSpec, body: dict[str, Any], inbound: Inbound, stream: bool) -> dict[str, Any]:
        pivot = anthropic_to_openai(body, model=model) if inbound == "anthropic" else body
        return openai_to_gemini(pivot, model=model)

    def url(self, *, provider: ProviderSpec, model: ModelSpec, stream: bool) -> str:
        name = quote(model.upstream.removeprefix("models/"), safe="")
        method = ":streamGenerateContent?alt=sse" if stream else ":generateContent"
        return join_url(provider.base_url, f"/models/{name}{method}", version="/v1beta")

    def headers(self, api_key: str) -> dict[str, str]:
        return {"x-goog-api-key": api_key, "Content-Type": "application/json"}

    def translate_response(self, data: Any, *, inbound: Inbound, public_model: str, created: int) -> ParsedResponse:
        body, answer = gemini_to_openai_completion(data, public_model=public_model, created=created)
        usage = usage_from_gemini(data.get("usageMetadata"))
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
            inbound=inbound, decoder=GeminiEventDecoder(public_model=public_model, created=created), encoder=encoder
        )

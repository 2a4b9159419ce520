"""The Anthropic Messages wire format.

``POST {base_url}/v1/messages`` with ``x-api-key`` and ``anthropic-version: 2023-06-01``; ``base_url`` is
the host (``https://api.anthropic.com``; a trailing ``/v1`` is tolerated). An Anthropic client's body
passes through with only ``model`` rewritten; an OpenAI client's is translated (openai_to_anthropic).
"""

from __future__ import annotations

from collections.abc import Mapping
from typing import Any

from routing.core.table import ModelSpec, ProviderSpec
from routing.providers.anthropic_response import answer_from_anthropic, anthropic_to_openai_completion
from routing.providers.base import Adapter, ParsedResponse, join_url
from routing.providers.errors import Inbound
from routing.providers.openai_to_anthropic import DEFAULT_MAX_TOKENS, openai_to_anthropic
from routing.providers.stream_encoding import OpenAIFrameEncoder
from routing.providers.stream_from_anthropic import AnthropicEventDecoder
from routing.providers.streams import AnthropicPassThrough, StreamTranslator, TranslatingStream
from routing.providers.usage import usage_from_anthropic

ANTHROPIC_VERSION = "2023-06-01"


class AnthropicAdapter(Adapter):
    kind = "anthropic"

    def payload(self, *, model: ModelSpec, body: dict[str, Any], inbound: Inbound, stream: bool) -> dict[str, Any]:
        if inbound == "openai":
            out = openai_to_anthropic(body, model=model)
        else:
            out = dict(body)  # shallow: the messages are shared, not copied
            out["model"] = model.upstream
            if out.get("max_tokens") is None:
                out["max_tokens"] = model.max_output_tokens or DEFAULT_MAX_TOKENS
        if stream:
            out["stream"] = True
        else:
            out.pop("stream", None)
        return out

    def url(self, *, provider: ProviderSpec, model: ModelSpec, stream: bool) -> str:
        return join_url(provider.base_url, "/messages", version="/v1")

    def headers(self, api_key: str) -> dict[str, str]:
        return {"x-api-key": api_key, "anthropic-version": ANTHROPIC_VERSION, "Content-Type": "application/json"}

    def forwarded_headers(self, client_headers: Mapping[str, str], inbound: Inbound) -> dict[str, str]:
        """``anthropic-beta`` from an Anthropic client: it switches on API features the body relies on."""
        if inbound != "anthropic":
            return {}
        for name, value in client_headers.items():
            if name.lower() == "anthropic-beta" and value:
                return {"anthropic-beta": value}
        return {}

    def translate_response(self, data: Any, *, inbound: Inbound, public_model: str, created: int) -> ParsedResponse:
        answer = answer_from_anthropic(data)
        usage = usage_from_anthropic(data.get("usage"))
        if inbound == "openai":
            body = anthropic_to_openai_completion(data, public_model=public_model, created=created)
            return ParsedResponse(body, answer, usage)
        client_body = dict(data)
        client_body["model"] = public_model
        return ParsedResponse(client_body, answer, usage)

    def translator(
        self, *, inbound: Inbound, public_model: str, client_wants_usage: bool, created: int
    ) -> StreamTranslator:
        if inbound == "openai":
            return TranslatingStream(
                inbound="openai",
                decoder=AnthropicEventDecoder(public_model=public_model, created=created),
                encoder=OpenAIFrameEncoder(client_wants_usage=client_wants_usage),
            )
        return AnthropicPassThrough(public_model=public_model)

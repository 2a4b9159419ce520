"""The Amazon Bedrock Converse wire format.

``POST {base_url}/model/{modelId}/converse`` (``/converse-stream`` to stream); ``base_url`` is the regional
runtime endpoint (``https://bedrock-runtime.{region}.amazonaws.com``, filled in from the provider's region).
The model id (or inference profile id or ARN) is percent-encoded into the path, as the AWS SDKs do.

Credentials: with an Amazon Bedrock API key (the provider's ``api_key``) the request carries
``Authorization: Bearer <key>``; without one the adapter adds no credential header and the gateway signs the
exact serialized request with SigV4 (``routing.clients.aws_signing``) before it is sent.

Both client shapes are translated through the OpenAI form (anthropic_to_openai, then openai_to_bedrock);
answers come back the same way. The stream is AWS's binary event stream, read by ``aws_eventstream`` through
the translator's parser seam. Errors are ``{"message": ...}`` with the exception's name in the
``x-amzn-ErrorType`` header (read by routing.core.error_classifier).
"""

from __future__ import annotations

import json
from typing import Any
from urllib.parse import quote

from routing.core.table import ModelSpec, ProviderSpec
from routing.providers.anthropic.inbound_request import anthropic_to_openai
from routing.providers.anthropic.inbound_response import openai_to_anthropic_message
from routing.providers.anthropic.inbound_stream import AnthropicEventEncoder
from routing.providers.base import Adapter, ParsedResponse, UpstreamError
from routing.providers.bedrock.eventstream import EventStreamParser
from routing.providers.bedrock.request import openai_to_bedrock
from routing.providers.bedrock.response import bedrock_to_openai_completion, usage_from_bedrock
from routing.providers.bedrock.stream import BedrockEventDecoder
from routing.providers.errors import Inbound
from routing.providers.streaming.encoding import OpenAIFrameEncoder
from routing.providers.streaming.translators import StreamTranslator, TranslatingStream


def model_url(provider: ProviderSpec, model: ModelSpec, operation: str) -> str:
    """``{base_url}/model/{modelId}/{operation}`` with the id percent-encoded (``:`` and ``/`` included)."""
    return f"{provider.base_url.rstrip('/')}/model/{quote(model.upstream, safe='')}/{operation}"


def bedrock_headers(api_key: str) -> dict[str, str]:
    """The JSON headers, with the API key as a bearer token when there is one (else SigV4 signs later)."""
    headers = {"Content-Type": "application/json"}
    if api_key:
        headers["Authorization"] = f"Bearer {api_key}"
    return headers


class BedrockAdapter(Adapter):
    kind = "bedrock"

    def payload(self, *, model: ModelSpec, body: dict[str, Any], inbound: Inbound, stream: bool) -> dict[str, Any]:
        pivot = anthropic_to_openai(body, model=model) if inbound == "anthropic" else body
        return openai_to_bedrock(pivot, model=model)

    def url(self, *, provider: ProviderSpec, model: ModelSpec, stream: bool) -> str:
        return model_url(provider, model, "converse-stream" if stream else "converse")

    def headers(self, api_key: str) -> dict[str, str]:
        return bedrock_headers(api_key)

    def parse_error(self, *, status: int, data: bytes) -> UpstreamError:
        try:
            body = json.loads(data)
        except (json.JSONDecodeError, UnicodeDecodeError, RecursionError):
            body = None
        if isinstance(body, dict) and "error" not in body:
            message = body.get("message", body.get("Message"))
            if isinstance(message, str):
                return UpstreamError(status=status, message=message)
        return super().parse_error(status=status, data=data)

    def translate_response(self, data: Any, *, inbound: Inbound, public_model: str, created: int) -> ParsedResponse:
        body, answer = bedrock_to_openai_completion(data, public_model=public_model, created=created)
        usage = usage_from_bedrock(data.get("usage"))
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
            inbound=inbound, decoder=BedrockEventDecoder(public_model=public_model, created=created), encoder=encoder,
            parser=EventStreamParser(),
        )

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

from routing.core.answer import Answer, Usage
from routing.core.table import ModelSpec, ProviderSpec
from routing.providers.base import UpstreamError
from routing.providers.bedrock.eventstream import EventStreamParser
from routing.providers.bedrock.request import openai_to_bedrock
from routing.providers.bedrock.response import bedrock_to_openai_completion, usage_from_bedrock
from routing.providers.bedrock.stream import BedrockEventDecoder
from routing.providers.pivot_adapter import PivotAdapter
from routing.providers.streaming.decoding import ChunkDecoder


def model_url(provider: ProviderSpec, model: ModelSpec, operation: str) -> str:
    """``{base_url}/model/{modelId}/{operation}`` with the id percent-encoded (``:`` and ``/`` included)."""
    return f"{provider.base_url.rstrip('/')}/model/{quote(model.upstream, safe='')}/{operation}"


def bedrock_headers(api_key: str) -> dict[str, str]:
    """The JSON headers, with the API key as a bearer token when there is one (else SigV4 signs later)."""
    headers = {"Content-Type": "application/json"}
    if api_key:
        headers["Authorization"] = f"Bearer {api_key}"
    return headers


class BedrockAdapter(PivotAdapter):
    kind = "bedrock"

    def request_from_openai(self, body: dict[str, Any], *, model: ModelSpec, stream: bool) -> dict[str, Any]:
        return openai_to_bedrock(body, model=model)

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

    def completion_of(self, data: Any, *, public_model: str, created: int) -> tuple[dict[str, Any], Answer, Usage]:
        body, answer = bedrock_to_openai_completion(data, public_model=public_model, created=created)
        return body, answer, usage_from_bedrock(data.get("usage"))

    def stream_decoder(self, *, public_model: str, created: int) -> ChunkDecoder:
        return BedrockEventDecoder(public_model=public_model, created=created)

    def stream_parser(self) -> EventStreamParser:
        return EventStreamParser()  # AWS's binary event stream, not server-sent events

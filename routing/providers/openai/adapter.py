"""The OpenAI-compatible wire format: OpenAI, vLLM, Ollama, Groq, DeepSeek, OpenRouter and the like.

``POST {base_url}/chat/completions`` with ``Authorization: Bearer <key>``; ``base_url`` includes the
version path (``https://api.openai.com/v1``). An OpenAI client's body passes through with only ``model``
rewritten (and usage requested on streams, so the gateway can count it); an Anthropic client's body is
translated (anthropic_to_openai) and so is the answer.
"""

from __future__ import annotations

from typing import Any

from routing.core.table import ModelSpec, ProviderSpec
from routing.providers.anthropic.inbound_request import anthropic_to_openai
from routing.providers.anthropic.inbound_response import openai_to_anthropic_message
from routing.providers.anthropic.inbound_stream import AnthropicEventEncoder
from routing.providers.base import Adapter, ParsedResponse, join_url
from routing.providers.common.usage import usage_from_openai
from routing.providers.errors import CapabilityError, Inbound
from routing.providers.pivot.chat_completion import answer_from_openai
from routing.providers.streaming.decoding import OpenAIChunkDecoder
from routing.providers.streaming.translators import OpenAIPassThrough, StreamTranslator, TranslatingStream


def openai_payload(*, model: ModelSpec, body: dict[str, Any], inbound: Inbound, stream: bool) -> dict[str, Any]:
    """The chat completions body for an OpenAI-format upstream. A shallow copy: the client's messages,
    possibly megabytes of base64 images, are shared, not copied."""
    if inbound == "anthropic":
        out = anthropic_to_openai(body, model=model)
        if "top_k" in out:
            raise CapabilityError("top_k", "'top_k' has no equivalent in the OpenAI chat format", "top_k")
    else:
        out = dict(body)
        out["model"] = model.upstream
    if stream:
        out["stream"] = True
        options = dict(out.get("stream_options") or {})
        options["include_usage"] = True  # usage is counted for every stream; the client's copy is optional
        out["stream_options"] = options
    else:
        out.pop("stream", None)
        out.pop("stream_options", None)
    return out


class OpenAIAdapter(Adapter):
    kind = "openai"

    def payload(self, *, model: ModelSpec, body: dict[str, Any], inbound: Inbound, stream: bool) -> dict[str, Any]:
        return openai_payload(model=model, body=body, inbound=inbound, stream=stream)

    def url(self, *, provider: ProviderSpec, model: ModelSpec, stream: bool) -> str:
        return join_url(provider.base_url, "/chat/completions")

    def headers(self, api_key: str) -> dict[str, str]:
        return {"Authorization": f"Bearer {api_key}", "Content-Type": "application/json"}

    def translate_response(self, data: Any, *, inbound: Inbound, public_model: str, created: int) -> ParsedResponse:
        answer = answer_from_openai(data)
        usage = usage_from_openai(data.get("usage"))
        if inbound == "anthropic":
            return ParsedResponse(openai_to_anthropic_message(data, public_model=public_model), answer, usage)
        client_body = dict(data)
        client_body["model"] = public_model
        return ParsedResponse(client_body, answer, usage)

    def translator(
        self, *, inbound: Inbound, public_model: str, client_wants_usage: bool, created: int
    ) -> StreamTranslator:
        if inbound == "anthropic":
            return TranslatingStream(
                inbound="anthropic",
                decoder=OpenAIChunkDecoder(public_model=public_model, created=created),
                encoder=AnthropicEventEncoder(public_model=public_model),
            )
        return OpenAIPassThrough(public_model=public_model, client_wants_usage=client_wants_usage)

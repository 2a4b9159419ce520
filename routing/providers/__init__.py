"""Provider adapters: one per wire format, pure (no I/O), called by the engine.

Public API::

    get_adapter(kind) -> Adapter                      # kind: one of routing.core.table.PROVIDER_KINDS

    adapter.build_request(*, provider: ProviderSpec, model: ModelSpec, body: dict,
                          inbound: "openai" | "anthropic", stream: bool, api_key: str,
                          client_headers: Mapping[str, str] | None = None,
                          needs: Mapping[str, str] | None = None) -> ProviderRequest
        # ProviderRequest(method, url, headers, json); raises CapabilityError / RequestShapeError
        # (both TranslationError: status 400, .param = JSON path in the client's body) BEFORE sending.
        # client_headers: the client's request headers; only anthropic-beta (Anthropic client to an
        # Anthropic provider) is passed on. needs: required_capabilities of this body, when already
        # scanned (None: scanned here). The request's repr hides the key.

    adapter.parse_response(*, status: int, data: bytes, inbound, public_model: str,
                           created: int | None = None) -> ParsedResponse
        # ParsedResponse(client_body, answer, usage) for a 2xx body; raises MalformedResponse

    adapter.parse_error(*, status: int, data: bytes) -> UpstreamError
        # UpstreamError(status, message, type, code).is_context_overflow, for a non-2xx body

    adapter.stream_translator(*, inbound, public_model: str, client_wants_usage: bool,
                              created: int | None = None) -> StreamTranslator
        # .feed(bytes) -> list[bytes]; .finish() -> list[bytes]; .complete; .failure; .usage; .answer;
        # .error_frames(error_type, message) -> list[bytes]   (see routing.providers.streaming.translators)

    client_wants_usage(inbound, body) -> bool          # pass to stream_translator
    required_capabilities(inbound, body) -> {capability: json_path}   # to filter candidates early
    client_error_body(inbound, status, message, type=None, code=None, param=None) -> dict
    translation_error_body(inbound, error) -> dict     # the 400 body for a TranslationError

Same shape in and out (OpenAI client to an OpenAI-format provider, Anthropic client to Anthropic) is a
pass-through; every other pair is translated through the OpenAI chat format. docs/providers.md has the
translation table.

Layout: one package per wire format (``openai``, ``anthropic``, ``gemini``, ``cohere``, ``bedrock``, ``vertex``,
``responses_api``), each with its ``adapter`` and the ``request``, ``response``, ``stream`` and ``embeddings`` of
that format (Anthropic, which is also a client protocol, names both sides: ``upstream_*`` and ``inbound_*``);
under them ``common`` (body reads, usage, ids, vectors), ``streaming`` (SSE, decoding, encoding, accumulation)
and ``pivot`` (the OpenAI chat completion every translation goes through). ``embeddings`` and ``probes`` here
pick the format's module by provider kind.
"""

from __future__ import annotations

from routing.providers.anthropic.adapter import AnthropicAdapter
from routing.providers.base import Adapter, ParsedResponse, ProviderRequest, UpstreamError, client_wants_usage
from routing.providers.bedrock.adapter import BedrockAdapter
from routing.providers.capabilities import check_capabilities, required_capabilities
from routing.providers.cohere.adapter import CohereAdapter
from routing.providers.errors import (
    CapabilityError,
    Inbound,
    MalformedResponse,
    ProviderError,
    RequestShapeError,
    TranslationError,
    client_error_body,
    error_type_for_status,
    translation_error_body,
)
from routing.providers.gemini.adapter import GeminiAdapter
from routing.providers.openai.adapter import OpenAIAdapter
from routing.providers.openai.azure_adapter import AzureOpenAIAdapter
from routing.providers.openai.preset_adapter import OpenAIPresetAdapter
from routing.providers.openai.presets import PRESETS
from routing.providers.streaming.decoding import StreamFailure
from routing.providers.streaming.translators import StreamTranslator
from routing.providers.vertex.adapter import VertexAnthropicAdapter, VertexGeminiAdapter

_ADAPTERS: dict[str, Adapter] = {
    adapter.kind: adapter
    for adapter in (
        OpenAIAdapter(), AzureOpenAIAdapter(), AnthropicAdapter(), GeminiAdapter(), CohereAdapter(), BedrockAdapter(),
        VertexGeminiAdapter(), VertexAnthropicAdapter(),
        *(OpenAIPresetAdapter(preset) for preset in PRESETS.values()),
    )
}


def get_adapter(kind: str) -> Adapter:
    """The adapter for a provider kind (adapters are stateless and shared); KeyError for an unknown kind."""
    try:
        return _ADAPTERS[kind]
    except KeyError:
        raise KeyError(f"no adapter for provider kind '{kind}'") from None


__all__ = [
    "Adapter",
    "CapabilityError",
    "Inbound",
    "MalformedResponse",
    "ParsedResponse",
    "ProviderError",
    "ProviderRequest",
    "RequestShapeError",
    "StreamFailure",
    "StreamTranslator",
    "TranslationError",
    "UpstreamError",
    "check_capabilities",
    "client_error_body",
    "client_wants_usage",
    "error_type_for_status",
    "get_adapter",
    "required_capabilities",
    "translation_error_body",
]

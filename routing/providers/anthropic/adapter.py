"""The Anthropic Messages wire format.

``POST {base_url}/v1/messages`` with ``x-api-key`` and ``anthropic-version: 2023-06-01``; ``base_url`` is
the host (``https://api.anthropic.com``; a trailing ``/v1`` is tolerated). An Anthropic client's body
passes through with only ``model`` rewritten; an OpenAI client's is translated (openai_to_anthropic).

An Anthropic client's ``anthropic-beta`` header is passed on only for the betas the provider allows
(``allowed_betas``; none by default): a beta can change what a request costs (a 1M-token context is billed at
a higher rate) or what is kept, so the operator decides, per provider. A beta not allowed is dropped, not
refused, and the answer names it in ``X-GoModel-Dropped-Betas`` (``dropped_betas_header``).
"""

from __future__ import annotations

import re
from collections.abc import Mapping
from typing import Any

from routing.core.table import ModelSpec, ProviderSpec
from routing.providers.anthropic.upstream_request import DEFAULT_MAX_TOKENS, openai_to_anthropic
from routing.providers.anthropic.upstream_response import answer_from_anthropic, anthropic_to_openai_completion
from routing.providers.anthropic.upstream_stream import AnthropicEventDecoder
from routing.providers.base import Adapter, ParsedResponse, ProviderRequest, join_url
from routing.providers.common.usage import usage_from_anthropic
from routing.providers.errors import Inbound
from routing.providers.streaming.encoding import OpenAIFrameEncoder
from routing.providers.streaming.translators import AnthropicPassThrough, StreamTranslator, TranslatingStream

ANTHROPIC_VERSION = "2023-06-01"
BETA_HEADER = "anthropic-beta"
DROPPED_BETAS_HEADER = "X-GoModel-Dropped-Betas"
# The provider kinds that receive Anthropic's Messages body, and with it an Anthropic client's betas.
BETA_KINDS = frozenset({"anthropic", "vertex_anthropic"})
# Anthropic's beta names: a feature and a date, such as prompt-caching-2024-07-31 or context-1m-2025-08-07.
_BETA_NAME = re.compile(r"^[A-Za-z0-9][A-Za-z0-9._-]{0,99}$")


def beta_names_problem(value: object) -> str | None:
    """Why ``value`` is not a list of beta names (the ``allowed_betas`` of a provider), or None."""
    if not isinstance(value, list) or not all(isinstance(name, str) for name in value):
        return 'expected a list of beta names such as ["prompt-caching-2024-07-31"]'
    for name in value:
        if not _BETA_NAME.match(name):
            return f"{name[:60]!r} is not a beta name such as prompt-caching-2024-07-31"
    return None


def requested_betas(client_headers: Mapping[str, str]) -> list[str]:
    """The betas a client's ``anthropic-beta`` header asks for, in its order (comma-separated, any case of name)."""
    for name, value in client_headers.items():
        if name.lower() == BETA_HEADER and value:
            return [beta.strip() for beta in value.split(",") if beta.strip()]
    return []


def sorted_betas(client_headers: Mapping[str, str], allowed: frozenset[str]) -> tuple[list[str], list[str]]:
    """(the betas to pass on, the betas dropped): each asked-for beta is passed on only if ``allowed`` holds it."""
    forwarded: list[str] = []
    dropped: list[str] = []
    for beta in requested_betas(client_headers):
        (forwarded if beta in allowed else dropped).append(beta)
    return forwarded, dropped


def dropped_betas_header(client_headers: Mapping[str, str], provider: ProviderSpec | None,
                         inbound: Inbound) -> dict[str, str]:
    """``{"X-GoModel-Dropped-Betas": "a,b"}`` when the provider that answered was not sent some of the client's
    betas, else ``{}`` (an OpenAI client's request carries no betas to any provider)."""
    if inbound != "anthropic" or provider is None or provider.kind not in BETA_KINDS:
        return {}
    _, dropped = sorted_betas(client_headers, provider.allowed_betas)
    return {DROPPED_BETAS_HEADER: ",".join(dropped)} if dropped else {}


def beta_headers(client_headers: Mapping[str, str] | None, provider: ProviderSpec, inbound: Inbound) -> dict[str, str]:
    """The ``anthropic-beta`` header an Anthropic client's request carries to ``provider``: its allowed betas."""
    if inbound != "anthropic" or not client_headers:
        return {}
    forwarded, _ = sorted_betas(client_headers, provider.allowed_betas)
    return {BETA_HEADER: ",".join(forwarded)} if forwarded else {}


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

    def build_request(
        self,
        *,
        provider: ProviderSpec,
        model: ModelSpec,
        body: dict[str, Any],
        inbound: Inbound,
        stream: bool,
        api_key: str,
        client_headers: Mapping[str, str] | None = None,
        needs: Mapping[str, str] | None = None,
    ) -> ProviderRequest:
        """The upstream request, with the client's ``anthropic-beta`` narrowed to the provider's allowed betas."""
        request = super().build_request(provider=provider, model=model, body=body, inbound=inbound, stream=stream,
                                        api_key=api_key, needs=needs)
        request.headers.update(beta_headers(client_headers, provider, inbound))
        return request

    def translate_response(self, data: Any, *, inbound: Inbound, public_model: str, created: int) -> ParsedResponse:
        # An OpenAI client's tool call ids carry the thinking blocks; its answer names the calls as it does.
        answer = answer_from_anthropic(data, carry_thinking=inbound == "openai")
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

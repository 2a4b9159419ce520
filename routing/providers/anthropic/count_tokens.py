"""Anthropic's ``POST /v1/messages/count_tokens``: the request to an Anthropic-kind provider and its answer.

Only the fields the endpoint takes are sent (``model`` rewritten to the upstream name, ``messages``, ``system``,
``tools``, ``tool_choice``, ``thinking``, ``mcp_servers``): a client that sends its whole Messages body,
``max_tokens`` and ``stream`` included, still gets a count rather than the provider's "extra inputs" error.

On Vertex AI (``vertex_anthropic``) the same body (plus ``"anthropic_version": "vertex-2023-10-16"``) goes to
``.../publishers/anthropic/models/count-tokens:rawPredict`` with the provider's access token; the answer is
Anthropic's.
"""

from __future__ import annotations

from collections.abc import Mapping
from typing import Any

from routing.core.table import ModelSpec, ProviderSpec
from routing.providers.anthropic.adapter import AnthropicAdapter, beta_headers
from routing.providers.base import ProviderRequest, join_url, load_json_body
from routing.providers.errors import MalformedResponse
from routing.providers.vertex.adapter import VERTEX_ANTHROPIC_VERSION, bearer_headers, publisher_url

COUNTED_FIELDS = ("messages", "system", "tools", "tool_choice", "thinking", "mcp_servers")
COUNTING_KINDS = frozenset({"anthropic", "vertex_anthropic"})  # the provider kinds that count tokens for us
_anthropic = AnthropicAdapter()


def build_count_tokens_request(provider: ProviderSpec, model: ModelSpec, body: Mapping[str, Any], api_key: str,
                               client_headers: Mapping[str, str] | None = None) -> ProviderRequest:
    payload: dict[str, Any] = {"model": model.upstream}
    payload.update({name: body[name] for name in COUNTED_FIELDS if name in body})
    if provider.kind == "vertex_anthropic":
        payload["anthropic_version"] = VERTEX_ANTHROPIC_VERSION
        headers = bearer_headers(api_key)
        url = publisher_url(provider, "anthropic", "count-tokens", "rawPredict")
    else:
        headers = _anthropic.headers(api_key)
        url = join_url(provider.base_url, "/messages/count_tokens", version="/v1")
    headers.update(beta_headers(client_headers, provider, "anthropic"))  # the provider's allowed betas only
    return ProviderRequest("POST", url, headers, payload)


def parse_count_tokens(data: bytes) -> int:
    """``input_tokens`` of a 2xx answer; MalformedResponse when there is none."""
    body = load_json_body(data)
    tokens = body.get("input_tokens") if isinstance(body, dict) else None
    if not isinstance(tokens, int) or isinstance(tokens, bool) or tokens < 0:
        raise MalformedResponse("the count_tokens answer has no input_tokens")
    return tokens

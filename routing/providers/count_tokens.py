"""Anthropic's ``POST /v1/messages/count_tokens``: the request to an Anthropic-kind provider and its answer.

Only the fields the endpoint takes are sent (``model`` rewritten to the upstream name, ``messages``, ``system``,
``tools``, ``tool_choice``, ``thinking``, ``mcp_servers``): a client that sends its whole Messages body,
``max_tokens`` and ``stream`` included, still gets a count rather than the provider's "extra inputs" error.
"""

from __future__ import annotations

from collections.abc import Mapping
from typing import Any

from routing.core.table import ModelSpec, ProviderSpec
from routing.providers.anthropic_adapter import AnthropicAdapter
from routing.providers.base import UpstreamRequest, join_url, load_json_body
from routing.providers.errors import MalformedResponse

COUNTED_FIELDS = ("messages", "system", "tools", "tool_choice", "thinking", "mcp_servers")
_anthropic = AnthropicAdapter()


def build_count_tokens_request(provider: ProviderSpec, model: ModelSpec, body: Mapping[str, Any], api_key: str,
                               client_headers: Mapping[str, str] | None = None) -> UpstreamRequest:
    payload: dict[str, Any] = {"model": model.upstream}
    payload.update({name: body[name] for name in COUNTED_FIELDS if name in body})
    headers = _anthropic.headers(api_key)
    if client_headers:
        headers.update(_anthropic.forwarded_headers(client_headers, "anthropic"))
    return UpstreamRequest("POST", join_url(provider.base_url, "/messages/count_tokens", version="/v1"), headers,
                           payload)


def parse_count_tokens(data: bytes) -> int:
    """``input_tokens`` of a 2xx answer; MalformedResponse when there is none."""
    body = load_json_body(data)
    tokens = body.get("input_tokens") if isinstance(body, dict) else None
    if not isinstance(tokens, int) or isinstance(tokens, bool) or tokens < 0:
        raise MalformedResponse("the count_tokens answer has no input_tokens")
    return tokens

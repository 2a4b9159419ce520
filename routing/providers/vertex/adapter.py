"""Google Vertex AI: Gemini models (``vertex``) and Anthropic's Claude models (``vertex_anthropic``).

Both publishers live under one resource path, ``{base_url}/v1/projects/{project}/locations/{region}/publishers/
{google|anthropic}/models/{upstream}``, and take ``Authorization: Bearer <access token>`` (a Google OAuth token
minted from the provider's credentials by ``routing.clients.gcp_tokens``; the engine passes it as the attempt's
key). ``base_url`` is the regional host (``https://us-central1-aiplatform.googleapis.com``, or
``https://aiplatform.googleapis.com`` for ``global``); a trailing ``/v1`` is tolerated.

- ``vertex``: ``:generateContent`` and ``:streamGenerateContent?alt=sse`` with the Gemini API's body and
  answers, so the Gemini adapter's translation serves both client shapes unchanged.
- ``vertex_anthropic``: ``:rawPredict`` and ``:streamRawPredict`` with Anthropic's Messages body minus ``model``
  (the path names it) plus ``"anthropic_version": "vertex-2023-10-16"``; answers and stream events are
  Anthropic's, so an Anthropic client's request is the same pass-through as to Anthropic itself (its
  ``anthropic-beta`` header too) and an OpenAI client's is translated as for Anthropic.

Errors are Google's ``{"error": {"code", "message", "status"}}`` (for both publishers: authentication, quota,
an unknown model), sometimes wrapped in a list, or Anthropic's own for Claude's request checks; both are read.
"""

from __future__ import annotations

from typing import Any
from urllib.parse import quote

from routing.core.table import ModelSpec, ProviderSpec
from routing.providers.anthropic.adapter import AnthropicAdapter
from routing.providers.base import UpstreamError, join_url, load_json_body
from routing.providers.errors import Inbound, MalformedResponse
from routing.providers.gemini.adapter import GeminiAdapter

VERTEX_ANTHROPIC_VERSION = "vertex-2023-10-16"


def publisher_url(provider: ProviderSpec, publisher: str, model: str, method: str) -> str:
    """``{base}/v1/projects/{project}/locations/{region}/publishers/{publisher}/models/{model}:{method}``."""
    path = (f"/projects/{quote(provider.project, safe='')}/locations/{quote(provider.region, safe='')}"
            f"/publishers/{publisher}/models/{quote(model, safe='@')}:{method}")
    return join_url(provider.base_url, path, version="/v1")


def bearer_headers(access_token: str) -> dict[str, str]:
    return {"Authorization": f"Bearer {access_token}", "Content-Type": "application/json"}


def parse_google_error(status: int, data: bytes, fallback: UpstreamError) -> UpstreamError:
    """Google's error body, also when wrapped in a one-element list (as Vertex answers some errors)."""
    try:
        body = load_json_body(data)
    except MalformedResponse:
        return fallback
    if isinstance(body, list) and body and isinstance(body[0], dict):
        error = body[0].get("error")
        if isinstance(error, dict):
            return UpstreamError(status=status, message=str(error.get("message") or ""),
                                 type=str(error.get("status") or ""), code=str(error.get("code") or ""))
    return fallback


class VertexGeminiAdapter(GeminiAdapter):
    kind = "vertex"

    def url(self, *, provider: ProviderSpec, model: ModelSpec, stream: bool) -> str:
        name = model.upstream.removeprefix("models/")
        method = "streamGenerateContent?alt=sse" if stream else "generateContent"
        return publisher_url(provider, "google", name, method)

    def headers(self, api_key: str) -> dict[str, str]:
        return bearer_headers(api_key)

    def parse_error(self, *, status: int, data: bytes) -> UpstreamError:
        return parse_google_error(status, data, super().parse_error(status=status, data=data))


class VertexAnthropicAdapter(AnthropicAdapter):
    kind = "vertex_anthropic"

    def payload(self, *, model: ModelSpec, body: dict[str, Any], inbound: Inbound, stream: bool) -> dict[str, Any]:
        out = super().payload(model=model, body=body, inbound=inbound, stream=stream)
        out.pop("model", None)  # the URL names it (Anthropic's own Vertex client sends none either)
        out["anthropic_version"] = VERTEX_ANTHROPIC_VERSION
        return out

    def url(self, *, provider: ProviderSpec, model: ModelSpec, stream: bool) -> str:
        return publisher_url(provider, "anthropic", model.upstream, "streamRawPredict" if stream else "rawPredict")

    def headers(self, api_key: str) -> dict[str, str]:
        return bearer_headers(api_key)

    def parse_error(self, *, status: int, data: bytes) -> UpstreamError:
        return parse_google_error(status, data, super().parse_error(status=status, data=data))

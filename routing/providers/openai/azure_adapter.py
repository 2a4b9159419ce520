"""Azure OpenAI: the OpenAI format on a deployment URL.

``POST {base_url}/openai/deployments/{upstream}/chat/completions?api-version={api_version}`` with an
``api-key`` header; the deployment in the URL names the model, so the body carries none. ``base_url`` is
the resource endpoint (``https://<resource>.openai.azure.com``).
"""

from __future__ import annotations

from typing import Any
from urllib.parse import quote

from routing.core.table import ModelSpec, ProviderSpec
from routing.providers.base import join_url
from routing.providers.errors import Inbound
from routing.providers.openai.adapter import OpenAIAdapter, openai_payload

DEFAULT_API_VERSION = "2024-10-21"  # the GA version that streams usage (stream_options)


class AzureOpenAIAdapter(OpenAIAdapter):
    kind = "azure_openai"

    def payload(self, *, model: ModelSpec, body: dict[str, Any], inbound: Inbound, stream: bool) -> dict[str, Any]:
        out = openai_payload(model=model, body=body, inbound=inbound, stream=stream)
        out.pop("model", None)
        return out

    def url(self, *, provider: ProviderSpec, model: ModelSpec, stream: bool) -> str:
        base = provider.base_url.rstrip("/").removesuffix("/openai")
        path = f"/openai/deployments/{quote(model.upstream, safe='')}/chat/completions"
        return join_url(base, path) + f"?api-version={quote(provider.api_version or DEFAULT_API_VERSION)}"

    def headers(self, api_key: str) -> dict[str, str]:
        return {"api-key": api_key, "Content-Type": "application/json"}

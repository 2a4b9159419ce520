"""The adapter of an OpenAI-compatible preset kind (routing.providers.openai.presets): the OpenAI format,
the preset's default base URL, its rules applied before sending, no key header for a keyless local
server, and the client headers the host reads passed on."""

from __future__ import annotations

from collections.abc import Mapping
from typing import Any

from routing.core.table import ModelSpec, ProviderSpec
from routing.providers.base import join_url
from routing.providers.errors import Inbound
from routing.providers.openai.adapter import OpenAIAdapter, openai_payload
from routing.providers.openai.presets import Preset, apply_rules


class OpenAIPresetAdapter(OpenAIAdapter):
    def __init__(self, preset: Preset) -> None:
        self.preset = preset
        self.kind = preset.kind

    def payload(self, *, model: ModelSpec, body: dict[str, Any], inbound: Inbound, stream: bool) -> dict[str, Any]:
        payload = openai_payload(model=model, body=body, inbound=inbound, stream=stream)
        return apply_rules(self.preset, payload, upstream=model.upstream)

    def url(self, *, provider: ProviderSpec, model: ModelSpec, stream: bool) -> str:
        return join_url(provider.base_url or self.preset.base_url, "/chat/completions")

    def headers(self, api_key: str) -> dict[str, str]:
        headers = super().headers(api_key)
        if not api_key and not self.preset.needs_key:
            del headers["Authorization"]  # a local server needs none; an empty bearer token confuses some
        return headers

    def forwarded_headers(self, client_headers: Mapping[str, str], inbound: Inbound) -> dict[str, str]:
        wanted = self.preset.forwarded_headers
        return {name: value for name, value in client_headers.items() if name.lower() in wanted}

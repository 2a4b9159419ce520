"""Every value that carries a provider key masks it in its repr, so logging one (or a traceback's locals) leaks
nothing: the routing table's providers, the attempt spec, and the request that goes upstream."""

from __future__ import annotations

import pytest

from routing.clients import upstream
from routing.core.table import ModelSpec, ProviderSpec, Secret
from routing.core.validate import ValidationRules
from routing.gateway.attempt import AttemptSpec, _request

KEY = "sk-" + "proj-" + "Reprtestkey0123456789abcdef"
AZURE_KEY = "3f9a" + "c2e1" + "7b6d" + "0e5f" + "a1b2" + "c3d4" + "e5f6" + "0718"


def spec(kind: str, key: str) -> AttemptSpec:
    provider = ProviderSpec(name="p", kind=kind, base_url="https://provider.example/v1", api_keys=(Secret(key),),
                            api_version="2024-10-21")
    return AttemptSpec(
        provider=provider, model=ModelSpec(name="p/m", provider="p", upstream="m"),
        body={"model": "p/m", "messages": [{"role": "user", "content": "hi"}]}, inbound="openai", stream=False,
        api_key=key, timeout_s=5.0, rules=ValidationRules(), client_wants_usage=False,
    )


def test_a_provider_spec_masks_its_keys() -> None:
    shown = repr(spec("openai", KEY).provider)
    assert KEY not in shown
    assert "Secret('********')" in shown


def test_an_attempt_spec_masks_its_key_and_shows_the_rest() -> None:
    shown = repr(spec("openai", KEY))
    assert KEY not in shown
    assert "api_key='********'" in shown
    assert "model=ModelSpec(name='p/m'" in shown
    assert "timeout_s=5.0" in shown


@pytest.mark.parametrize(("kind", "key"), [("openai", KEY), ("azure_openai", AZURE_KEY), ("anthropic", KEY),
                                           ("gemini", KEY)])
def test_the_upstream_request_masks_the_key_in_every_providers_header(kind: str, key: str) -> None:
    request = _request(spec(kind, key))
    assert any(key in value for value in request.headers.values())  # the key is really there to be masked
    shown = repr(request)
    assert key not in shown
    assert "'********'" in shown
    assert "body=<" in shown
    assert "hi" not in shown


def test_the_upstream_request_masks_a_key_in_the_query() -> None:
    request = upstream.UpstreamRequest("GET", f"https://p.example/v1/models?alt=sse&key={KEY}", {}, b"", 5.0, 1.0)
    shown = repr(request)
    assert KEY not in shown
    assert "alt=sse&key=********" in shown

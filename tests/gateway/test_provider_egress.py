"""Requests reach a provider behind a CONNECT proxy and a private CA: through the provider's own proxy setting
and through HTTPS_PROXY, for an OpenAI-format and an Anthropic provider alike. The provider is the simulator
behind a TLS-terminating forwarder whose host name only the proxy can resolve."""

from __future__ import annotations

from collections.abc import Iterator
from pathlib import Path
from typing import Any
from urllib.parse import urlsplit

import pytest

from routing.clients import egress as egress_module
from routing.clients import upstream
from routing.core.table import ModelSpec, ProviderSpec, RoutingTable, Secret
from routing.simulator import SimulatorServer
from tests.clients.http1.egress_servers import ConnectProxy, PrivateCA, TLSForwarder, server_context
from tests.gateway import support
from tests.gateway.support import answer, request, run

simulator, sim, fresh_state = support.simulator, support.sim, support.fresh_state


@pytest.fixture(scope="module")
def provider_address(simulator: SimulatorServer, tmp_path_factory: pytest.TempPathFactory) -> Iterator[
        tuple[ConnectProxy, Path, int]]:
    """(the proxy, the private CA's certificate, the forwarder's port) for ``https://provider.test:PORT``."""
    ca = PrivateCA(tmp_path_factory.mktemp("egress-ca"))
    issued = ca.issue("provider", hosts=("provider.test",))
    sim_url = urlsplit(simulator.base_url)
    upstream_address = (sim_url.hostname or "127.0.0.1", sim_url.port or 80)
    with TLSForwarder(server_context(issued), upstream_address) as forwarder, \
            ConnectProxy(hosts={"provider.test": "127.0.0.1"}) as proxy:
        yield proxy, ca.cert, forwarder.port


def table(port: int, **egress: str) -> RoutingTable:
    base = f"https://provider.test:{port}"
    return RoutingTable.build(version=1, providers=[
        ProviderSpec("oa", "openai", f"{base}/v1", **egress),  # type: ignore[arg-type]
        ProviderSpec("an", "anthropic", base, api_keys=(Secret("sk-simulated"),), **egress),  # type: ignore[arg-type]
    ], models=[ModelSpec("gpt", "oa", "primary"), ModelSpec("claude", "an", "claude-sim")])


@pytest.mark.parametrize("model", ["gpt", "claude"])
def test_a_provider_s_own_proxy_and_ca_bundle_reach_it(sim: SimulatorServer, provider_address: Any,
                                                       model: str) -> None:
    proxy, ca_cert, port = provider_address
    routing = table(port, proxy=proxy.url, ca_bundle=str(ca_cert))
    before = len(proxy.tunnels)
    reply = run(answer(request(routing, model, stream=True)))
    assert reply.status == 200
    assert reply.events[-1] == "[DONE]"  # an OpenAI client, whichever wire format the provider speaks
    assert proxy.tunnels[before:] == [f"provider.test:{port}"]


def test_https_proxy_from_the_environment_reaches_it(sim: SimulatorServer, provider_address: Any, settings: Any,
                                                     monkeypatch: pytest.MonkeyPatch) -> None:
    proxy, ca_cert, port = provider_address
    settings.HTTPS_PROXY, settings.HTTP_PROXY, settings.NO_PROXY = proxy.url, "", "localhost"
    monkeypatch.setattr(upstream, "egress", egress_module.Egress())  # a process started with that environment
    reply = run(answer(request(table(port, ca_bundle=str(ca_cert)), "gpt")))
    assert reply.status == 200
    assert reply.json()["choices"][0]["message"]["content"]
    assert proxy.tunnels[-1] == f"provider.test:{port}"


def test_without_the_private_ca_the_provider_is_not_trusted(sim: SimulatorServer, provider_address: Any) -> None:
    proxy, _, port = provider_address
    reply = run(answer(request(table(port, proxy=proxy.url), "gpt")))
    assert reply.status == 502
    assert reply.error["code"] == "tls_error"

"""A gateway behind a corporate egress: its providers are reachable only through an HTTP CONNECT proxy and
present certificates of a private CA. Both SDKs are served through it.

The providers are the simulator behind a TLS-terminating forwarder whose host name, ``provider.test``, only
the proxies can resolve: an answer proves the tunnel was used. The OpenAI-format provider takes the
environment's ``HTTPS_PROXY``; the Anthropic provider names a second proxy of its own in the config file.
"""

from __future__ import annotations

from collections.abc import Iterator
from pathlib import Path
from typing import Any
from urllib.parse import urlsplit

import anthropic
import openai
import pytest
import yaml

from routing.simulator.server import SimulatorServer
from tests.clients.http1.egress_servers import ConnectProxy, PrivateCA, TLSForwarder, server_context
from tests.e2e.conftest import SIM_KEY, fresh_database
from tests.gateway_process import Gateway, run_gateway

pytestmark = pytest.mark.services


class Egress:
    def __init__(self, environment_proxy: ConnectProxy, own_proxy: ConnectProxy, provider_port: int) -> None:
        self.environment_proxy = environment_proxy
        self.own_proxy = own_proxy
        self.authority = f"provider.test:{provider_port}"


@pytest.fixture(scope="module")
def egress(tmp_path_factory: pytest.TempPathFactory, simulator: SimulatorServer) -> Iterator[tuple[Egress, Path]]:
    ca = PrivateCA(tmp_path_factory.mktemp("egress-ca"))
    issued = ca.issue("provider", hosts=("provider.test",))
    sim = urlsplit(simulator.base_url)
    with TLSForwarder(server_context(issued), (sim.hostname or "127.0.0.1", sim.port or 80)) as forwarder, \
            ConnectProxy(hosts={"provider.test": "127.0.0.1"}) as environment_proxy, \
            ConnectProxy(hosts={"provider.test": "127.0.0.1"}) as own_proxy:
        yield Egress(environment_proxy, own_proxy, forwarder.port), ca.cert


@pytest.fixture(scope="module")
def gateway(tmp_path_factory: pytest.TempPathFactory, egress: tuple[Egress, Path]) -> Iterator[Gateway]:
    routes, ca_cert = egress
    base = f"https://{routes.authority}"
    config: dict[str, Any] = {
        "providers": [
            {"name": "oa", "kind": "openai", "base_url": f"{base}/v1", "api_key": "${E2E_SIM_KEY}",
             "ca_bundle": str(ca_cert)},
            {"name": "an", "kind": "anthropic", "base_url": base, "api_key": "${E2E_SIM_KEY}",
             "ca_bundle": str(ca_cert), "proxy": routes.own_proxy.url},
        ],
        "models": [{"provider": "oa", "upstream": "oa-model"}, {"provider": "an", "upstream": "an-model"}],
    }
    tmp = Path(tmp_path_factory.mktemp("egress-gateway"))
    (tmp / "config.yaml").write_text(yaml.safe_dump(config))
    with fresh_database("egress") as database_url:
        env = {"DATABASE_URL": database_url, "GOMODEL_CONFIG": str(tmp / "config.yaml"), "E2E_SIM_KEY": SIM_KEY,
               "GOMODEL_MASTER_KEY": "", "GOMODEL_AUTH": "open", "CELERY_BROKER_URL": "",
               "HTTPS_PROXY": routes.environment_proxy.url, "https_proxy": "", "NO_PROXY": "", "no_proxy": ""}
        with run_gateway(tmp, env) as running:
            yield running


@pytest.mark.parametrize("stream", [False, True], ids=["json", "stream"])
def test_the_openai_sdk_is_served_through_the_environment_s_proxy(gateway: Gateway, egress: tuple[Egress, Path],
                                                                  stream: bool) -> None:
    routes, _ = egress
    before = len(routes.environment_proxy.tunnels)
    with openai.OpenAI(base_url=f"{gateway.base_url}/v1", api_key="unused-on-loopback", max_retries=0) as client:
        messages: Any = [{"role": "user", "content": "Hello through the proxy"}]
        if stream:
            chunks = list(client.chat.completions.create(model="oa/oa-model", messages=messages, stream=True))
            text = "".join(c.choices[0].delta.content or "" for c in chunks if c.choices)
        else:
            text = client.chat.completions.create(model="oa/oa-model", messages=messages).choices[0].message.content
    assert "Hello through the proxy" in (text or "")
    tunnels = routes.environment_proxy.tunnels[before:]
    assert set(tunnels) <= {routes.authority}
    assert len(tunnels) <= 1


@pytest.mark.parametrize("stream", [False, True], ids=["json", "stream"])
def test_the_anthropic_sdk_is_served_through_the_provider_s_own_proxy(gateway: Gateway, egress: tuple[Egress, Path],
                                                                      stream: bool) -> None:
    routes, _ = egress
    with anthropic.Anthropic(base_url=gateway.base_url, api_key="unused-on-loopback", max_retries=0) as client:
        messages: Any = [{"role": "user", "content": "Hello through my own proxy"}]
        if stream:
            with client.messages.stream(model="an/an-model", max_tokens=64, messages=messages) as events:
                text = events.get_final_text()
        else:
            reply = client.messages.create(model="an/an-model", max_tokens=64, messages=messages)
            text = "".join(block.text for block in reply.content if block.type == "text")
    assert "Hello through my own proxy" in text
    assert routes.own_proxy.tunnels
    assert set(routes.own_proxy.tunnels) == {routes.authority}


def test_each_sdk_reaches_the_other_wire_format_through_the_tunnels(gateway: Gateway) -> None:
    with openai.OpenAI(base_url=f"{gateway.base_url}/v1", api_key="unused-on-loopback", max_retries=0) as client:
        answer = client.chat.completions.create(model="an/an-model", messages=[{"role": "user", "content": "Hi"}])
        assert answer.choices[0].message.content
    with anthropic.Anthropic(base_url=gateway.base_url, api_key="unused-on-loopback", max_retries=0) as claude:
        reply = claude.messages.create(model="oa/oa-model", max_tokens=64, messages=[{"role": "user", "content": "Hi"}])
        assert reply.content
        assert reply.stop_reason == "end_turn"

"""Which route each provider's requests take: the environment's proxies, a provider's own proxy or ``direct``,
and its TLS files, loaded off the request path and again at each configuration change."""

from __future__ import annotations

import os
import subprocess
import sys
from pathlib import Path
from typing import Any

import pytest

from routing.clients.egress import Egress
from routing.clients.http1 import TransportFailure
from routing.clients.http1.proxy import Proxy
from routing.core.table import ProviderSpec

PEM = Path(__file__).resolve().parent / "http1"
CERT, KEY = str(PEM / "localhost-cert.pem"), str(PEM / "localhost-key.pem")
ROOT = Path(__file__).resolve().parents[2]
HTTPS = "https://api.openai.com/v1/chat/completions"


def provider(**egress: str) -> ProviderSpec:
    return ProviderSpec("p", "openai", "https://api.openai.com/v1", **egress)  # type: ignore[arg-type]


@pytest.fixture
def environment(settings: Any) -> Egress:
    settings.HTTPS_PROXY = "http://corp-proxy:3128"
    settings.HTTP_PROXY = "corp-plain:8080"
    settings.NO_PROXY = "internal.corp,10.0.0.0/8"
    return Egress()


def test_the_environment_s_proxies_apply_by_scheme_except_to_no_proxy_hosts(environment: Egress) -> None:
    assert environment.route(provider(), HTTPS).proxy == Proxy("corp-proxy", 3128)
    assert environment.route(provider(), "http://llm.lan/v1/chat/completions").proxy == Proxy("corp-plain", 8080)
    assert environment.route(provider(), "https://llm.internal.corp/v1/chat/completions").proxy is None
    assert environment.route(provider(), "https://10.1.2.3/v1/chat/completions").proxy is None
    assert environment.route(None, HTTPS).proxy == Proxy("corp-proxy", 3128)


def test_a_provider_s_own_setting_wins_over_the_environment(environment: Egress) -> None:
    assert environment.route(provider(proxy="direct"), HTTPS).proxy is None
    own = environment.route(provider(proxy="http://team-proxy:8888"), "https://llm.internal.corp/v1/chat/completions")
    assert own.proxy == Proxy("team-proxy", 8888)  # NO_PROXY is the environment's, not the provider's


def test_providers_with_the_same_tls_files_share_one_context_until_the_next_prepare(settings: Any) -> None:
    settings.HTTPS_PROXY = settings.HTTP_PROXY = settings.NO_PROXY = ""
    egress = Egress()
    first, second = provider(ca_bundle=CERT), ProviderSpec("q", "openai", "https://x/v1", ca_bundle=CERT)
    assert egress.prepare([first, second]) == []
    route = egress.route(first, HTTPS)
    assert route.tls is not None
    assert route.tls is egress.route(second, HTTPS).tls
    assert egress.route(first, "http://api.openai.com/v1").tls is None  # TLS files matter to https only
    egress.prepare([first])  # a configuration change: files are read again (a rotated certificate)
    assert egress.route(first, HTTPS).tls is not route.tls


def test_unusable_tls_files_fail_the_provider_s_attempts_before_anything_is_sent(settings: Any) -> None:
    settings.HTTPS_PROXY = settings.HTTP_PROXY = settings.NO_PROXY = ""
    egress = Egress()
    broken = provider(ca_bundle="/nonexistent/ca.pem")
    assert egress.prepare([broken, provider(client_cert=CERT, client_key=KEY)]) == [
        "provider p: ca_bundle /nonexistent/ca.pem: No such file or directory"]
    with pytest.raises(TransportFailure, match="TLS files cannot be used: ca_bundle /nonexistent") as failure:
        egress.route(broken, HTTPS)
    assert failure.value.kind == "tls"


@pytest.mark.parametrize(("variable", "value", "words"), [
    ("HTTPS_PROXY", "socks5://user:hunter2@proxy:1080", "HTTPS_PROXY: a proxy is an http://host:port URL"),
    ("http_proxy", "http://proxy:notaport", "HTTP_PROXY: the proxy URL has an invalid port"),
])
def test_settings_refuse_a_proxy_variable_they_cannot_use_without_echoing_it(variable: str, value: str,
                                                                            words: str) -> None:
    env = {k: v for k, v in os.environ.items() if k.lower() not in ("https_proxy", "http_proxy")}
    env[variable] = value
    done = subprocess.run([sys.executable, "-c", "import gomodel_site.settings"], cwd=ROOT, env=env,
                          capture_output=True, text=True, timeout=60)
    assert done.returncode != 0
    assert words in done.stderr
    assert "hunter2" not in done.stderr

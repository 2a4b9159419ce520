"""Proxy URLs and the environment's HTTPS_PROXY / HTTP_PROXY / NO_PROXY: which requests take which proxy."""

from __future__ import annotations

import pytest

from routing.clients.http1.proxy import Proxy, ProxyEnvironment, parse_proxy_url, split_no_proxy


def test_a_proxy_url_with_credentials_becomes_a_basic_header_that_no_repr_shows() -> None:
    proxy = parse_proxy_url("http://us%40er:p%3Ass@proxy.corp:3128")
    assert (proxy.host, proxy.port, proxy.address) == ("proxy.corp", 3128, "proxy.corp:3128")
    assert proxy.authorization == "Basic dXNAZXI6cDpzcw=="  # us@er:p:ss
    assert "p:ss" not in repr(proxy)
    assert "dXNAZXI6cDpzcw" not in repr(proxy)


@pytest.mark.parametrize(("url", "host", "port"), [
    ("proxy.corp:3128", "proxy.corp", 3128),  # no scheme: http, as curl reads it
    ("http://proxy.corp", "proxy.corp", 80),
    ("http://[fd00::1]:8080/", "fd00::1", 8080),
])
def test_proxy_urls_in_their_usual_forms(url: str, host: str, port: int) -> None:
    assert parse_proxy_url(url) == Proxy(host, port)


@pytest.mark.parametrize(("url", "words"), [
    ("https://proxy.corp:443", "https:// proxies are not supported"),
    ("socks5://proxy.corp:1080", "socks5:// proxies are not supported"),
    ("http://:3128", "names no host"),
    ("http://proxy.corp:99999", "invalid port"),
    ("http://proxy.corp:3128/path", "without a path"),
])
def test_a_proxy_url_the_client_cannot_use_is_refused_saying_why(url: str, words: str) -> None:
    with pytest.raises(ValueError, match=words):
        parse_proxy_url(url)


CORP = Proxy("proxy.corp", 3128)
PLAIN = Proxy("plain.corp", 8080)


@pytest.mark.parametrize(("no_proxy", "scheme", "host", "port", "expected"), [
    ("", "https", "api.openai.com", 443, CORP),
    ("", "http", "llm.internal", 80, PLAIN),
    ("", "https", "localhost", 443, None),  # loopback never goes through an environment proxy
    ("", "https", "127.0.0.9", 443, None),
    ("", "https", "::1", 443, None),
    ("*", "https", "api.openai.com", 443, None),
    ("internal.corp", "https", "internal.corp", 443, None),
    ("internal.corp", "https", "llm.internal.corp", 443, None),  # a name covers its subdomains
    (".internal.corp", "https", "llm.internal.corp", 443, None),
    ("*.internal.corp", "https", "llm.internal.corp", 443, None),
    ("internal.corp", "https", "notinternal.corp", 443, CORP),  # ...but not a longer name that ends the same
    ("internal.corp:8443", "https", "internal.corp", 443, CORP),  # another port
    ("internal.corp:8443", "https", "internal.corp", 8443, None),
    ("10.0.0.0/8, 192.168.1.7", "https", "10.20.30.40", 443, None),  # CIDR
    ("10.0.0.0/8, 192.168.1.7", "https", "192.168.1.7", 443, None),
    ("10.0.0.0/8", "https", "11.0.0.1", 443, CORP),
    ("fd00::/8", "https", "fd12::1", 443, None),
    ("[fd12::1]:443", "https", "fd12::1", 443, None),
    ("10.0.0.0/8", "https", "ten.example", 443, CORP),  # a range never matches a name
])
def test_no_proxy_decides_which_origins_go_direct(no_proxy: str, scheme: str, host: str, port: int,
                                                  expected: Proxy | None) -> None:
    environment = ProxyEnvironment(https=CORP, http=PLAIN, no_proxy=split_no_proxy(no_proxy))
    assert environment.proxy_for(scheme, host, port) == expected


def test_without_a_proxy_for_the_scheme_the_request_goes_direct() -> None:
    assert ProxyEnvironment(https=CORP).proxy_for("http", "llm.internal", 80) is None

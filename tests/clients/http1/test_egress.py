"""What deployments need from the provider client, against real servers on loopback: a CONNECT proxy (and an
HTTP proxy for http origins), a provider behind a private CA, mutual TLS, ALPN, and an address that drops
packets. Each scenario runs under both event loops the gateway runs on (asyncio's and uvloop).
"""

from __future__ import annotations

import asyncio
import contextlib
import socket
import ssl
import subprocess
from collections.abc import Awaitable, Callable, Iterator
from pathlib import Path
from typing import Any

import pytest
import uvloop

from routing.clients.http1 import Pool, TransportFailure
from routing.clients.http1.dial import Address, Route, interleave
from routing.clients.http1.proxy import parse_proxy_url
from routing.clients.http1.tls import TLSFiles, client_context
from tests.clients.http1.egress_servers import ConnectProxy, Issued, PrivateCA, server_context
from tests.clients.http1.scripted import OK_HEAD, Server, answer_each, make_pool, read_request

OK = OK_HEAD + b"content-length: 2\r\n\r\nok"


@pytest.fixture(scope="module")
def ca(tmp_path_factory: pytest.TempPathFactory) -> PrivateCA:
    return PrivateCA(tmp_path_factory.mktemp("private-ca"))


@pytest.fixture(scope="module")
def provider_cert(ca: PrivateCA) -> Issued:
    return ca.issue("provider", hosts=("provider.test", "localhost"))


@pytest.fixture(params=["asyncio", "uvloop"])
def run(request: pytest.FixtureRequest) -> Iterator[Callable[[Callable[[], Awaitable[None]]], None]]:
    def runner(scenario: Callable[[], Awaitable[None]]) -> None:
        if request.param == "uvloop":
            uvloop.run(scenario())
        else:
            asyncio.run(scenario())

    return runner


class TLSServer(Server):
    """A scripted server speaking TLS with ``context``; records the ALPN protocol and client certificate seen."""

    def __init__(self, handler: Any, context: ssl.SSLContext) -> None:
        super().__init__(handler)
        self.context = context
        self.alpn: list[str | None] = []
        self.client_names: list[str | None] = []

    async def __aenter__(self) -> TLSServer:
        self._server = await asyncio.start_server(self._serve, "127.0.0.1", 0, ssl=self.context)
        return self

    async def _serve(self, reader: asyncio.StreamReader, writer: asyncio.StreamWriter) -> None:
        tls = writer.get_extra_info("ssl_object")
        self.alpn.append(tls.selected_alpn_protocol())
        peer = tls.getpeercert()
        self.client_names.append(dict(item[0] for item in peer["subject"])["commonName"] if peer else None)
        with contextlib.suppress(ssl.SSLError):
            await super()._serve(reader, writer)


async def answer_ok(reader: asyncio.StreamReader, writer: asyncio.StreamWriter) -> None:
    await answer_each(reader, writer, OK)


def trusting(ca: PrivateCA, **files: str) -> Route:
    return Route(tls=client_context(TLSFiles(ca_bundle=str(ca.cert), **files)))


def test_a_provider_behind_a_private_ca_is_trusted_through_its_ca_bundle_only(
        run: Any, ca: PrivateCA, provider_cert: Issued) -> None:
    async def scenario() -> None:
        async with TLSServer(answer_ok, server_context(provider_cert)) as server:
            url = f"https://localhost:{server.port}/v1/x"
            pool = make_pool()
            try:
                with pytest.raises(TransportFailure, match="certificate verify failed") as failure:
                    await pool.request("POST", url, {}, b"", timeout=5, connect_timeout=2)  # the system store
                assert failure.value.kind == "tls"
                response = await pool.request("POST", url, {}, b"", timeout=5, connect_timeout=2, route=trusting(ca))
                assert await response.aread() == b"ok"
            finally:
                pool.close()

    run(scenario)


def test_a_provider_requiring_a_client_certificate_gets_the_configured_one(
        run: Any, ca: PrivateCA, provider_cert: Issued) -> None:
    client = ca.issue("gateway-client", client=True)

    async def scenario() -> None:
        async with TLSServer(answer_ok, server_context(provider_cert, client_ca=ca.cert)) as server:
            url = f"https://localhost:{server.port}/v1/x"
            pool = make_pool()
            async def without_a_client_certificate() -> None:
                response = await pool.request("POST", url, {}, b"", timeout=5, connect_timeout=2, route=trusting(ca))
                await response.aread()

            try:
                with pytest.raises(TransportFailure):  # refused in the handshake, or at the first read (TLS 1.3)
                    await without_a_client_certificate()
                route = trusting(ca, client_cert=str(client.cert), client_key=str(client.key))
                response = await pool.request("POST", url, {}, b"", timeout=5, connect_timeout=2, route=route)
                assert await response.aread() == b"ok"
                assert server.client_names[-1] == "gateway-client"
            finally:
                pool.close()

    run(scenario)


def test_alpn_offers_http_1_1_to_a_server_that_prefers_h2(run: Any, ca: PrivateCA, provider_cert: Issued) -> None:
    async def scenario() -> None:
        async with TLSServer(answer_ok, server_context(provider_cert, alpn=["h2", "http/1.1"])) as server:
            pool = make_pool()
            try:
                response = await pool.request("POST", f"https://localhost:{server.port}/v1/x", {}, b"", timeout=5,
                                              connect_timeout=2, route=trusting(ca))
                assert await response.aread() == b"ok"
                assert server.alpn == ["http/1.1"]
            finally:
                pool.close()

    run(scenario)


def test_https_goes_through_a_connect_tunnel_and_the_tunnel_is_kept_alive(
        run: Any, ca: PrivateCA, provider_cert: Issued) -> None:
    async def scenario() -> None:
        async with TLSServer(answer_ok, server_context(provider_cert)) as server:
            with ConnectProxy(hosts={"provider.test": "127.0.0.1"}) as proxy:
                proxy_url = proxy.url.replace("http://", "http://egress:s3cret@")
                route = Route(proxy=parse_proxy_url(proxy_url), tls=trusting(ca).tls)
                pool = make_pool()
                try:
                    for _ in range(2):  # provider.test resolves only at the proxy: the tunnel is the way there
                        response = await pool.request("POST", f"https://provider.test:{server.port}/v1/x", {}, b"",
                                                      timeout=5, connect_timeout=2, route=route)
                        assert await response.aread() == b"ok"
                    assert proxy.tunnels == [f"provider.test:{server.port}"]
                    assert proxy.authorizations == ["Basic ZWdyZXNzOnMzY3JldA=="]  # egress:s3cret
                finally:
                    pool.close()

    run(scenario)


def test_http_goes_to_an_http_proxy_in_absolute_form(run: Any) -> None:
    seen: list[bytes] = []

    async def handler(reader: asyncio.StreamReader, writer: asyncio.StreamWriter) -> None:
        head, _ = await read_request(reader)
        seen.append(head)
        writer.write(OK)
        await writer.drain()

    async def scenario() -> None:
        async with Server(handler) as server:
            with ConnectProxy(hosts={"plain.test": "127.0.0.1"}) as proxy:
                route = Route(proxy=parse_proxy_url(proxy.url.replace("http://", "http://egress:pw@")))
                pool = make_pool()
                try:
                    response = await pool.request("POST", f"http://plain.test:{server.port}/v1/x?y=1", {}, b"",
                                                  timeout=5, connect_timeout=2, route=route)
                    assert await response.aread() == b"ok"
                    assert proxy.forwarded == [f"POST http://plain.test:{server.port}/v1/x?y=1 HTTP/1.1"]
                    assert proxy.authorizations == ["Basic ZWdyZXNzOnB3"]
                    assert f"host: plain.test:{server.port}".encode() in seen[0]
                finally:
                    pool.close()

    run(scenario)


def test_a_proxy_refusing_the_tunnel_is_a_connect_failure_naming_the_proxy_and_not_its_password(run: Any) -> None:
    async def scenario() -> None:
        with ConnectProxy(refuse_with=b"403 Forbidden") as proxy:
            route = Route(proxy=parse_proxy_url(proxy.url.replace("http://", "http://egress:s3cret@")))
            pool = make_pool()
            try:
                with pytest.raises(TransportFailure) as failure:
                    await pool.request("POST", "https://provider.test/v1/x", {}, b"", timeout=5, connect_timeout=2,
                                       route=route)
                assert failure.value.kind == "connect"
                message = str(failure.value)
                assert f"127.0.0.1:{proxy.port}" in message
                assert "403 Forbidden" in message
                assert "s3cret" not in message
                assert "egress" not in message
                assert pool.open_connections == 0
            finally:
                pool.close()

    run(scenario)


@pytest.fixture
def blackhole_and_server() -> Iterator[tuple[socket.socket, int]]:
    """127.0.0.2:PORT drops every connection attempt (its accept queue is full); 127.0.0.1:PORT is free for a
    server. Returns the listening socket of 127.0.0.1 and the shared port."""
    good = socket.socket()
    good.bind(("127.0.0.1", 0))
    port = good.getsockname()[1]
    dropping = socket.socket()
    dropping.bind(("127.0.0.2", port))
    dropping.listen(0)
    filler = socket.create_connection(("127.0.0.2", port), timeout=2)  # fills the queue: later SYNs are dropped
    try:
        yield good, port
    finally:
        filler.close()
        dropping.close()
        good.close()


def test_an_address_that_drops_packets_costs_a_moment_not_the_connect_timeout(
        run: Any, blackhole_and_server: tuple[socket.socket, int]) -> None:
    good, port = blackhole_and_server

    async def resolve(host: str, resolved_port: int) -> list[Address]:
        assert host == "dual.test"
        return [(socket.AF_INET, ("127.0.0.2", resolved_port)), (socket.AF_INET, ("127.0.0.1", resolved_port))]

    async def scenario() -> None:
        good.listen(8)
        async with Server(answer_ok, sock=good):
            pool = Pool(max_connections=4, max_idle_per_origin=4, keepalive_expiry=30, resolver=resolve)
            try:
                response = await pool.request("POST", f"http://dual.test:{port}/v1/x", {}, b"", timeout=5,
                                              connect_timeout=2)  # the first address alone would take all of it
                assert await response.aread() == b"ok"
            finally:
                pool.close()

    run(scenario)


def test_address_families_are_interleaved_starting_with_the_first_answer() -> None:
    v6 = [(socket.AF_INET6, (f"::{i}", 443, 0, 0)) for i in (1, 2)]
    v4 = [(socket.AF_INET, (f"10.0.0.{i}", 443)) for i in (1, 2, 3)]
    mixed = interleave([*v6, *v4])
    assert [address[1][0] for address in mixed] == ["::1", "10.0.0.1", "::2", "10.0.0.2", "10.0.0.3"]
    assert interleave([]) == []


@pytest.mark.parametrize(("files", "words"), [
    ({"ca_bundle": "/nonexistent/ca.pem"}, "ca_bundle /nonexistent/ca.pem: No such file"),
    ({"client_key": "/etc/key.pem"}, "client_key is set without client_cert"),
    ({"client_cert": "/nonexistent/client.pem"}, "client_cert /nonexistent/client.pem"),
])
def test_tls_files_that_cannot_be_used_are_named(files: dict[str, str], words: str) -> None:
    with pytest.raises(ValueError, match=words):
        client_context(TLSFiles(**files))


def test_an_encrypted_client_key_is_refused_instead_of_prompting(ca: PrivateCA, tmp_path: Path) -> None:
    client = ca.issue("encrypted-client", client=True)
    locked = tmp_path / "locked.key"
    subprocess.run(["openssl", "pkey", "-in", str(client.key), "-aes256", "-passout", "pass:secret",
                    "-out", str(locked)], check=True, capture_output=True)
    with pytest.raises(ValueError, match="encrypted key"):
        client_context(TLSFiles(client_cert=str(client.cert), client_key=str(locked)))


def test_the_default_trust_store_is_the_one_ssl_cert_file_names(
        run: Any, ca: PrivateCA, provider_cert: Issued, monkeypatch: pytest.MonkeyPatch) -> None:
    monkeypatch.setenv("SSL_CERT_FILE", str(ca.cert))  # read by OpenSSL when the default context loads

    async def scenario() -> None:
        async with TLSServer(answer_ok, server_context(provider_cert)) as server:
            pool = make_pool()
            try:
                response = await pool.request("POST", f"https://localhost:{server.port}/v1/x", {}, b"", timeout=5,
                                              connect_timeout=2)
                assert await response.aread() == b"ok"
            finally:
                pool.close()

    run(scenario)

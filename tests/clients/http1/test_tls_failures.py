"""A provider whose TLS cannot succeed on a retry (a certificate that fails verification, a port that does not
speak TLS) fails as ``tls``, naming the host and the verification message; a handshake the peer merely cut
stays a ``connect`` failure; a certificate the trust store names is accepted. Real TLS servers on loopback,
under both event loops the gateway runs on.
"""

from __future__ import annotations

import asyncio
import logging
from collections.abc import Awaitable, Callable, Iterator
from pathlib import Path
from typing import Any

import pytest
import uvloop

from routing.clients import upstream
from routing.clients.egress import Egress
from routing.clients.http1 import TransportFailure
from routing.clients.http1.dial import DIRECT, Route
from routing.clients.http1.tls import TLSFiles, client_context
from routing.core.error_classifier import classify_exception
from routing.core.outcome import ErrorClass
from routing.core.table import ProviderSpec
from tests.clients.http1.certificates import Authority, self_signed
from tests.clients.http1.egress_servers import Issued, server_context
from tests.clients.http1.scripted import OK_HEAD, Server, answer_each, make_pool

OK = OK_HEAD + b"content-length: 2\r\n\r\nok"


@pytest.fixture(scope="module")
def certificates(tmp_path_factory: pytest.TempPathFactory) -> dict[str, Any]:
    directory = tmp_path_factory.mktemp("tls-failures")
    ca = Authority(directory)
    return {
        "ca": ca,
        "self_signed": self_signed(directory, "self-signed"),
        "wrong_host": ca.issue("wrong-host", hosts=("elsewhere.test",)),
        "expired": ca.issue("expired", hosts=("localhost",), expired=True),
        "unknown_ca": Authority(directory / "other", "unknown CA").issue("unknown-ca", hosts=("localhost",)),
    }


@pytest.fixture(params=["asyncio", "uvloop"])
def run(request: pytest.FixtureRequest) -> Iterator[Callable[[Callable[[], Awaitable[None]]], None]]:
    def runner(scenario: Callable[[], Awaitable[None]]) -> None:
        if request.param == "uvloop":
            uvloop.run(scenario())
        else:
            asyncio.run(scenario())

    return runner


class TLSServer(Server):
    """A scripted server speaking TLS with ``context``: the handshake happens before any request is read."""

    def __init__(self, handler: Any, context: Any) -> None:
        super().__init__(handler)
        self.context = context

    async def __aenter__(self) -> TLSServer:
        self._server = await asyncio.start_server(self._serve, "127.0.0.1", 0, ssl=self.context)
        return self


async def answer_ok(reader: asyncio.StreamReader, writer: asyncio.StreamWriter) -> None:
    await answer_each(reader, writer, OK)


async def failure_of(server: Server, route: Route = DIRECT, host: str = "localhost") -> TransportFailure:
    pool = make_pool()
    try:
        with pytest.raises(TransportFailure) as caught:
            await pool.request("POST", f"https://{host}:{server.port}/v1/x", {}, b"{}", timeout=5, connect_timeout=2,
                               route=route)
        assert pool.open_connections == 0
        return caught.value
    finally:
        pool.close()


def trusting(path: Path) -> Route:
    return Route(tls=client_context(TLSFiles(ca_bundle=str(path))))


@pytest.mark.parametrize(("name", "verification"), [
    ("self_signed", "self-signed certificate"),
    ("wrong_host", "Hostname mismatch, certificate is not valid for 'localhost'."),
    ("expired", "certificate has expired"),
    ("unknown_ca", "unable to get local issuer certificate"),
])
def test_it_reports_a_certificate_that_fails_verification_as_tls_naming_host_and_verification(
        run: Any, certificates: dict[str, Any], name: str, verification: str) -> None:
    issued: Issued = certificates[name]
    ca: Authority = certificates["ca"]

    async def scenario() -> None:
        async with TLSServer(answer_ok, server_context(issued)) as server:
            failure = await failure_of(server, trusting(ca.cert))
            assert failure.kind == "tls"
            assert failure.detail == f"certificate verify failed: {verification}"
            assert str(failure) == f"TLS with localhost:{server.port} failed: certificate verify failed: {verification}"
            assert server.connections == 0  # the handshake failed before a request could be read

    run(scenario)


def test_it_reports_an_https_url_on_a_port_that_does_not_speak_tls_as_tls(run: Any) -> None:
    async def plain_http(reader: asyncio.StreamReader, writer: asyncio.StreamWriter) -> None:
        await reader.read(512)  # the ClientHello, read as a broken HTTP request
        writer.write(b"HTTP/1.1 400 Bad Request\r\ncontent-length: 0\r\n\r\n")
        await writer.drain()

    async def scenario() -> None:
        async with Server(plain_http) as server:
            failure = await failure_of(server)
            assert failure.kind == "tls"
            assert failure.detail.startswith("wrong version number")
            assert f"localhost:{server.port}" in str(failure)

    run(scenario)


def test_a_peer_that_cuts_the_handshake_is_still_a_connect_failure(run: Any) -> None:
    async def cut(reader: asyncio.StreamReader, writer: asyncio.StreamWriter) -> None:
        await reader.read(1)
        writer.transport.abort()

    async def scenario() -> None:
        async with Server(cut) as server:
            failure = await failure_of(server)
            assert failure.kind == "connect"  # a load balancer's hiccup: the next connection may well succeed

    run(scenario)


def test_a_self_signed_certificate_named_by_the_provider_s_ca_bundle_is_trusted(
        run: Any, certificates: dict[str, Any]) -> None:
    issued: Issued = certificates["self_signed"]

    async def scenario() -> None:
        async with TLSServer(answer_ok, server_context(issued)) as server:
            pool = make_pool()
            try:
                response = await pool.request("POST", f"https://localhost:{server.port}/v1/x", {}, b"", timeout=5,
                                              connect_timeout=2, route=trusting(issued.cert))
                assert await response.aread() == b"ok"
            finally:
                pool.close()

    run(scenario)


def test_a_self_signed_certificate_ssl_cert_file_names_is_trusted_by_default(
        run: Any, certificates: dict[str, Any], monkeypatch: pytest.MonkeyPatch) -> None:
    issued: Issued = certificates["self_signed"]
    monkeypatch.setenv("SSL_CERT_FILE", str(issued.cert))  # read when the pool makes its default context

    async def scenario() -> None:
        async with TLSServer(answer_ok, server_context(issued)) as server:
            pool = make_pool()
            try:
                response = await pool.request("POST", f"https://127.0.0.1:{server.port}/v1/x", {}, b"", timeout=5,
                                              connect_timeout=2)
                assert await response.aread() == b"ok"
            finally:
                pool.close()

    run(scenario)


def test_tls_files_that_cannot_be_used_fail_as_tls_without_naming_the_file_to_the_client(tmp_path: Path) -> None:
    provider = ProviderSpec("internal", "openai", "https://llm.internal.test/v1", ca_bundle=str(tmp_path / "gone.pem"))
    with pytest.raises(TransportFailure) as caught:
        Egress().route(provider, "https://llm.internal.test/v1/chat/completions")
    assert caught.value.kind == "tls"
    assert "gone.pem" in str(caught.value)  # the log's message names it
    assert "gone.pem" not in caught.value.detail


def test_a_tls_failure_is_a_target_fault_that_is_not_retried_on_the_same_target() -> None:
    failure = TransportFailure("tls", "TLS with h:443 failed: certificate verify failed: x", detail="certificate "
                               "verify failed: x")
    kind = upstream.exception_kind(failure, first_byte_seen=False)
    outcome = classify_exception(kind)
    assert (kind, outcome.error_class, outcome.reason) == ("tls", ErrorClass.INCOMPATIBLE, "tls_error")
    assert outcome.punishes_target  # the gateway's configuration for this target: it is locked out
    assert upstream.failure_detail(failure) == "certificate verify failed: x"
    assert upstream.failure_detail(TransportFailure("connect", "could not connect to h:443 (refused)")) is None


def test_it_logs_one_warning_naming_provider_host_and_verification_never_the_key(
        run: Any, certificates: dict[str, Any], caplog: pytest.LogCaptureFixture) -> None:
    issued: Issued = certificates["self_signed"]
    secret = "sk-tls-test-0123456789abcdefghij"

    async def scenario() -> None:
        async with TLSServer(answer_ok, server_context(issued)) as server:
            provider = ProviderSpec("selfsigned", "openai", f"https://localhost:{server.port}/v1")
            request = upstream.build("POST", f"https://localhost:{server.port}/v1/chat/completions",
                                     {"authorization": f"Bearer {secret}"}, b"{}", 5.0, provider=provider)
            try:
                with caplog.at_level(logging.WARNING, logger="gomodel.upstream"), pytest.raises(TransportFailure):
                    await upstream.send(request)
            finally:
                await upstream.pool.aclose()
            lines = [r for r in caplog.records if r.name == "gomodel.upstream"]
            assert len(lines) == 1
            assert lines[0].levelno == logging.WARNING
            assert lines[0].getMessage() == (f"provider selfsigned: TLS with localhost:{server.port} failed: "
                                             "certificate verify failed: self-signed certificate")
            assert secret not in caplog.text
            caplog.clear()

    run(scenario)

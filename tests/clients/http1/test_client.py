"""The provider HTTP client against real sockets: a scripted asyncio server on loopback per test.

Each server handler reads one request head (and its body, by Content-Length) and then writes exactly the
bytes the test scripts, so framing edge cases (chunked, close-delimited, interim 1xx, gzip) and faults
(silence, a cut mid-body, garbage, an idle close) are reproduced byte for byte.
"""

from __future__ import annotations

import asyncio
import gzip
import ssl
from pathlib import Path

import pytest

from routing.clients.http1 import Pool, PoolExhausted, TransportFailure
from tests.clients.http1.scripted import OK_HEAD, post, read_request, run


def test_request_line_headers_and_body_reach_the_server_and_the_connection_is_reused() -> None:
    seen: list[tuple[bytes, bytes]] = []
    connections = 0

    async def handler(reader: asyncio.StreamReader, writer: asyncio.StreamWriter) -> None:
        nonlocal connections
        connections += 1
        while True:
            try:
                head, body = await read_request(reader)
            except asyncio.IncompleteReadError:
                return
            seen.append((head, body))
            writer.write(OK_HEAD + b"content-length: 11\r\n\r\n{\"ok\":true}")
            await writer.drain()

    async def scenario(url: str, pool: Pool) -> None:
        for _ in range(3):
            response = await post(pool, url, authorization="Bearer abc")
            assert response.status_code == 200
            assert response.header_dict()["content-type"] == "application/json"
            assert await response.aread() == b'{"ok":true}'
        assert pool.open_connections == 1

    run(scenario, handler)
    assert connections == 1
    head, body = seen[0]
    assert head.startswith(b"POST /v1/chat/completions?x=1 HTTP/1.1\r\n")
    assert b"host: 127.0.0.1:" in head
    assert b"authorization: Bearer abc\r\n" in head
    assert b"content-length: 7\r\n" in head
    assert body == b'{"a":1}'


def test_chunked_body_arrives_piece_by_piece_as_the_server_sends_it() -> None:
    release = asyncio.Event()

    async def handler(reader: asyncio.StreamReader, writer: asyncio.StreamWriter) -> None:
        await read_request(reader)
        writer.write(OK_HEAD + b"transfer-encoding: chunked\r\n\r\n5\r\nfirst\r\n")
        await writer.drain()
        await release.wait()  # the second piece is only written once the client has the first
        writer.write(b"6\r\nsecond\r\n0\r\n\r\n")
        await writer.drain()

    async def scenario(url: str, pool: Pool) -> None:
        response = await post(pool, url)
        assert await response.__anext__() == b"first"
        release.set()
        rest = [chunk async for chunk in response]
        assert b"".join(rest) == b"second"
        assert pool.open_connections == 1  # a complete chunked message leaves the connection reusable

    run(scenario, handler)


def test_body_delimited_by_the_close_of_the_connection() -> None:
    async def handler(reader: asyncio.StreamReader, writer: asyncio.StreamWriter) -> None:
        await read_request(reader)
        writer.write(b"HTTP/1.1 200 OK\r\nconnection: close\r\n\r\nall of it")
        await writer.drain()
        writer.close()

    async def scenario(url: str, pool: Pool) -> None:
        response = await post(pool, url)
        assert await response.aread() == b"all of it"
        await response.aclose()
        assert pool.open_connections == 0

    run(scenario, handler)


def test_an_interim_100_continue_is_skipped() -> None:
    async def handler(reader: asyncio.StreamReader, writer: asyncio.StreamWriter) -> None:
        await read_request(reader)
        writer.write(b"HTTP/1.1 100 Continue\r\n\r\n" + OK_HEAD + b"content-length: 2\r\n\r\nok")
        await writer.drain()

    async def scenario(url: str, pool: Pool) -> None:
        response = await post(pool, url)
        assert response.status_code == 200
        assert await response.aread() == b"ok"

    run(scenario, handler)


def test_gzip_body_is_decoded() -> None:
    packed = gzip.compress(b'{"answer":"' + b"x" * 5000 + b'"}')

    async def handler(reader: asyncio.StreamReader, writer: asyncio.StreamWriter) -> None:
        await read_request(reader)
        writer.write(OK_HEAD + b"content-encoding: gzip\r\ncontent-length: %d\r\n\r\n" % len(packed) + packed)
        await writer.drain()

    async def scenario(url: str, pool: Pool) -> None:
        response = await post(pool, url)
        assert await response.aread() == b'{"answer":"' + b"x" * 5000 + b'"}'

    run(scenario, handler)


def test_a_large_body_read_slowly_arrives_whole() -> None:
    payload = bytes(range(256)) * 8192  # 2 MiB: reading pauses above the high-water mark and resumes

    async def handler(reader: asyncio.StreamReader, writer: asyncio.StreamWriter) -> None:
        await read_request(reader)
        writer.write(OK_HEAD + b"content-length: %d\r\n\r\n" % len(payload) + payload)
        await writer.drain()

    async def scenario(url: str, pool: Pool) -> None:
        response = await post(pool, url)
        received = bytearray()
        async for chunk in response:
            received += chunk
            await asyncio.sleep(0)
        assert bytes(received) == payload

    run(scenario, handler)


def test_a_server_closing_an_idle_connection_costs_the_next_request_nothing() -> None:
    connections = 0

    async def handler(reader: asyncio.StreamReader, writer: asyncio.StreamWriter) -> None:
        nonlocal connections
        connections += 1
        await read_request(reader)
        writer.write(OK_HEAD + b"content-length: 2\r\n\r\nok")
        await writer.drain()
        writer.close()  # keep-alive advertised, then closed while idle

    async def scenario(url: str, pool: Pool) -> None:
        for _ in range(2):
            response = await post(pool, url)
            assert await response.aread() == b"ok"
            await asyncio.sleep(0.05)  # the event loop sees the close
            assert pool.open_connections == 0

    run(scenario, handler)
    assert connections == 2


# Faults, each as what the server does after reading the request: (name, bytes written, then "silence"
# (sleep), "abort" (reset) or "close"), when the client sees the failure ("send": the request call itself,
# "read": reading the body), and the failure's kind and a word of its message.
FAULTS = [
    ("silence before the headers", b"", "silence", "send", "read_timeout", "in time"),
    ("silence mid-body", OK_HEAD + b"content-length: 100\r\n\r\npartial", "silence", "read", "read_timeout",
     "in time"),
    ("cut mid-body", OK_HEAD + b"content-length: 100\r\n\r\npartial", "abort", "read", "connection_lost",
     "mid-response"),
    ("closed without an answer", b"", "close", "send", "connection_lost", "without answering"),
    ("not HTTP at all", b"SSH-2.0-OpenSSH_9.2\r\n\r\n", "silence", "send", "protocol", "invalid HTTP"),
    ("unsupported content-encoding", OK_HEAD + b"content-encoding: zstd\r\ncontent-length: 2\r\n\r\nok",
     "silence", "send", "protocol", "zstd"),
]


@pytest.mark.parametrize(("written", "then", "seen_at", "kind", "words"), [f[1:] for f in FAULTS],
                         ids=[f[0] for f in FAULTS])
def test_a_fault_is_a_classified_failure_and_costs_the_connection(
        written: bytes, then: str, seen_at: str, kind: str, words: str) -> None:
    async def handler(reader: asyncio.StreamReader, writer: asyncio.StreamWriter) -> None:
        await read_request(reader)
        writer.write(written)
        await writer.drain()
        if then == "abort":
            writer.transport.abort()
        elif then == "silence":
            await asyncio.sleep(5)

    async def scenario(url: str, pool: Pool) -> None:
        async def post_and_read() -> None:
            response = await post(pool, url, timeout=0.2)
            assert seen_at == "read", "the request call itself should have failed"
            await response.aread()

        with pytest.raises(TransportFailure) as failure:
            await post_and_read()
        assert failure.value.kind == kind
        assert words in str(failure.value)
        await asyncio.sleep(0.01)
        assert pool.open_connections == 0  # a connection that failed is never reused

    run(scenario, handler)


def test_a_refused_connection_is_connect_and_names_the_address() -> None:
    async def main() -> None:
        server = await asyncio.start_server(lambda r, w: None, "127.0.0.1", 0)
        port = server.sockets[0].getsockname()[1]
        server.close()
        await server.wait_closed()
        pool = Pool(max_connections=2, max_idle_per_origin=2, keepalive_expiry=30)
        with pytest.raises(TransportFailure, match=f"127.0.0.1:{port}") as failure:
            await post(pool, f"http://127.0.0.1:{port}/v1/x")
        assert failure.value.kind == "connect"
        assert pool.open_connections == 0

    asyncio.run(main())


def test_a_request_waits_for_a_free_connection_then_the_pool_is_exhausted_at_its_connect_timeout() -> None:
    async def handler(reader: asyncio.StreamReader, writer: asyncio.StreamWriter) -> None:
        while True:
            try:
                await read_request(reader)
            except asyncio.IncompleteReadError:
                return
            writer.write(OK_HEAD + b"content-length: 2\r\n\r\nok")
            await writer.drain()

    async def scenario(url: str, pool: Pool) -> None:
        held = await post(pool, url)  # body unread: the only connection stays busy
        waiting = asyncio.create_task(post(pool, url))
        await asyncio.sleep(0.05)
        assert not waiting.done()
        assert await held.aread() == b"ok"  # released: the waiting request takes the connection
        second = await waiting
        assert await second.aread() == b"ok"
        assert pool.open_connections == 1

        busy = await post(pool, url)
        with pytest.raises(PoolExhausted, match="stayed busy"):
            await pool.request("POST", url, {}, b"", timeout=5, connect_timeout=0.1)
        await busy.aclose()

    run(scenario, handler, max_connections=1)


def test_cancelling_a_request_mid_body_closes_its_connection() -> None:
    async def handler(reader: asyncio.StreamReader, writer: asyncio.StreamWriter) -> None:
        await read_request(reader)
        writer.write(OK_HEAD + b"content-length: 100\r\n\r\npartial")
        await writer.drain()
        await asyncio.sleep(5)

    async def scenario(url: str, pool: Pool) -> None:
        response = await post(pool, url)
        reading = asyncio.create_task(response.aread())
        await asyncio.sleep(0.05)
        reading.cancel()
        with pytest.raises(asyncio.CancelledError):
            await reading
        await response.aclose()
        assert pool.open_connections == 0

    run(scenario, handler)


def test_a_header_with_a_line_break_is_refused_without_echoing_its_value() -> None:
    async def handler(reader: asyncio.StreamReader, writer: asyncio.StreamWriter) -> None:
        raise AssertionError("nothing may be sent")

    async def scenario(url: str, pool: Pool) -> None:
        with pytest.raises(TransportFailure) as failure:
            await pool.request("POST", url, {"x-api-key": "secret-value\r\nx-evil: 1"}, b"",
                               timeout=1, connect_timeout=1)
        assert failure.value.kind == "protocol"
        assert "x-api-key" in str(failure.value)
        assert "secret-value" not in str(failure.value)
        assert pool.open_connections == 0

    run(scenario, handler)


def test_a_url_that_is_not_http_is_refused() -> None:
    async def main() -> None:
        pool = Pool(max_connections=2, max_idle_per_origin=2, keepalive_expiry=30)
        with pytest.raises(TransportFailure, match="http"):
            await post(pool, "ftp://example.org/v1")

    asyncio.run(main())


CERT = Path(__file__).with_name("localhost-cert.pem")  # self-signed for "localhost", made for these tests only
KEY = Path(__file__).with_name("localhost-key.pem")


def tls_server_context() -> ssl.SSLContext:
    context = ssl.create_default_context(ssl.Purpose.CLIENT_AUTH)
    context.load_cert_chain(CERT, KEY)
    return context


async def tls_answer(reader: asyncio.StreamReader, writer: asyncio.StreamWriter) -> None:
    try:
        await read_request(reader)
        writer.write(OK_HEAD + b"content-length: 9\r\n\r\nover tls!")
        await writer.drain()
    except (asyncio.IncompleteReadError, ConnectionError, ssl.SSLError):
        pass
    finally:
        writer.close()


def test_https_is_spoken_and_the_certificate_checked_against_the_host_name() -> None:
    async def main() -> None:
        server = await asyncio.start_server(tls_answer, "127.0.0.1", 0, ssl=tls_server_context())
        port = server.sockets[0].getsockname()[1]
        trusting = ssl.create_default_context(cafile=str(CERT))
        try:
            pool = Pool(max_connections=2, max_idle_per_origin=2, keepalive_expiry=30, ssl_context=trusting)
            response = await post(pool, f"https://localhost:{port}/v1/x")
            assert await response.aread() == b"over tls!"
            pool.close()

            # The same server under a name its certificate does not carry: refused before anything is sent.
            pool = Pool(max_connections=2, max_idle_per_origin=2, keepalive_expiry=30, ssl_context=trusting)
            with pytest.raises(TransportFailure) as failure:
                await post(pool, f"https://127.0.0.1:{port}/v1/x")
            assert failure.value.kind == "tls"
            assert pool.open_connections == 0
            assert "certificate verify failed: IP address mismatch" in str(failure.value)
            assert "127.0.0.1" in str(failure.value)

            # The default context (certifi's bundle) does not trust a self-signed certificate.
            pool = Pool(max_connections=2, max_idle_per_origin=2, keepalive_expiry=30)
            with pytest.raises(TransportFailure) as failure:
                await post(pool, f"https://localhost:{port}/v1/x")
            assert failure.value.kind == "tls"
            assert pool.open_connections == 0
            assert "self-signed" in str(failure.value)
        finally:
            server.close()
            await server.wait_closed()

    asyncio.run(main())

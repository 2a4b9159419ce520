"""Framing faults a provider (or a box in between) can commit, each against a scripted server on loopback:
trailers, a second response in one read, oversized heads, bodies cut or inflated, and trickled answers.
"""

from __future__ import annotations

import asyncio
import gzip
import socket
import struct

import pytest

from routing.clients.http1 import Pool, TransportFailure
from tests.clients.http1.scripted import OK_HEAD, Server, answer_each, eventually, make_pool, post, read_request, run


def reset(writer: asyncio.StreamWriter) -> None:
    """Close with a TCP reset (SO_LINGER 0), as a crashed process or a middlebox dropping state does."""
    sock = writer.get_extra_info("socket")
    sock.setsockopt(socket.SOL_SOCKET, socket.SO_LINGER, struct.pack("ii", 1, 0))
    writer.transport.abort()


def test_it_keeps_a_chunked_trailer_out_of_this_response_and_the_next() -> None:
    answers = [
        OK_HEAD + b"transfer-encoding: chunked\r\n\r\n2\r\nok\r\n0\r\ncontent-encoding: gzip\r\nx-trailer: 1\r\n\r\n",
        OK_HEAD + b"content-length: 5\r\n\r\nplain",
    ]
    connections = 0

    async def handler(reader: asyncio.StreamReader, writer: asyncio.StreamWriter) -> None:
        nonlocal connections
        connections += 1
        for answer in answers:
            await read_request(reader)
            writer.write(answer)
            await writer.drain()
        await reader.read()

    async def scenario(url: str, pool: Pool) -> None:
        first = await post(pool, url)
        assert await first.aread() == b"ok"
        second = await post(pool, url)  # the same connection
        assert "content-encoding" not in second.header_dict()
        assert "x-trailer" not in second.header_dict()
        assert await second.aread() == b"plain"
        assert "x-trailer" not in first.header_dict()

    run(scenario, handler)
    assert connections == 1


def test_it_fails_a_body_delimited_by_the_close_when_the_connection_is_reset() -> None:
    async def handler(reader: asyncio.StreamReader, writer: asyncio.StreamWriter) -> None:
        await read_request(reader)
        writer.write(b"HTTP/1.1 200 OK\r\nconnection: close\r\n\r\nthe first half")
        await writer.drain()
        await asyncio.sleep(0.05)
        reset(writer)

    async def scenario(url: str, pool: Pool) -> None:
        response = await post(pool, url)
        with pytest.raises(TransportFailure, match="reset") as failure:
            await response.aread()
        assert failure.value.kind == "connection_lost"

    run(scenario, handler)


PACKED = gzip.compress(b'{"answer":"' + bytes(range(256)) * 64 + b'"}')


@pytest.mark.parametrize(("head", "kind"), [
    (OK_HEAD + b"content-encoding: gzip\r\ncontent-length: %d\r\n\r\n" % (len(PACKED) - 20), "protocol"),
    (OK_HEAD + b"content-encoding: gzip\r\nconnection: close\r\n\r\n", "connection_lost"),
], ids=["sized body", "body ended by the close"])
def test_it_fails_a_truncated_gzip_body(head: bytes, kind: str) -> None:
    async def handler(reader: asyncio.StreamReader, writer: asyncio.StreamWriter) -> None:
        await read_request(reader)
        writer.write(head + PACKED[:-20])
        await writer.drain()
        writer.close()

    async def scenario(url: str, pool: Pool) -> None:
        response = await post(pool, url)
        with pytest.raises(TransportFailure, match="compressed body") as failure:
            await response.aread()
        assert failure.value.kind == kind
        await eventually(lambda: pool.open_connections == 0, what="the connection's close")

    run(scenario, handler)


@pytest.mark.parametrize("after", [
    OK_HEAD + b"content-length: 6\r\n\r\nsecond",
    b"garbage that is not HTTP",
], ids=["a second response", "garbage"])
def test_it_keeps_the_first_response_and_closes_a_connection_with_bytes_after_it(after: bytes) -> None:
    served = 0

    async def handler(reader: asyncio.StreamReader, writer: asyncio.StreamWriter) -> None:
        nonlocal served
        served += 1
        if served > 1:
            await answer_each(reader, writer, OK_HEAD + b"content-length: 5\r\n\r\nthird")
            return
        await read_request(reader)
        writer.write(OK_HEAD + b"content-length: 5\r\n\r\nfirst" + after)  # one write: one read for the client
        await writer.drain()
        await answer_each(reader, writer, OK_HEAD + b"content-length: 6\r\n\r\nsecond")

    async def scenario() -> None:
        async with Server(handler) as server:
            pool = make_pool()
            try:
                response = await post(pool, server.url)
                assert await response.aread() == b"first"
                await eventually(lambda: server.open == 0, what="the close of the connection")
                again = await post(pool, server.url)
                assert await again.aread() == b"third"
                assert server.connections == 2
            finally:
                pool.close()

    asyncio.run(scenario())


@pytest.mark.parametrize(("head", "words"), [
    (OK_HEAD + b"x-big: " + b"a" * (8 * 1024 * 1024) + b"\r\n", "exceeds"),
    (OK_HEAD + b"x-big: " + b"a" * (70 * 1024) + b"\r\ncontent-length: 2\r\n\r\nok", "exceeds"),
    (OK_HEAD + b"".join(b"x-h%d: v\r\n" % i for i in range(101)) + b"content-length: 2\r\n\r\nok", "header lines"),
], ids=["8 MiB header", "70 KiB header", "101 headers"])
def test_it_refuses_a_response_head_past_the_limits(head: bytes, words: str) -> None:
    async def handler(reader: asyncio.StreamReader, writer: asyncio.StreamWriter) -> None:
        await read_request(reader)
        writer.write(head)
        await writer.drain()
        await asyncio.sleep(5)

    async def scenario(url: str, pool: Pool) -> None:
        with pytest.raises(TransportFailure, match=words) as failure:
            await post(pool, url)
        assert failure.value.kind == "protocol"
        assert pool.open_connections == 0

    run(scenario, handler)


def test_it_refuses_a_body_past_the_response_cap() -> None:
    async def handler(reader: asyncio.StreamReader, writer: asyncio.StreamWriter) -> None:
        await read_request(reader)
        writer.write(OK_HEAD + b"content-length: 300000\r\n\r\n" + b"x" * 300_000)
        await writer.drain()

    async def scenario(url: str, pool: Pool) -> None:
        async def post_and_read() -> None:
            response = await post(pool, url)  # the head and the first of the body may come in one read
            await response.aread()

        with pytest.raises(TransportFailure, match="exceeds 100000 bytes") as failure:
            await post_and_read()
        assert failure.value.kind == "protocol"
        await eventually(lambda: pool.open_connections == 0, what="the connection's close")

    run(scenario, handler, max_response_bytes=100_000)


def test_it_refuses_a_body_that_inflates_past_the_decompressed_cap() -> None:
    bomb = gzip.compress(b"\0" * (16 * 1024 * 1024))  # 16 KiB on the wire

    async def handler(reader: asyncio.StreamReader, writer: asyncio.StreamWriter) -> None:
        await read_request(reader)
        writer.write(OK_HEAD + b"content-encoding: gzip\r\ncontent-length: %d\r\n\r\n" % len(bomb) + bomb)
        await writer.drain()

    async def scenario(url: str, pool: Pool) -> None:
        response = await post(pool, url)
        with pytest.raises(TransportFailure, match="decompresses to more than 1048576 bytes") as failure:
            await response.aread()
        assert failure.value.kind == "protocol"

    run(scenario, handler, max_decoded_bytes=1024 * 1024)


def test_a_trickled_body_cannot_outlast_the_exchange_timeout() -> None:
    async def handler(reader: asyncio.StreamReader, writer: asyncio.StreamWriter) -> None:
        await read_request(reader)
        writer.write(OK_HEAD + b"content-length: 60\r\n\r\n")
        for _ in range(60):  # a byte every 50 ms: each read comes well within any per-read timeout
            writer.write(b"x")
            await writer.drain()
            await asyncio.sleep(0.05)

    async def scenario(url: str, pool: Pool) -> None:
        response = await post(pool, url, timeout=0.5)
        with pytest.raises(TransportFailure, match="deadline") as failure:
            await response.aread()
        assert failure.value.kind == "read_timeout"
        assert pool.open_connections == 0

    run(scenario, handler)


def test_a_stream_silent_for_longer_than_its_idle_timeout_fails() -> None:
    async def handler(reader: asyncio.StreamReader, writer: asyncio.StreamWriter) -> None:
        await read_request(reader)
        writer.write(OK_HEAD + b"transfer-encoding: chunked\r\n\r\n5\r\nfirst\r\n")
        await writer.drain()
        await asyncio.sleep(5)

    async def scenario(url: str, pool: Pool) -> None:
        response = await post(pool, url, timeout=30, idle_timeout=0.2)
        assert await response.__anext__() == b"first"
        with pytest.raises(TransportFailure, match="nothing for 0.2s") as failure:
            await response.__anext__()
        assert failure.value.kind == "read_timeout"

    run(scenario, handler)

"""Framing faults a provider (or a box in between) can commit, each against a scripted server on loopback:
trailers, a second response in one read, oversized heads, bodies cut or inflated, and trickled answers.
"""

from __future__ import annotations

import asyncio
import gzip
import socket
import struct

import pytest

from routing.clients.http import Client, TransportFailure
from tests.clients.http.scripted import OK_HEAD, Server, answer_each, closed, make_client, post, read_request, run


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

    async def scenario(server: Server, client: Client) -> None:
        url = server.url
        first = await post(client, url)
        assert await first.aread() == b"ok"
        second = await post(client, url)  # the same connection
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

    async def scenario(server: Server, client: Client) -> None:
        url = server.url
        response = await post(client, url)
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

    async def scenario(server: Server, client: Client) -> None:
        url = server.url
        response = await post(client, url)
        with pytest.raises(TransportFailure, match="compressed body") as failure:
            await response.aread()
        assert failure.value.kind == kind
        assert client.slots.in_use == 0

    run(scenario, handler)


def test_it_keeps_the_first_response_and_closes_a_connection_with_a_second_response_after_it() -> None:
    served = 0

    async def handler(reader: asyncio.StreamReader, writer: asyncio.StreamWriter) -> None:
        nonlocal served
        served += 1
        if served > 1:
            await answer_each(reader, writer, OK_HEAD + b"content-length: 5\r\n\r\nthird")
            return
        await read_request(reader)
        # One write: one read for the client, a response to a request it never sent after the first.
        writer.write(OK_HEAD + b"content-length: 5\r\n\r\nfirst" + OK_HEAD + b"content-length: 6\r\n\r\nsecond")
        await writer.drain()
        await answer_each(reader, writer, OK_HEAD + b"content-length: 6\r\n\r\nsecond")

    async def scenario() -> None:
        async with Server(handler) as server:
            client = make_client()
            try:
                response = await post(client, server.url)
                assert await response.aread() == b"first"
                await closed(server)
                again = await post(client, server.url)
                assert await again.aread() == b"third"
                assert server.connections == 2
            finally:
                await client.aclose()

    asyncio.run(scenario())


def test_it_fails_a_response_followed_by_garbage_and_closes_the_connection() -> None:
    # aiohttp's parser refuses the whole read: the response is not trusted either (unlike a second response,
    # which parses), and nothing more is read from a connection that no longer knows where it is.
    async def handler(reader: asyncio.StreamReader, writer: asyncio.StreamWriter) -> None:
        await read_request(reader)
        writer.write(OK_HEAD + b"content-length: 5\r\n\r\nfirst" + b"garbage that is not HTTP")
        await writer.drain()

    async def scenario() -> None:
        async with Server(handler) as server:
            client = make_client()
            try:
                with pytest.raises(TransportFailure, match="invalid HTTP response") as failure:
                    await (await post(client, server.url)).aread()
                assert failure.value.kind == "protocol"
                await closed(server)
            finally:
                await client.aclose()

    asyncio.run(scenario())


@pytest.mark.parametrize(("head", "words"), [
    (OK_HEAD + b"x-big: " + b"a" * (8 * 1024 * 1024) + b"\r\n", "exceeds"),
    (OK_HEAD + b"x-big: " + b"a" * (70 * 1024) + b"\r\ncontent-length: 2\r\n\r\nok", "exceeds"),
    (b"HTTP/1.1 200 " + b"O" * (9 * 1024) + b"\r\ncontent-length: 2\r\n\r\nok", "exceeds"),
    (OK_HEAD + b"".join(b"x-h%d: %s\r\n" % (i, b"v" * 2048) for i in range(60)) + b"content-length: 2\r\n\r\nok",
     "exceeds"),
    (OK_HEAD + b"".join(b"x-h%d: v\r\n" % i for i in range(101)) + b"content-length: 2\r\n\r\nok", "header lines"),
], ids=["8 MiB header", "70 KiB header", "9 KiB status line", "120 KiB of headers", "101 headers"])
def test_it_refuses_a_response_head_past_the_limits(head: bytes, words: str) -> None:
    async def handler(reader: asyncio.StreamReader, writer: asyncio.StreamWriter) -> None:
        await read_request(reader)
        writer.write(head)
        await writer.drain()

    async def scenario(server: Server, client: Client) -> None:
        url = server.url
        with pytest.raises(TransportFailure, match=words) as failure:
            await post(client, url)
        assert failure.value.kind == "protocol"
        assert client.slots.in_use == 0

    run(scenario, handler)


def test_it_refuses_a_body_past_the_response_cap() -> None:
    async def handler(reader: asyncio.StreamReader, writer: asyncio.StreamWriter) -> None:
        await read_request(reader)
        writer.write(OK_HEAD + b"content-length: 300000\r\n\r\n" + b"x" * 300_000)
        await writer.drain()

    async def scenario(server: Server, client: Client) -> None:
        url = server.url
        async def post_and_read() -> None:
            response = await post(client, url)  # the head and the first of the body may come in one read
            await response.aread()

        with pytest.raises(TransportFailure, match="exceeds 100000 bytes") as failure:
            await post_and_read()
        assert failure.value.kind == "protocol"
        assert client.slots.in_use == 0

    run(scenario, handler, max_response_bytes=100_000)


def test_it_refuses_a_body_that_inflates_past_the_decompressed_cap() -> None:
    bomb = gzip.compress(b"\0" * (16 * 1024 * 1024))  # 16 KiB on the wire

    async def handler(reader: asyncio.StreamReader, writer: asyncio.StreamWriter) -> None:
        await read_request(reader)
        writer.write(OK_HEAD + b"content-encoding: gzip\r\ncontent-length: %d\r\n\r\n" % len(bomb) + bomb)
        await writer.drain()

    async def scenario(server: Server, client: Client) -> None:
        url = server.url
        response = await post(client, url)
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

    async def scenario(server: Server, client: Client) -> None:
        url = server.url
        response = await post(client, url, timeout=0.5)
        with pytest.raises(TransportFailure, match="deadline") as failure:
            await response.aread()
        assert failure.value.kind == "read_timeout"
        assert client.slots.in_use == 0

    run(scenario, handler)


def test_a_stream_silent_for_longer_than_its_idle_timeout_fails() -> None:
    async def handler(reader: asyncio.StreamReader, writer: asyncio.StreamWriter) -> None:
        await read_request(reader)
        writer.write(OK_HEAD + b"transfer-encoding: chunked\r\n\r\n5\r\nfirst\r\n")
        await writer.drain()
        await reader.read()  # silence until the client hangs up

    async def scenario(server: Server, client: Client) -> None:
        url = server.url
        response = await post(client, url, timeout=30, idle_timeout=0.2)
        assert await response.__anext__() == b"first"
        with pytest.raises(TransportFailure, match="nothing for 0.2s") as failure:
            await response.__anext__()
        assert failure.value.kind == "read_timeout"

    run(scenario, handler)

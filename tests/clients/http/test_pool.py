"""Connection slots and reuse against scripted servers on loopback: per-origin slots, idle connections that
never hold a slot, a waiter cancelled after its wake-up, and the one safe resend.
"""

from __future__ import annotations

import asyncio

import pytest

from routing.clients.http import PoolExhausted, TransportFailure
from tests.clients.http.scripted import OK_HEAD, Server, answer_each, eventually, make_client, post, read_request

OK = OK_HEAD + b"content-length: 2\r\n\r\nok"


async def answer_ok(reader: asyncio.StreamReader, writer: asyncio.StreamWriter) -> None:
    await answer_each(reader, writer, OK)


def test_a_busy_origin_cannot_take_the_slots_another_origin_needs() -> None:
    async def scenario() -> None:
        async with Server(answer_ok) as busy, Server(answer_ok) as other:
            client = make_client(max_connections=3, max_connections_per_origin=2)
            try:
                held = [await post(client, busy.url) for _ in range(2)]  # bodies unread: both stay busy
                with pytest.raises(PoolExhausted, match=f"all 2 connections to 127.0.0.1:{busy.port}"):
                    await client.request("POST", busy.url, {}, b"", timeout=5, connect_timeout=0.1)
                response = await post(client, other.url)
                assert await response.aread() == b"ok"
                for response in held:
                    await response.aclose()
            finally:
                await client.aclose()

    asyncio.run(scenario())


def test_when_every_slot_is_busy_the_pool_is_exhausted_for_any_origin() -> None:
    async def scenario() -> None:
        async with Server(answer_ok) as first, Server(answer_ok) as second:
            client = make_client(max_connections=2)
            try:
                held = [await post(client, first.url) for _ in range(2)]
                with pytest.raises(PoolExhausted, match="all 2 upstream connections stayed busy"):
                    await client.request("POST", second.url, {}, b"", timeout=5, connect_timeout=0.1)
                for response in held:
                    await response.aclose()
            finally:
                await client.aclose()

    asyncio.run(scenario())


def test_idle_connections_of_five_providers_do_not_starve_a_sixth() -> None:
    # Slots count exchanges, not sockets: the five providers' idle keep-alive connections hold none, so the
    # sixth gets its slot at once. (A socket-counting pool would have to close one of them to make room.)
    async def scenario() -> None:
        servers = [Server(answer_ok) for _ in range(6)]
        for server in servers:
            await server.__aenter__()
        client = make_client(max_connections=5, max_connections_per_origin=1)
        try:
            for server in servers[:5]:
                assert await (await post(client, server.url)).aread() == b"ok"
            assert sum(server.open for server in servers[:5]) == 5  # kept alive, idle
            assert client.slots.in_use == 0
            response = await client.request("POST", servers[5].url, {}, b"", timeout=5, connect_timeout=0.1)
            assert await response.aread() == b"ok"
        finally:
            await client.aclose()
            for server in servers:
                await server.__aexit__(None, None, None)

    asyncio.run(scenario())


def test_a_waiter_cancelled_after_its_wake_up_hands_the_slot_to_the_next() -> None:
    async def scenario() -> None:
        async with Server(answer_ok) as server:
            client = make_client(max_connections=1)
            try:
                held = await post(client, server.url)
                first = asyncio.create_task(post(client, server.url))
                second = asyncio.create_task(post(client, server.url))
                await eventually(lambda: client.slots.waiting() == 2, what="both requests waiting for the slot")
                assert await held.aread() == b"ok"  # the slot is given back and wakes the first waiter...
                first.cancel()  # ...which is cancelled before it can run (its client hung up)
                with pytest.raises(asyncio.CancelledError):
                    await first
                response = await second
                assert await response.aread() == b"ok"
                assert server.connections == 1
                assert client.slots.in_use == 0
            finally:
                await client.aclose()

    asyncio.run(scenario())


def test_a_request_on_a_kept_alive_connection_the_server_closed_unanswered_goes_once_more_on_a_new_one() -> None:
    requests = 0

    async def handler(reader: asyncio.StreamReader, writer: asyncio.StreamWriter) -> None:
        nonlocal requests
        await read_request(reader)
        requests += 1
        writer.write(OK)
        await writer.drain()
        await read_request(reader)
        requests += 1
        writer.transport.abort()  # closed as the next request came in, without a byte of an answer

    async def scenario() -> None:
        async with Server(handler) as server:
            client = make_client()
            try:
                assert await (await post(client, server.url)).aread() == b"ok"
                assert await (await post(client, server.url)).aread() == b"ok"
                assert (server.connections, requests) == (2, 3)
            finally:
                await client.aclose()

    asyncio.run(scenario())


def test_a_fresh_connection_closed_unanswered_is_not_resent() -> None:
    async def handler(reader: asyncio.StreamReader, writer: asyncio.StreamWriter) -> None:
        await read_request(reader)
        writer.transport.abort()

    async def scenario() -> None:
        async with Server(handler) as server:
            client = make_client()
            try:
                with pytest.raises(TransportFailure) as failure:
                    await post(client, server.url)
                assert failure.value.kind == "connection_lost"  # the provider may have acted on it
                assert server.connections == 1
            finally:
                await client.aclose()

    asyncio.run(scenario())


@pytest.mark.parametrize("partial", [b"HTTP/1.1 200 OK\r\ncontent-", OK_HEAD + b"content-length: 9\r\n\r\nhalf"],
                         ids=["part of the head", "part of the body"])
def test_a_kept_alive_connection_that_answered_in_part_is_not_resent(partial: bytes) -> None:
    async def handler(reader: asyncio.StreamReader, writer: asyncio.StreamWriter) -> None:
        await read_request(reader)
        writer.write(OK)
        await read_request(reader)
        writer.write(partial)
        await writer.drain()
        writer.transport.abort()

    async def scenario() -> None:
        async with Server(handler) as server:
            client = make_client()
            try:
                assert await (await post(client, server.url)).aread() == b"ok"
                with pytest.raises(TransportFailure) as failure:
                    await (await post(client, server.url)).aread()
                assert failure.value.kind == "connection_lost"  # the provider may have acted on it
                assert server.connections == 1
            finally:
                await client.aclose()

    asyncio.run(scenario())

"""The connection pool's limits and reuse against scripted servers on loopback: per-origin slots, idle
connections given up for another origin, a waiter cancelled after its wake-up, and the one safe resend.
"""

from __future__ import annotations

import asyncio

import pytest

from routing.clients.http1 import PoolExhausted, TransportFailure
from tests.clients.http1.scripted import OK_HEAD, Server, answer_each, eventually, make_pool, post, read_request

OK = OK_HEAD + b"content-length: 2\r\n\r\nok"


async def answer_ok(reader: asyncio.StreamReader, writer: asyncio.StreamWriter) -> None:
    await answer_each(reader, writer, OK)


def test_a_busy_origin_cannot_take_the_slots_another_origin_needs() -> None:
    async def scenario() -> None:
        async with Server(answer_ok) as busy, Server(answer_ok) as other:
            pool = make_pool(max_connections=3, max_connections_per_origin=2)
            try:
                held = [await post(pool, busy.url) for _ in range(2)]  # bodies unread: both stay busy
                with pytest.raises(PoolExhausted, match=f"all 2 connections to 127.0.0.1:{busy.port}"):
                    await pool.request("POST", busy.url, {}, b"", timeout=5, connect_timeout=0.1)
                response = await post(pool, other.url)
                assert await response.aread() == b"ok"
                for response in held:
                    await response.aclose()
            finally:
                pool.close()

    asyncio.run(scenario())


def test_an_idle_connection_of_another_origin_is_closed_when_the_pool_is_full() -> None:
    async def scenario() -> None:
        async with Server(answer_ok) as first, Server(answer_ok) as second:
            pool = make_pool(max_connections=2)
            try:
                responses = [await post(pool, first.url) for _ in range(2)]
                for response in responses:
                    assert await response.aread() == b"ok"  # both connections now idle, the pool full
                assert pool.open_connections == 2
                response = await pool.request("POST", second.url, {}, b"", timeout=5, connect_timeout=1)
                assert await response.aread() == b"ok"
                await eventually(lambda: first.open == 1, what="the close of one of the idle connections")
                assert pool.open_connections == 2
            finally:
                pool.close()

    asyncio.run(scenario())


def test_a_waiter_cancelled_after_its_wake_up_hands_the_slot_to_the_next() -> None:
    async def scenario() -> None:
        async with Server(answer_ok) as server:
            pool = make_pool(max_connections=1)
            try:
                held = await post(pool, server.url)
                first = asyncio.create_task(post(pool, server.url))
                second = asyncio.create_task(post(pool, server.url))
                await eventually(lambda: len(pool._waiters) == 2, what="both requests waiting for the slot")
                assert await held.aread() == b"ok"  # the connection goes idle and wakes the first waiter...
                first.cancel()  # ...which is cancelled before it can run (its client hung up)
                with pytest.raises(asyncio.CancelledError):
                    await first
                response = await second
                assert await response.aread() == b"ok"
                assert server.connections == 1
            finally:
                pool.close()

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
            pool = make_pool()
            try:
                assert await (await post(pool, server.url)).aread() == b"ok"
                assert await (await post(pool, server.url)).aread() == b"ok"
                assert (server.connections, requests) == (2, 3)
            finally:
                pool.close()

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
            pool = make_pool()
            try:
                assert await (await post(pool, server.url)).aread() == b"ok"
                with pytest.raises(TransportFailure) as failure:
                    await (await post(pool, server.url)).aread()
                assert failure.value.kind == "connection_lost"  # the provider may have acted on it
                assert server.connections == 1
            finally:
                pool.close()

    asyncio.run(scenario())

"""A stored conversation keeps each turn once: a response that continues another stores its own input and answer
with a link to its parent; a load walks the links in one query, bounded in depth, and a broken or too long chain
is an error that says so. Retention goes by conversation: a turn whose own time is up is kept while a later turn
of its conversation can still be continued, and the whole conversation goes when none can.

A transactional test database: the store runs in worker threads.
"""

from __future__ import annotations

import asyncio
import datetime as dt
import threading
import time
from typing import Any

import pytest
from django.db import connections, transaction

from routing.clients import responses_store
from routing.models import StoredResponse
from tests.clients.statements import statements_on

pytestmark = pytest.mark.django_db(transaction=True)

STORE = "routing_storedresponse"


def user(text: str) -> dict[str, Any]:
    return {"type": "message", "role": "user", "content": text}


def assistant(text: str) -> dict[str, Any]:
    return {"type": "message", "role": "assistant", "content": [{"type": "output_text", "text": text}]}


def turn(number: int) -> list[dict[str, Any]]:
    return [user(f"q{number}"), assistant(f"a{number}")]


async def store_chain(length: int, *, scope: str = "1", prefix: str = "r") -> list[str]:
    """``length`` turns, each continuing the one before, written the way the gateway writes them."""
    ids = [f"resp_{prefix}{n}" for n in range(length)]
    for n, response_id in enumerate(ids):
        responses_store.save_soon(response_id=response_id, key_scope=scope, model="m", instructions=f"sys{n}",
                                  input_items=[user(f"q{n}")], output_items=[assistant(f"a{n}")],
                                  created_unix=time.time(), previous_response_id=ids[n - 1] if n else None)
        await asyncio.gather(*(asyncio.all_tasks() - {asyncio.current_task()}))
    return ids


def test_it_stores_each_turn_once_and_reads_the_chain_in_one_query() -> None:
    async def scenario() -> tuple[list[str], Any]:
        ids = await store_chain(4)
        with statements_on(STORE) as statements:
            loaded = await responses_store.load(ids[-1], key_scope="1")
        assert len(statements.reads) == 1
        return ids, loaded

    ids, loaded = asyncio.run(scenario())
    assert loaded is not None
    assert loaded.items == [item for n in range(4) for item in turn(n)]
    assert (loaded.response_id, loaded.instructions, loaded.turns) == (ids[-1], "sys3", 4)
    rows = StoredResponse.objects.order_by("created_at", "response_id")
    assert all(len(row.input_items) == 1 for row in rows)
    assert {row.root_response_id for row in rows} == {None, ids[0]}  # every later turn names where it began


def test_another_keys_chain_is_not_read() -> None:
    async def scenario() -> Any:
        ids = await store_chain(2, scope="1")
        return await responses_store.load(ids[-1], key_scope="2")

    assert asyncio.run(scenario()) is None


def test_a_missing_earlier_turn_is_an_error_naming_it() -> None:
    async def scenario() -> None:
        ids = await store_chain(3)
        await asyncio.to_thread(_delete, ids[1])
        with pytest.raises(responses_store.BrokenConversation, match="no longer stored"):
            await responses_store.load(ids[-1], key_scope="1")

    asyncio.run(scenario())


def _delete(response_id: str) -> None:
    try:
        StoredResponse.objects.filter(response_id=response_id).delete()
    finally:
        connections.close_all()


def test_a_chain_at_the_most_turns_cannot_be_continued() -> None:
    now = dt.datetime.now(tz=dt.UTC)
    most = responses_store.MAX_TURNS
    StoredResponse.objects.bulk_create(
        StoredResponse(response_id=f"resp_deep{n}", key_scope="1", model="m", input_items=[user("q")],
                       output_items=[assistant("a")], created_at=now, expires_at=now + dt.timedelta(days=1),
                       previous_response_id=f"resp_deep{n - 1}" if n else None,
                       root_response_id="resp_deep0" if n else None)
        for n in range(most))
    below = asyncio.run(responses_store.load(f"resp_deep{most - 2}", key_scope="1"))
    assert below is not None
    assert below.turns == most - 1
    with pytest.raises(responses_store.BrokenConversation, match=f"{most} turns"):
        asyncio.run(responses_store.load(f"resp_deep{most - 1}", key_scope="1"))


def test_retention_keeps_earlier_turns_while_a_later_one_lives_and_then_purges_the_conversation() -> None:
    ids = asyncio.run(store_chain(3))
    past = dt.datetime.now(tz=dt.UTC) - dt.timedelta(seconds=1)
    StoredResponse.objects.filter(response_id__in=ids[:2]).update(expires_at=past)
    assert asyncio.run(responses_store.load(ids[1], key_scope="1")) is None  # its own time is up
    assert responses_store.purge_expired(batch_size=1) == 0  # the last turn still continues them
    loaded = asyncio.run(responses_store.load(ids[2], key_scope="1"))
    assert loaded is not None
    assert loaded.items == [item for n in range(3) for item in turn(n)]
    StoredResponse.objects.filter(response_id=ids[2]).update(expires_at=past)
    other = asyncio.run(store_chain(1, prefix="live"))
    assert responses_store.purge_expired(batch_size=1) == 3
    assert list(StoredResponse.objects.values_list("response_id", flat=True)) == other


def test_a_follow_up_waits_for_its_own_keys_pending_write_only() -> None:
    """A write held up by a lock on the table: another key's load does not wait for it; the owner's does."""
    locked, release = threading.Event(), threading.Event()

    def hold_the_table() -> None:
        try:
            with transaction.atomic():
                with connections["default"].cursor() as cursor:
                    cursor.execute(f"LOCK TABLE {STORE} IN EXCLUSIVE MODE")  # reads pass, writes wait
                locked.set()
                release.wait(30)
        finally:
            connections.close_all()

    holder = threading.Thread(target=hold_the_table)
    holder.start()

    async def scenario() -> tuple[Any, bool, Any]:
        assert await asyncio.to_thread(locked.wait, 30)
        responses_store.save_soon(response_id="resp_pending", key_scope="1", model="m", instructions=None,
                                  input_items=[user("q")], output_items=[assistant("a")], created_unix=time.time())
        theirs = await responses_store.load("resp_pending", key_scope="2")
        write_still_pending = responses_store.pending_writes() == 1
        release.set()
        mine = await responses_store.load("resp_pending", key_scope="1")  # waits for this process's write
        return theirs, write_still_pending, mine

    try:
        theirs, write_still_pending, mine = asyncio.run(scenario())
    finally:
        release.set()
        holder.join()
    assert theirs is None
    assert write_still_pending
    assert mine is not None
    assert mine.items == [user("q"), assistant("a")]

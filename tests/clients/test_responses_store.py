"""The stored Responses API answers in PostgreSQL: written in the background, read by key and expiry, a response
whose row is still on its way found by a follow-up that comes at once (in this process or from another one), and
a database that is down (a write logged and dropped, a read a StoreUnavailable).

A transactional test database: the store runs in worker threads.
"""

from __future__ import annotations

import asyncio
import datetime as dt
import logging
import threading
import time
from typing import Any

import pytest
from django.db import connections

from routing.clients import responses_store
from routing.gateway.stored_responses import issue_response_id
from routing.models import StoredResponse
from tests import unreachable_database

pytestmark = pytest.mark.django_db(transaction=True)
database_unreachable = unreachable_database.database_unreachable

INPUT = [{"type": "message", "role": "user", "content": "hello"}]
OUTPUT = [{"type": "message", "role": "assistant", "content": [{"type": "output_text", "text": "hi"}]}]


def made(created_unix: float) -> str:
    return issue_response_id(key_scope=1, stored=True, now_unix=created_unix)


def save(response_id: str, key_scope: str = "1", created: float | None = None) -> None:
    responses_store.save_soon(response_id=response_id, key_scope=key_scope, model="m", instructions="sys",
                              input_items=INPUT, output_items=OUTPUT, created_unix=created or time.time())


def test_a_response_saved_in_the_background_is_found_at_once_by_its_own_key() -> None:
    response_id = made(time.time())

    async def scenario() -> tuple[Any, Any]:
        save(response_id)  # not awaited: the follow-up below waits for the write itself
        return (await responses_store.load(response_id, key_scope="1"),
                await responses_store.load(response_id, key_scope="2"))

    mine, theirs = asyncio.run(scenario())
    assert mine is not None
    assert theirs is None
    assert (mine.model, mine.instructions, mine.items) == ("m", "sys", [*INPUT, *OUTPUT])
    row = StoredResponse.objects.get(response_id=response_id)
    assert row.expires_at - row.created_at == dt.timedelta(hours=720)


def test_a_row_another_process_is_still_writing_is_waited_for() -> None:
    response_id = made(time.time())

    def other_process() -> None:
        time.sleep(0.3)
        now = dt.datetime.now(tz=dt.UTC)
        try:
            StoredResponse.objects.create(response_id=response_id, key_scope="1", model="m", input_items=INPUT,
                                          output_items=OUTPUT, created_at=now,
                                          expires_at=now + dt.timedelta(hours=1))
        finally:
            connections.close_all()  # this thread's connection, or the test database cannot be dropped

    writer = threading.Thread(target=other_process)
    writer.start()
    try:
        found = asyncio.run(responses_store.load(response_id, key_scope="1", wait_s=5.0))
    finally:
        writer.join()
    assert found is not None


def test_an_old_unknown_id_is_answered_without_waiting() -> None:
    started = time.monotonic()
    for response_id in ("resp_not_ours", made(time.time() - 3 * 3600)):
        assert asyncio.run(responses_store.load(response_id, key_scope="1")) is None
    assert time.monotonic() - started < responses_store.PENDING_WAIT_S


def test_another_keys_fresh_response_is_refused_without_waiting() -> None:
    response_id = made(time.time())

    async def scenario() -> tuple[Any, float]:
        save(response_id, key_scope="1")
        await asyncio.gather(*(asyncio.all_tasks() - {asyncio.current_task()}))
        started = time.monotonic()
        return await responses_store.load(response_id, key_scope="2"), time.monotonic() - started

    theirs, waited = asyncio.run(scenario())
    assert theirs is None
    assert waited < responses_store.PENDING_WAIT_S


def test_expired_rows_are_neither_read_nor_kept() -> None:
    response_id = made(time.time() - 3600)
    now = dt.datetime.now(tz=dt.UTC)
    StoredResponse.objects.create(response_id=response_id, key_scope="1", model="m", input_items=INPUT,
                                  output_items=OUTPUT, created_at=now, expires_at=now - dt.timedelta(seconds=1))
    assert asyncio.run(responses_store.load(response_id, key_scope="1")) is None
    assert responses_store.purge_expired(batch_size=1) == 1
    assert not StoredResponse.objects.exists()


def test_a_database_that_is_down_drops_the_write_and_fails_the_read(
        database_unreachable: None, caplog: pytest.LogCaptureFixture) -> None:
    response_id = made(time.time() - 3600)

    async def scenario() -> None:
        save(response_id)
        await asyncio.gather(*(asyncio.all_tasks() - {asyncio.current_task()}))
        with pytest.raises(responses_store.StoreUnavailable):
            await responses_store.load(response_id, key_scope="1")

    with caplog.at_level(logging.WARNING, logger="gomodel.responses"):
        asyncio.run(scenario())
    assert f"response {response_id} was not stored" in caplog.text

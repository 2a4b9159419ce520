"""The item index of stored responses (``item_reference``): written with its turn, read by key and expiry in one
query, an item of a turn another process is still writing found when the caller says it may be on its way (and
not waited for once its turn is there without it), deleted with its turn by the purge.

A transactional test database: the store runs in worker threads.
"""

from __future__ import annotations

import asyncio
import datetime as dt
import threading
import time
from typing import Any

import pytest
from django.db import connections

from routing.clients import responses_store
from routing.gateway.stored_responses import issue_response_id
from routing.models import StoredResponse, StoredResponseItem

pytestmark = pytest.mark.django_db(transaction=True)

INPUT = [{"type": "message", "role": "user", "content": "weather?"}]
CARRIED = [{"type": "message", "role": "assistant", "content": [{"type": "output_text", "text": "Let me look."}]},
           {"type": "function_call", "call_id": "call_1", "name": "get_weather", "arguments": "{}"}]
# The ids the client was given: the message, the call, and a reasoning item that carries nothing.
POSITIONS: list[tuple[str, int | None]] = [("msg_a", 0), ("fc_b", 1), ("rs_c", None)]


def save(response_id: str, key_scope: str = "1", positions: list[tuple[str, int | None]] = POSITIONS) -> None:
    responses_store.save_soon(response_id=response_id, key_scope=key_scope, model="m", instructions=None,
                              input_items=INPUT, output_items=CARRIED, created_unix=time.time(),
                              item_positions=positions)


def made() -> str:
    return issue_response_id(key_scope=1, stored=True, now_unix=time.time())


def test_the_items_of_a_turn_are_found_by_its_own_key_at_once() -> None:
    async def scenario() -> tuple[Any, Any]:
        save(made())  # not awaited: the look-up waits for this process's writes of the key
        wanted = ["msg_a", "fc_b", "rs_c", "msg_unknown"]
        return (await responses_store.load_items(wanted, key_scope="1"),
                await responses_store.load_items(wanted, key_scope="2"))

    mine, theirs = asyncio.run(scenario())
    assert mine == {"msg_a": CARRIED[0], "fc_b": CARRIED[1], "rs_c": None}
    assert theirs == {}


def test_an_expired_turns_items_are_not_found_and_are_purged_with_it() -> None:
    response_id = made()

    async def scenario() -> None:
        save(response_id)
        await asyncio.gather(*(asyncio.all_tasks() - {asyncio.current_task()}))

    asyncio.run(scenario())
    assert StoredResponseItem.objects.count() == 3
    StoredResponse.objects.filter(response_id=response_id).update(
        expires_at=dt.datetime.now(tz=dt.UTC) - dt.timedelta(seconds=1))
    assert asyncio.run(responses_store.load_items(["msg_a"], key_scope="1")) == {}
    assert responses_store.purge_expired() == 1  # stored responses, not their index rows
    assert not StoredResponseItem.objects.exists()


def test_an_id_longer_than_the_index_holds_is_neither_indexed_nor_cut() -> None:
    long_id = "msg_" + "x" * 300

    async def scenario() -> dict[str, Any]:
        save(made(), positions=[(long_id, 0), (long_id[:200], 1)])
        return await responses_store.load_items([long_id, long_id[:200]], key_scope="1")

    found = asyncio.run(scenario())
    assert found == {long_id[:200]: CARRIED[1]}  # the long one is never taken for the id its start spells


def test_an_item_of_a_turn_another_process_is_still_writing_is_waited_for() -> None:
    response_id = made()

    def other_process() -> None:
        time.sleep(0.3)
        try:
            responses_store._save(response_id, "1", "m", None, INPUT, CARRIED, time.time(), None, POSITIONS)
        finally:
            connections.close_all()  # this thread's connection, or the test database cannot be dropped

    writer = threading.Thread(target=other_process)
    writer.start()
    try:
        found = asyncio.run(responses_store.load_items(["fc_b"], key_scope="1", reread={"fc_b": response_id},
                                                       wait_s=30.0))
    finally:
        writer.join()
    assert found == {"fc_b": CARRIED[1]}


def test_an_item_missing_from_a_written_turn_is_not_waited_for() -> None:
    response_id = made()

    async def scenario() -> tuple[dict[str, Any], float]:
        save(response_id)
        await asyncio.gather(*(asyncio.all_tasks() - {asyncio.current_task()}))
        started = time.monotonic()
        found = await responses_store.load_items(["msg_other"], key_scope="1", reread={"msg_other": response_id},
                                                 wait_s=60.0)
        return found, time.monotonic() - started

    found, waited = asyncio.run(scenario())
    assert found == {}
    assert waited < 30.0  # far less than the minute it could have waited: its turn was there without it

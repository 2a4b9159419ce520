"""previous_response_id is checked cheaply: a response id carries a MAC bound to the key it was made for, so an id
the gateway never made (or made for another key, or for a response it did not store) is refused without a
database read; and the check comes after the key's limits and model access, so a key over its limits or without
the model cannot make the gateway read anything. A response stored before ids carried a MAC keeps working for its
own key within its retention.

A transactional test database: the store reads and writes in worker threads.
"""

from __future__ import annotations

import datetime as dt
import secrets
import time
import uuid
from collections.abc import Iterator
from typing import Any

import pytest
from django.conf import settings
from django.db.migrations.recorder import MigrationRecorder

from routing.api.views import error_response
from routing.clients import responses_store
from routing.core.limits import Limits
from routing.core.table import KeySpec, RoutingTable
from routing.gateway.gateway_error import GatewayError
from routing.gateway.responses_endpoint import responses_call
from routing.gateway.stored_responses import issue_response_id
from routing.models import StoredResponse, hash_secret
from routing.simulator import SimulatorServer
from tests import unreachable_database
from tests.clients.statements import statements_on
from tests.gateway import support
from tests.gateway.support import Reply, answer, read, run

pytestmark = pytest.mark.django_db(transaction=True)

simulator, sim, table, fresh_state = support.simulator, support.sim, support.table, support.fresh_state
database_unreachable = unreachable_database.database_unreachable

ALICE = KeySpec(id=201, name="alice", secret_hash=hash_secret("alice-secret"))
BOB = KeySpec(id=202, name="bob", secret_hash=hash_secret("bob-secret"))
STORE = "routing_storedresponse"


async def ask(table: RoutingTable, body: dict[str, Any], *, key: KeySpec | None = None) -> Reply:
    """One Responses request as the view serves it: the call prepared, then the engine."""
    request_id = uuid.uuid4().hex
    try:
        call = await responses_call(body, request_id=request_id, key=key, table=table, headers={},
                                    started=time.monotonic(), started_unix=time.time())
    except GatewayError as exc:
        return await read(error_response("openai", exc, request_id))
    return await answer(call)


def one(table: RoutingTable, body: dict[str, Any], **options: Any) -> Reply:
    return run(ask(table, body, **options))


def refused_as_unknown(reply: Reply) -> None:
    assert reply.status == 400, reply.body
    assert (reply.error["type"], reply.error["param"], reply.error["code"]) == (
        "invalid_request_error", "previous_response_id", "previous_response_not_found")


def legacy_id(created_unix: float) -> str:
    """A response id as the gateway made them before ids carried a MAC: creation time, then random hex."""
    return f"resp_{int(created_unix * 1000):012x}{secrets.token_hex(18)}"


@pytest.fixture
def upgraded_hours_ago(monkeypatch: pytest.MonkeyPatch) -> Iterator[None]:
    """This version's migration recorded as applied three hours ago (and read afresh by the store)."""
    recorded = MigrationRecorder.Migration.objects.filter(app="routing", name="0016_stored_response_turns")
    applied = recorded.get().applied
    recorded.update(applied=applied - dt.timedelta(hours=3))
    monkeypatch.setattr(responses_store, "_legacy_ids_until", None)
    try:
        yield
    finally:
        recorded.update(applied=applied)


def test_it_refuses_a_forged_id_without_reading_the_database(sim: SimulatorServer, table: RoutingTable,
                                                             upgraded_hours_ago: None) -> None:
    fresh_looking = legacy_id(time.time())  # the old form, claiming to be made after the upgrade
    forged = [fresh_looking, "resp_" + "A" * 40, "resp_nope", "msg_" + "0" * 48,
              issue_response_id(key_scope=ALICE.id, stored=True, now_unix=time.time())[:-1] + "x"]
    with statements_on(STORE) as statements:
        for response_id in forged:
            refused_as_unknown(one(table, {"model": "primary", "input": "x", "previous_response_id": response_id},
                                   key=ALICE))
    assert statements.reads == []
    assert sim.received() == []


def test_it_refuses_another_keys_id_and_an_unstored_one_without_reading_the_database(
        sim: SimulatorServer, table: RoutingTable) -> None:
    mine = one(table, {"model": "primary", "input": "secret plans"}, key=ALICE).json()["id"]
    unstored = one(table, {"model": "primary", "input": "private", "store": False}, key=ALICE).json()["id"]
    with statements_on(STORE) as statements:
        refused_as_unknown(one(table, {"model": "primary", "input": "plans?", "previous_response_id": mine},
                               key=BOB))
        refused_as_unknown(one(table, {"model": "primary", "input": "again", "previous_response_id": unstored},
                               key=ALICE))
    assert statements.reads == []
    assert len(sim.received("primary")) == 2


def test_it_checks_limits_and_model_access_before_the_previous_response(
        sim: SimulatorServer, table: RoutingTable, database_unreachable: None) -> None:
    """With the database unreachable, any read of the store would be a 503: the refusals below need none."""
    only_primary = KeySpec(id=203, name="only-primary", secret_hash=hash_secret("p"),
                           allowed_models=frozenset({"primary"}))
    one_a_minute = KeySpec(id=204, name="one-a-minute", secret_hash=hash_secret("o"), limits=Limits(rpm=1))
    for key in (only_primary, one_a_minute):
        previous = issue_response_id(key_scope=key.id, stored=True, now_unix=time.time())
        if key is only_primary:
            reply = one(table, {"model": "secondary", "input": "x", "previous_response_id": previous}, key=key)
            assert (reply.status, reply.error["code"]) == (403, "model_not_allowed")
        else:
            assert one(table, {"model": "primary", "input": "x"}, key=key).status == 200
            reply = one(table, {"model": "primary", "input": "x", "previous_response_id": previous}, key=key)
            assert (reply.status, reply.error["code"]) == (429, "rate_limit_exceeded")
    assert len(sim.received("primary")) == 1


def test_a_valid_id_with_the_database_down_is_a_503(sim: SimulatorServer, table: RoutingTable,
                                                    database_unreachable: None) -> None:
    previous = issue_response_id(key_scope=ALICE.id, stored=True, now_unix=time.time() - 3600)
    reply = one(table, {"model": "primary", "input": "x", "previous_response_id": previous}, key=ALICE)
    assert (reply.status, reply.error["code"], reply.error["param"]) == (
        503, "responses_store_unavailable", "previous_response_id")
    assert reply.headers["Retry-After"] == "5"


def test_an_id_older_than_the_retention_is_refused_without_a_read(sim: SimulatorServer, table: RoutingTable,
                                                                  database_unreachable: None) -> None:
    old = time.time() - settings.GOMODEL_RESPONSES_RETENTION - 60
    for previous in (issue_response_id(key_scope=ALICE.id, stored=True, now_unix=old), legacy_id(old)):
        refused_as_unknown(one(table, {"model": "primary", "input": "x", "previous_response_id": previous},
                               key=ALICE))


def test_an_id_made_before_ids_carried_a_mac_still_continues_for_its_own_key(
        sim: SimulatorServer, table: RoutingTable) -> None:
    now = dt.datetime.now(tz=dt.UTC)
    previous = legacy_id(now.timestamp() - 3600)
    StoredResponse.objects.create(
        response_id=previous, key_scope=str(ALICE.id), model="primary", instructions=None,
        input_items=[{"type": "message", "role": "user", "content": "My name is Ada."}],
        output_items=[{"type": "message", "role": "assistant", "content": [{"type": "output_text", "text": "Hi"}]}],
        created_at=now - dt.timedelta(hours=1), expires_at=now + dt.timedelta(days=1))
    with statements_on(STORE) as statements:
        refused_as_unknown(one(table, {"model": "primary", "input": "name?", "previous_response_id": previous},
                               key=BOB))
    assert len(statements.reads) == 1  # one read, no waiting: the row's key decides
    follow = one(table, {"model": "primary", "input": "name?", "previous_response_id": previous}, key=ALICE)
    assert follow.status == 200, follow.body
    assert [item["content"] if item["role"] == "user" else item["content"][0]["text"]
            for item in sim.received("primary")[0]["body"]["input"]] == ["My name is Ada.", "Hi", "name?"]


def test_a_follow_up_at_once_finds_the_answer_just_stored_with_one_read(
        sim: SimulatorServer, table: RoutingTable) -> None:
    async def scenario() -> tuple[Reply, Reply]:
        first = await ask(table, {"model": "primary", "input": "My name is Ada."}, key=ALICE)
        # The first answer's row is being written in the background: this follow-up waits for that write only.
        return first, await ask(table, {"model": "primary", "input": "name?",
                                        "previous_response_id": first.json()["id"]}, key=ALICE)

    with statements_on(STORE) as statements:
        first, follow = run(scenario())
    assert follow.status == 200, follow.body
    assert len(statements.reads) == 1
    assert first.json()["id"].startswith("resp_")
    assert len(first.json()["id"]) <= 48


def test_each_turn_is_stored_once_and_the_conversation_is_read_back_whole(
        sim: SimulatorServer, table: RoutingTable) -> None:
    async def scenario() -> list[str]:
        ids: list[str] = []
        previous: dict[str, Any] = {}
        for text in ("My name is Ada.", "I live in Oslo.", "Where do I live?"):
            reply = await ask(table, {"model": "claude", "input": text, **previous}, key=ALICE)
            assert reply.status == 200, reply.body
            ids.append(reply.json()["id"])
            previous = {"previous_response_id": ids[-1]}
        return ids

    first, second, third = run(scenario())
    rows = {row.response_id: row for row in StoredResponse.objects.all()}
    assert [len(rows[i].input_items) for i in (first, second, third)] == [1, 1, 1]  # only the turn's own input
    assert [rows[i].previous_response_id for i in (first, second, third)] == [None, first, second]
    sent = sim.received("claude-sim")[2]["body"]["messages"]
    assert [(m["role"], m["content"] if isinstance(m["content"], str) else m["content"][0]["text"])[0]
            for m in sent] == ["user", "assistant", "user", "assistant", "user"]
    assert sent[0]["content"] in ("My name is Ada.", [{"type": "text", "text": "My name is Ada."}])

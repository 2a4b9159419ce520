"""``item_reference`` input items: an output item the gateway stored for this key, sent back by its id, is
replaced by the item itself before routing, so every provider kind receives it (an OpenAI upstream is called with
``store: false`` and could not resolve it). Every output item is addressable, the provider's own ids included, in
JSON answers and streams; an id this key has no stored item of is a 400 naming ``input[i].id``; references are
read only after the key's limits and model access; and an id nobody wrote costs one read, never a wait.

A transactional test database: the store reads and writes in worker threads.
"""

from __future__ import annotations

import asyncio
import dataclasses
import datetime as dt
import json
import time
from typing import Any

import pytest

from routing.clients import responses_store
from routing.core.limits import Limits
from routing.core.table import KeySpec, RoutingTable
from routing.gateway import stored_responses
from routing.gateway.stored_responses import issue_response_id
from routing.models import StoredResponse, StoredResponseItem, hash_secret
from routing.providers.responses_api.ids import item_id, response_id_of_item
from routing.simulator import SimulatorServer
from tests import unreachable_database
from tests.clients.statements import statements_on
from tests.gateway import support
from tests.gateway.support import Reply, run
from tests.gateway.test_responses_previous_id import ALICE, BOB, ask, one

pytestmark = pytest.mark.django_db(transaction=True)

simulator, sim, fresh_state = support.simulator, support.sim, support.fresh_state
database_unreachable = unreachable_database.database_unreachable

ITEMS = "routing_storedresponseitem"
STORE = "routing_storedresponse"  # the turns' table, and the items' too (its name is the start of theirs)
# An OpenAI-kind model (its own Responses API: the simulator's item ids come through) and an Anthropic-kind one
# (translated: the gateway makes the item ids).
KINDS = [("primary", "primary"), ("claude", "claude-sim")]
WEATHER = {"type": "function", "name": "get_weather", "description": "The weather of a city",
           "parameters": {"type": "object", "properties": {"city": {"type": "string"}}, "required": ["city"]}}


@pytest.fixture
def table(simulator: SimulatorServer) -> RoutingTable:
    """The tests' configuration, with Claude able to think (the signed thinking a tool loop must send back)."""
    base = support.routing_table(simulator.base_url)
    claude = dataclasses.replace(base.models["claude"], capabilities=support.CAPS | {"reasoning"})
    return RoutingTable.build(version=base.version, providers=list(base.providers.values()),
                              models=[claude if name == "claude" else model for name, model in base.models.items()],
                              virtual_models=list(base.virtual_models.values()), keys=[support.LIMITED_KEY])


def ref(item: dict[str, Any] | str) -> dict[str, Any]:
    return {"type": "item_reference", "id": item if isinstance(item, str) else item["id"]}


def of_type(reply: Reply, kind: str) -> list[dict[str, Any]]:
    assert reply.status == 200, reply.body
    return [item for item in reply.json()["output"] if item["type"] == kind]


def output_of(reply: Reply) -> list[dict[str, Any]]:
    """The output items of a JSON answer, or of a stream's ``response.completed``."""
    assert reply.status == 200, reply.body
    if reply.headers.get("Content-Type", "").startswith("text/event-stream"):
        [completed] = [json.loads(event) for event in reply.events
                       if json.loads(event).get("type") == "response.completed"]
        return list(completed["response"]["output"])
    return list(reply.json()["output"])


def sent_upstream(sim: SimulatorServer, upstream: str) -> dict[str, Any]:
    body: dict[str, Any] = sim.received(upstream)[-1]["body"]
    return body


def refused_as_unknown(reply: Reply, param: str) -> None:
    assert reply.status == 400, reply.body
    assert (reply.error["type"], reply.error["param"], reply.error["code"]) == (
        "invalid_request_error", param, "item_not_found")


def stored_items_of(response_id: str) -> list[str]:
    return list(StoredResponseItem.objects.filter(response__response_id=response_id).values_list("item_id", flat=True))


@pytest.mark.parametrize(("model", "upstream"), KINDS)
def test_a_referenced_message_reaches_each_provider_kind_as_the_message_itself(
        sim: SimulatorServer, table: RoutingTable, model: str, upstream: str) -> None:
    async def scenario() -> tuple[Reply, Reply]:
        first = await ask(table, {"model": model, "input": "My name is Ada."}, key=ALICE)
        [message] = of_type(first, "message")
        follow = await ask(table, {"model": model, "input": [
            {"role": "user", "content": "My name is Ada."}, ref(message),
            {"role": "user", "content": "What is my name?"}]}, key=ALICE)
        return first, follow

    first, follow = run(scenario())
    assert follow.status == 200, follow.body
    said = of_type(first, "message")[0]["content"][0]["text"]
    body = sent_upstream(sim, upstream)
    assert "item_reference" not in json.dumps(body)
    if upstream == "primary":  # its own Responses API: the message item, as the gateway stored it
        assert body["input"][1] == {"type": "message", "role": "assistant",
                                    "content": [{"type": "output_text", "text": said}]}
        assert body["store"] is False
    else:
        assert [m["role"] for m in body["messages"]] == ["user", "assistant", "user"]
        assert said in json.dumps(body["messages"][1])


def test_every_output_item_is_indexed_with_the_ids_the_client_was_given(
        sim: SimulatorServer, table: RoutingTable) -> None:
    async def scenario() -> list[Reply]:
        return [await ask(table, {"model": model, "input": "Weather in Oslo?", "tools": [WEATHER],
                                  "tool_choice": "required"}, key=ALICE) for model in ("primary", "claude")]

    native, translated = run(scenario())
    for reply in (native, translated):
        assert sorted(stored_items_of(reply.json()["id"])) == sorted(item["id"] for item in reply.json()["output"])
    # The provider's own id came through from an OpenAI-kind upstream; the gateway's carry their response's id.
    assert response_id_of_item(native.json()["output"][0]["id"]) is None
    assert {response_id_of_item(item["id"]) for item in translated.json()["output"]} == {translated.json()["id"]}


@pytest.mark.parametrize(("model", "upstream"), KINDS)
def test_a_tool_loop_sends_its_function_call_by_reference(
        sim: SimulatorServer, table: RoutingTable, model: str, upstream: str) -> None:
    async def scenario() -> tuple[Reply, Reply]:
        first = await ask(table, {"model": model, "input": "Weather in Oslo?", "tools": [WEATHER],
                                  "tool_choice": "required"}, key=ALICE)
        [call] = of_type(first, "function_call")
        follow = await ask(table, {"model": model, "tools": [WEATHER], "input": [
            {"role": "user", "content": "Weather in Oslo?"}, ref(call),
            {"type": "function_call_output", "call_id": call["call_id"], "output": "4 C and light snow"}]}, key=ALICE)
        return first, follow

    first, follow = run(scenario())
    assert follow.status == 200, follow.body
    assert of_type(follow, "message")
    [call] = of_type(first, "function_call")
    body = sent_upstream(sim, upstream)
    if upstream == "primary":
        assert body["input"][1] == {"type": "function_call", "call_id": call["call_id"], "name": "get_weather",
                                    "arguments": call["arguments"]}
    else:  # the simulator refuses a tool_result that answers no tool_use, as Anthropic does
        tool_use = body["messages"][1]["content"][-1]
        assert (tool_use["type"], tool_use["name"]) == ("tool_use", "get_weather")
        assert body["messages"][2]["content"][0]["tool_use_id"] == tool_use["id"]


@pytest.mark.parametrize("streamed", [False, True], ids=["json", "stream"])
def test_claudes_signed_thinking_comes_back_by_reference_and_keeps_thinking_on(
        sim: SimulatorServer, table: RoutingTable, streamed: bool) -> None:
    thinking = {"model": "claude", "tools": [WEATHER], "reasoning": {"effort": "low"}}

    async def scenario() -> tuple[list[dict[str, Any]], Reply]:
        first = await ask(table, {**thinking, "input": "Weather in Lima?", "stream": streamed}, key=ALICE)
        output = output_of(first)
        [reasoning] = [item for item in output if item["type"] == "reasoning"]
        [call] = [item for item in output if item["type"] == "function_call"]
        follow = await ask(table, {**thinking, "input": [
            {"role": "user", "content": "Weather in Lima?"}, ref(reasoning), ref(call),
            {"type": "function_call_output", "call_id": call["call_id"], "output": "21 C"}]}, key=ALICE)
        return output, follow

    output, follow = run(scenario())
    assert next(item for item in output if item["type"] == "reasoning")["encrypted_content"]
    assert follow.status == 200, follow.body
    assert "X-GoModel-Thinking" not in follow.headers  # the signed block opened the tool turn again
    assistant = sent_upstream(sim, "claude-sim")["messages"][1]["content"]
    assert [block["type"] for block in assistant] == ["thinking", "tool_use"]


def test_a_reasoning_item_that_carries_nothing_is_resolved_and_left_out(
        sim: SimulatorServer, table: RoutingTable) -> None:
    async def scenario() -> tuple[Reply, Reply]:
        first = await ask(table, {"model": "claude", "input": "Think about Lima.", "reasoning": {"effort": "low"}},
                          key=ALICE)
        [reasoning] = of_type(first, "reasoning")  # its text only: no signed block without a tool call
        [message] = of_type(first, "message")
        follow = await ask(table, {"model": "claude", "input": [
            {"role": "user", "content": "Think about Lima."}, ref(reasoning), ref(message),
            {"role": "user", "content": "And Quito?"}]}, key=ALICE)
        return first, follow

    first, follow = run(scenario())
    assert "encrypted_content" not in of_type(first, "reasoning")[0]
    assert follow.status == 200, follow.body
    assert [m["role"] for m in sent_upstream(sim, "claude-sim")["messages"]] == ["user", "assistant", "user"]


@pytest.mark.parametrize(("model", "upstream"), KINDS)
def test_a_streamed_answers_items_are_addressable(
        sim: SimulatorServer, table: RoutingTable, model: str, upstream: str) -> None:
    async def scenario() -> tuple[list[dict[str, Any]], Reply]:
        streamed = await ask(table, {"model": model, "input": "Weather in Oslo?", "tools": [WEATHER],
                                     "tool_choice": "required", "stream": True}, key=ALICE)
        done = [json.loads(event)["item"] for event in streamed.events
                if json.loads(event).get("type") == "response.output_item.done"]
        [call] = [item for item in done if item["type"] == "function_call"]
        follow = await ask(table, {"model": model, "tools": [WEATHER], "input": [
            {"role": "user", "content": "Weather in Oslo?"}, ref(call),
            {"type": "function_call_output", "call_id": call["call_id"], "output": "4 C"}]}, key=ALICE)
        return done, follow

    done, follow = run(scenario())
    assert done
    assert follow.status == 200, follow.body
    assert "item_reference" not in json.dumps(sent_upstream(sim, upstream))


def test_a_turn_with_references_is_stored_with_the_items_themselves(sim: SimulatorServer,
                                                                    table: RoutingTable) -> None:
    async def scenario() -> tuple[Reply, Reply]:
        first = await ask(table, {"model": "claude", "input": "My name is Ada."}, key=ALICE)
        second = await ask(table, {"model": "claude", "input": [
            {"role": "user", "content": "My name is Ada."}, ref(of_type(first, "message")[0]),
            {"role": "user", "content": "I live in Oslo."}]}, key=ALICE)
        # Continued by id: the stored turn is read back without anything more of the index.
        third = await ask(table, {"model": "primary", "input": "Where do I live?",
                                  "previous_response_id": second.json()["id"]}, key=ALICE)
        return first, third

    first, third = run(scenario())
    assert third.status == 200, third.body
    row = StoredResponse.objects.get(response_id=third.json()["previous_response_id"])
    assert "item_reference" not in json.dumps(row.input_items)
    said = of_type(first, "message")[0]["content"][0]["text"]
    assert [item.get("role") for item in sent_upstream(sim, "primary")["input"]] == [
        "user", "assistant", "user", "assistant", "user"]
    assert said in json.dumps(sent_upstream(sim, "primary")["input"][1])


def test_an_id_this_key_has_no_stored_item_of_is_a_400_naming_it(sim: SimulatorServer,
                                                                  table: RoutingTable) -> None:
    async def turns() -> tuple[Reply, Reply, Reply]:
        return (await ask(table, {"model": "claude", "input": "secret plans"}, key=ALICE),
                await ask(table, {"model": "claude", "input": "private", "store": False}, key=ALICE),
                await ask(table, {"model": "primary", "input": "long ago"}, key=ALICE))

    mine, unstored, old = run(turns())  # their rows are written once run returns
    StoredResponse.objects.filter(response_id=old.json()["id"]).update(
        expires_at=dt.datetime.now(tz=dt.UTC) - dt.timedelta(seconds=1))
    hello = {"role": "user", "content": "hello"}
    sim.reset()

    async def follow_ups() -> dict[str, Reply]:
        return {
            "another key's": await ask(table, {"model": "claude", "input": [
                hello, ref(of_type(mine, "message")[0])]}, key=BOB),
            "not stored": await ask(table, {"model": "claude", "input": [
                hello, ref(of_type(unstored, "message")[0])]}, key=ALICE),
            "expired": await ask(table, {"model": "claude", "input": [
                hello, ref(of_type(old, "message")[0])]}, key=ALICE),
            "unknown": await ask(table, {"model": "claude", "input": [
                hello, ref(of_type(mine, "message")[0]), ref("msg_made_up")]}, key=ALICE),
        }

    replies = run(follow_ups())
    for case in ("another key's", "not stored", "expired"):
        refused_as_unknown(replies[case], "input[1].id")
    refused_as_unknown(replies["unknown"], "input[2].id")
    assert "msg_made_up" in replies["unknown"].error["message"]
    assert sim.received() == []
    # Its own key still resolves it: the refusals above were not for want of a stored item.
    follow = one(table, {"model": "claude", "input": [hello, ref(of_type(mine, "message")[0])]}, key=ALICE)
    assert follow.status == 200, follow.body


def test_references_are_read_only_after_the_keys_limits_and_model_access(
        sim: SimulatorServer, table: RoutingTable, database_unreachable: None) -> None:
    """With the database unreachable, any read of the store would be a 503: the refusals below need none."""
    only_primary = KeySpec(id=213, name="only-primary", secret_hash=hash_secret("p"),
                           allowed_models=frozenset({"primary"}))
    one_a_minute = KeySpec(id=214, name="one-a-minute", secret_hash=hash_secret("o"), limits=Limits(rpm=1))
    references = [{"role": "user", "content": "x"}, ref("msg_anything")]
    refused = one(table, {"model": "secondary", "input": references}, key=only_primary)
    assert (refused.status, refused.error["code"]) == (403, "model_not_allowed")
    assert one(table, {"model": "primary", "input": "x", "store": False}, key=one_a_minute).status == 200
    limited = one(table, {"model": "primary", "input": references}, key=one_a_minute)
    assert (limited.status, limited.error["code"]) == (429, "rate_limit_exceeded")
    # Within its limits and access, the reference needs the database: a 503 that says which field needs it.
    down = one(table, {"model": "primary", "input": references}, key=ALICE)
    assert (down.status, down.error["code"], down.error["param"]) == (503, "responses_store_unavailable", "input")
    assert down.headers["Retry-After"] == "5"
    assert len(sim.received("primary")) == 1


def test_an_id_nobody_wrote_costs_one_read_and_no_wait(sim: SimulatorServer, table: RoutingTable) -> None:
    """Only an id the gateway made for this key, in a response to be stored, moments ago, is looked for again
    (its turn may be on its way from another process); anything else is answered after a single read."""
    now = time.time()
    mine_fresh = item_id("msg", issue_response_id(key_scope=ALICE.id, stored=True, now_unix=now))
    hopeless = {
        "made up": "msg_made_up",
        "provider-shaped": "msg_" + "0" * 48,
        "another key's": item_id("msg", issue_response_id(key_scope=BOB.id, stored=True, now_unix=now)),
        "not to be stored": item_id("fc", issue_response_id(key_scope=ALICE.id, stored=False, now_unix=now)),
        "made long ago": item_id("rs", issue_response_id(key_scope=ALICE.id, stored=True, now_unix=now - 3600)),
        "forged": mine_fresh[:30] + ("A" if mine_fresh[30] != "A" else "B") + mine_fresh[31:],  # within its MAC
    }
    for what, item in hopeless.items():
        with statements_on(ITEMS) as statements:
            refused_as_unknown(one(table, {"model": "primary", "input": [ref(item)]}, key=ALICE), "input[0].id")
        assert len(statements.reads) == 1, what
    with statements_on(ITEMS) as statements:
        refused_as_unknown(one(table, {"model": "primary", "input": [ref(mine_fresh)]}, key=ALICE), "input[0].id")
    assert len(statements.reads) > 2  # looked for again and again: its turn is nowhere
    assert sim.received() == []


def test_an_id_made_up_for_a_turn_already_written_is_not_waited_for(sim: SimulatorServer,
                                                                      table: RoutingTable) -> None:
    """A genuine response id with a suffix of the caller's own: its turn is written, and its items with it, so
    the id is refused once the turn's row is seen, however many times it is sent."""
    [message] = of_type(one(table, {"model": "claude", "input": "hi"}, key=ALICE), "message")  # written by now
    made_up = message["id"][:-6] + ("000000" if not message["id"].endswith("000000") else "111111")
    assert response_id_of_item(made_up) == response_id_of_item(message["id"])
    with statements_on(STORE) as statements:
        refused_as_unknown(one(table, {"model": "claude", "input": [ref(made_up)]}, key=ALICE), "input[0].id")
    # The items; then the turn's row and the items once more (read in that order, so a turn written in between
    # is found with its items): no pause, no further read.
    assert len(statements.reads) == 3


def test_a_reference_sent_at_once_waits_for_this_processs_write_of_its_turn(
        sim: SimulatorServer, table: RoutingTable) -> None:
    """A provider's own id says nothing of its turn: this process's writes of the key's turns are waited for."""
    async def scenario() -> Reply:
        first = await ask(table, {"model": "primary", "input": "My name is Ada."}, key=ALICE)
        [message] = of_type(first, "message")
        assert response_id_of_item(message["id"]) is None  # the simulator's own id
        return await ask(table, {"model": "primary", "input": [ref(message), {"role": "user", "content": "Name?"}]},
                         key=ALICE)

    with statements_on(ITEMS) as statements:
        follow = run(scenario())
    assert follow.status == 200, follow.body
    assert len(statements.reads) == 1


def test_references_that_resolve_to_nothing_leave_nothing_to_answer(sim: SimulatorServer,
                                                                     table: RoutingTable) -> None:
    async def scenario() -> tuple[Reply, Reply, Reply]:
        first = await ask(table, {"model": "claude", "input": "Think about Lima.", "reasoning": {"effort": "low"}},
                          key=ALICE)
        [reasoning] = of_type(first, "reasoning")  # carries nothing into a next turn
        [message] = of_type(first, "message")
        nothing = await ask(table, {"model": "claude", "input": [ref(reasoning)]}, key=ALICE)
        twice = await ask(table, {"model": "primary", "input": [
            ref(message), ref(message), {"role": "user", "content": "And Quito?"}]}, key=ALICE)
        return first, nothing, twice

    first, nothing, twice = run(scenario())
    assert (nothing.status, nothing.error["param"], nothing.error["code"]) == (400, "input", "invalid_request")
    assert twice.status == 200, twice.body  # the same item named twice is read once and sent as often as named
    said = of_type(first, "message")[0]["content"][0]["text"]
    assert [item.get("role") for item in sent_upstream(sim, "primary")["input"]] == ["assistant", "assistant", "user"]
    assert json.dumps(sent_upstream(sim, "primary")["input"]).count(json.dumps(said)) == 2


def test_one_request_of_a_key_at_a_time_looks_again_in_a_process(sim: SimulatorServer, table: RoutingTable,
                                                                  monkeypatch: pytest.MonkeyPatch) -> None:
    """Ids of a fresh response that is never written (a stream the client cut, say) are looked for by one request
    of the key at a time: the others are answered after their read, and other keys are not held up."""
    monkeypatch.setattr(stored_responses, "WAIT_S", 60.0)  # the first request is still looking when the rest come

    def fresh(key: KeySpec) -> dict[str, Any]:
        return ref(item_id("msg", issue_response_id(key_scope=key.id, stored=True, now_unix=time.time())))

    async def scenario() -> tuple[Reply, bool]:
        looking = asyncio.create_task(ask(table, {"model": "primary", "input": [fresh(ALICE)]}, key=ALICE))
        await support.eventually(lambda: str(ALICE.id) in responses_store._rereading, what="the first looking again")
        second = await ask(table, {"model": "primary", "input": [fresh(ALICE)]}, key=ALICE)
        still_looking = not looking.done()
        bobs = asyncio.create_task(ask(table, {"model": "primary", "input": [fresh(BOB)]}, key=BOB))
        await support.eventually(lambda: str(BOB.id) in responses_store._rereading, what="another key looking")
        for task in (looking, bobs):
            task.cancel()
        await asyncio.gather(looking, bobs, return_exceptions=True)
        return second, still_looking

    second, still_looking = run(scenario())
    refused_as_unknown(second, "input[0].id")
    assert still_looking  # answered while the first request of its key was looking again
    assert responses_store._rereading == set()  # a cancelled request stops looking

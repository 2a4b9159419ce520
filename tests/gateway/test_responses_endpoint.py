"""POST /v1/responses through the engine, with the simulator upstream and stored responses in PostgreSQL: an
OpenAI-kind provider on its own Responses API, an Anthropic one through chat, streams, tier aliases, virtual
models with fallbacks, contracts and validation, limits, the audit event, and previous_response_id (continued,
scoped to its key, expired, unknown, not stored).

A transactional test database: the store writes from worker threads.
"""

from __future__ import annotations

import datetime as dt
import json
import time
import uuid
from collections.abc import Mapping
from typing import Any

import pytest

from routing.api.views import error_response
from routing.core.limits import Limits
from routing.core.table import KeySpec, ModelSpec, ProviderSpec, RoutingTable
from routing.gateway.gateway_error import GatewayError
from routing.gateway.responses_endpoint import responses_call
from routing.gateway.stored_responses import issue_response_id
from routing.models import StoredResponse, hash_secret
from routing.simulator import SimulatorServer
from tests import unreachable_database
from tests.gateway import support
from tests.gateway.support import Reply, answer, attempts_of, read, run

pytestmark = pytest.mark.django_db(transaction=True)

simulator, sim, table, fresh_state = support.simulator, support.sim, support.table, support.fresh_state
database_unreachable = unreachable_database.database_unreachable

ALICE = KeySpec(id=101, name="alice", secret_hash=hash_secret("alice-secret"))
BOB = KeySpec(id=102, name="bob", secret_hash=hash_secret("bob-secret"))
SCHEMA = support.SCHEMA
WEATHER = {"type": "function", "name": "get_weather", "description": "The weather of a city",
           "parameters": {"type": "object", "properties": {"city": {"type": "string"}}, "required": ["city"]}}


async def ask(table: RoutingTable, body: dict[str, Any], *, key: KeySpec | None = None,
              headers: Mapping[str, str] | None = None) -> Reply:
    """One Responses request as the view serves it: prepared (the stored conversation read), then the engine."""
    request_id = uuid.uuid4().hex
    try:
        call = await responses_call(body, request_id=request_id, key=key, table=table,
                                    headers={k.lower(): v for k, v in (headers or {}).items()},
                                    started=time.monotonic(), started_unix=time.time())
    except GatewayError as exc:
        return await read(error_response("openai", exc, request_id))
    return await answer(call)


def one(table: RoutingTable, body: dict[str, Any], **options: Any) -> Reply:
    return run(ask(table, body, **options))


def events_of(reply: Reply) -> list[dict[str, Any]]:
    return [json.loads(data) for data in reply.events]


def test_an_openai_provider_is_called_on_its_responses_api(
        sim: SimulatorServer, table: RoutingTable, audit_events: list[dict[str, Any]]) -> None:
    reply = one(table, {"model": "primary", "input": "Hello there", "instructions": "Be brief."})
    assert reply.status == 200
    body = reply.json()
    assert (body["object"], body["status"], body["model"]) == ("response", "completed", "primary")
    assert body["id"].startswith("resp_")
    assert body["store"] is True
    assert "Hello there" in body["output"][0]["content"][0]["text"]
    assert (reply.headers["X-GoModel-Target"], reply.headers["X-GoModel-Attempts"]) == ("primary", "1")
    assert reply.headers["X-Request-Id"]
    [received] = sim.received("primary")
    assert received["path"] == "/v1/responses"
    assert received["body"]["store"] is False
    assert received["body"]["instructions"] == "Be brief."
    [event] = audit_events
    assert (event["endpoint"], event["target"], event["status"]) == ("responses", "primary", 200)
    assert event["usage"]["input_tokens"] == body["usage"]["input_tokens"] > 0
    assert event["cost_usd"] == pytest.approx(float(reply.headers["X-GoModel-Cost-Usd"]), abs=1e-8)


def test_an_anthropic_provider_is_called_on_messages_and_answered_as_a_response(
        sim: SimulatorServer, table: RoutingTable, audit_events: list[dict[str, Any]]) -> None:
    reply = one(table, {"model": "claude", "input": "Hello there", "max_output_tokens": 200})
    assert reply.status == 200
    body = reply.json()
    assert (body["object"], body["model"], body["max_output_tokens"]) == ("response", "claude", 200)
    assert "Hello there" in body["output"][0]["content"][0]["text"]
    [received] = sim.received("claude-sim")
    assert received["path"] == "/v1/messages"
    assert received["body"]["max_tokens"] == 200
    assert audit_events[0]["endpoint"] == "responses"


@pytest.mark.parametrize(("model", "upstream"), [("primary", "primary"), ("claude", "claude-sim")])
def test_a_stream_is_the_responses_event_sequence(sim: SimulatorServer, table: RoutingTable, model: str,
                                                  upstream: str, audit_events: list[dict[str, Any]]) -> None:
    reply = one(table, {"model": model, "input": "Tell me a story", "stream": True})
    assert reply.status == 200
    assert reply.headers["Content-Type"] == "text/event-stream"
    events = events_of(reply)
    kinds = [e["type"] for e in events]
    assert kinds[:3] == ["response.created", "response.in_progress", "response.output_item.added"]
    assert kinds[-1] == "response.completed"
    assert [e["sequence_number"] for e in events] == list(range(len(events)))
    text = "".join(e["delta"] for e in events if e["type"] == "response.output_text.delta")
    final = events[-1]["response"]
    assert final["model"] == model
    assert final["output"][0]["content"][0]["text"] == text
    assert {e["response"]["id"] for e in events if "response" in e} == {final["id"]}
    assert sim.received(upstream)[0]["stream"] is True
    assert (audit_events[0]["endpoint"], audit_events[0]["stream"]) == ("responses", True)
    assert audit_events[0]["output_text"] == text
    assert support.counted("gomodel_requests_total", endpoint="responses", model=model, status="200") >= 1
    assert support.counted("gomodel_time_to_first_token_seconds_count", endpoint="responses") >= 1


@pytest.mark.parametrize(("model", "upstream", "fault"), [
    ("primary", "primary", "stream_cut"), ("claude", "claude-sim", "stream_cut"),
    ("slow-stream", "slow-stream", "stream_error"),  # the provider's own error event, after a pause
])
def test_a_stream_that_fails_midway_ends_with_error_and_response_failed(
        sim: SimulatorServer, table: RoutingTable, model: str, upstream: str, fault: str,
        audit_events: list[dict[str, Any]]) -> None:
    sim.set_fault(upstream, {"kind": fault, "after_chunks": 2})
    reply = one(table, {"model": model, "input": "Tell me a story", "stream": True})
    assert reply.status == 200  # the answer had started: the failure can only be told in the stream
    events = events_of(reply)
    assert [e["type"] for e in events[-2:]] == ["error", "response.failed"]
    assert events[-1]["response"]["status"] == "failed"
    assert events[-1]["response"]["id"] == events[0]["response"]["id"]
    numbers = [e["sequence_number"] for e in events]
    assert numbers == sorted(set(numbers))
    assert "response.completed" not in [e["type"] for e in events]
    assert audit_events[0]["error_class"] is not None


def test_a_tier_alias_classifies_the_translated_request(
        sim: SimulatorServer, table: RoutingTable, audit_events: list[dict[str, Any]]) -> None:
    reply = one(table, {"model": "normal", "input": "hi"})
    assert reply.status == 200
    assert reply.headers["X-GoModel-Pro-Tier"] == "easy"
    assert reply.headers["X-GoModel-Pro-Tier-Target"] == "primary"
    assert reply.json()["model"] == "primary"
    hard = one(table, {"model": "normal", "input": "hi", "reasoning": {"effort": "high"}})
    assert hard.headers["X-GoModel-Pro-Tier"] == "hard"
    assert audit_events[-1]["tier"]["tier"] == "hard"


def test_the_chat_equivalent_is_scanned_for_capabilities_once_for_the_tier_and_the_attempt(
        sim: SimulatorServer, table: RoutingTable, monkeypatch: pytest.MonkeyPatch) -> None:
    from routing.gateway import records
    from routing.providers import base
    from routing.providers.capabilities import required_capabilities
    from routing.providers.responses_api import calls

    scanned: list[str] = []

    def counting(inbound: Any, body: Any) -> dict[str, str]:
        scanned.append(inbound)
        return required_capabilities(inbound, body)

    for module in (records, calls, base):
        monkeypatch.setattr(module, "required_capabilities", counting)
    reply = one(table, {"model": "normal", "input": "hi"})  # a tier alias to an OpenAI-kind model's Responses API
    assert (reply.status, reply.headers["X-GoModel-Pro-Tier-Target"]) == (200, "primary")
    assert scanned == ["openai"]


def test_a_virtual_model_falls_back_when_its_first_target_fails(
        sim: SimulatorServer, table: RoutingTable, audit_events: list[dict[str, Any]]) -> None:
    sim.set_fault("primary", {"kind": "status", "status": 503})
    reply = one(table, {"model": "pair", "input": "hi"})
    assert reply.status == 200
    assert (reply.headers["X-GoModel-Target"], reply.headers["X-GoModel-Attempts"]) == ("secondary", "2")
    assert reply.json()["model"] == "secondary"
    assert [a[0] for a in attempts_of(audit_events[0])] == ["primary", "secondary"]


def test_a_contract_validates_the_answer_against_its_schema(
        sim: SimulatorServer, table: RoutingTable, audit_events: list[dict[str, Any]]) -> None:
    fmt = {"type": "json_schema", "name": "person", "schema": SCHEMA}
    sim.set_fault("primary", {"kind": "schema_violation"})
    reply = one(table, {"model": "pair", "input": "Ada Lovelace", "text": {"format": fmt}},
                headers={"X-GoModel-Workload": "extract"})
    assert reply.status == 200
    assert "name" in json.loads(reply.json()["output"][0]["content"][0]["text"])
    assert [(a[0], a[3]) for a in attempts_of(audit_events[0])] == [
        ("primary", "rejected:schema"), ("secondary", "accepted")]
    assert audit_events[0]["workload"] == "extract"


def test_a_limited_key_is_refused_with_a_429(sim: SimulatorServer, table: RoutingTable) -> None:
    limited = KeySpec(id=103, name="one-a-minute", secret_hash=hash_secret("x"), limits=Limits(rpm=1))

    async def scenario() -> list[Reply]:
        return [await ask(table, {"model": "primary", "input": "hi"}, key=limited) for _ in range(2)]

    first, second = run(scenario())
    assert (first.status, second.status) == (200, 429)
    assert second.error["code"] == "rate_limit_exceeded"
    assert first.headers["x-ratelimit-limit-requests"] == "1"


def test_a_model_serving_only_embeddings_is_a_400_naming_model_and_endpoint(simulator: SimulatorServer) -> None:
    only_embeddings = RoutingTable.build(
        version=1, providers=[ProviderSpec("sim", "openai", f"{simulator.base_url}/v1")],
        models=[ModelSpec(name="embedder", provider="sim", upstream="e", endpoints=frozenset({"embeddings"}),
                          dimensions=8, family="f")])
    reply = one(only_embeddings, {"model": "embedder", "input": "hi"})
    assert (reply.status, reply.error["param"], reply.error["code"]) == (400, "model", "unsupported_endpoint")
    assert "`embedder`" in reply.error["message"]
    assert "responses endpoint" in reply.error["message"]


def test_an_image_to_a_text_only_model_is_a_400_before_anything_is_sent(
        sim: SimulatorServer, table: RoutingTable) -> None:
    reply = one(table, {"model": "text-only", "input": [{"role": "user", "content": [
        {"type": "input_image", "image_url": "https://example.com/cat.png"}]}]})
    assert (reply.status, reply.error["code"]) == (400, "unsupported_capability")
    assert "image" in reply.error["message"]
    assert sim.received() == []


def test_an_idempotent_repeat_gets_the_same_response_without_a_second_generation(
        sim: SimulatorServer, table: RoutingTable) -> None:
    headers = {"Idempotency-Key": uuid.uuid4().hex}
    body = {"model": "claude", "input": "only once"}

    async def scenario() -> tuple[Reply, Reply, Reply]:
        return (await ask(table, body, headers=headers), await ask(table, body, headers=headers),
                await ask(table, {**body, "input": "something else"}, headers=headers))

    first, repeat, other = run(scenario())
    assert repeat.json() == first.json()
    assert repeat.headers["X-GoModel-Idempotent-Replay"] == "true"
    assert (other.status, other.error["code"]) == (422, "idempotency_key_reused")
    assert len(sim.received("claude-sim")) == 1


# -- previous_response_id --------------------------------------------------------------------------------------


@pytest.mark.parametrize(("model", "upstream"), [("primary", "primary"), ("claude", "claude-sim")])
def test_a_follow_up_continues_the_stored_conversation(sim: SimulatorServer, table: RoutingTable, model: str,
                                                       upstream: str) -> None:
    async def scenario() -> tuple[Reply, Reply]:
        first = await ask(table, {"model": model, "input": "My name is Ada.", "instructions": "Be kind."}, key=ALICE)
        follow = await ask(table, {"model": model, "input": "What is my name?",
                                   "previous_response_id": first.json()["id"]}, key=ALICE)
        return first, follow

    first, follow = run(scenario())
    assert follow.status == 200, follow.body
    assert follow.json()["previous_response_id"] == first.json()["id"]
    assert follow.json()["id"] != first.json()["id"]
    first_text = first.json()["output"][0]["content"][0]["text"]
    sent = sim.received(upstream)[1]["body"]
    if model == "primary":  # OpenAI: the whole conversation as input; the gateway's id is never sent upstream
        assert "previous_response_id" not in sent
        assert sent["input"] == [
            {"type": "message", "role": "user", "content": "My name is Ada."},
            {"type": "message", "role": "assistant", "content": [{"type": "output_text", "text": first_text}]},
            {"type": "message", "role": "user", "content": "What is my name?"}]
        assert "instructions" not in sent  # as at OpenAI: instructions are not carried over
    else:
        assert [(m["role"], _text(m["content"])) for m in sent["messages"]] == [
            ("user", "My name is Ada."), ("assistant", first_text), ("user", "What is my name?")]
    row = StoredResponse.objects.get(response_id=first.json()["id"])
    assert (row.key_scope, row.model, row.instructions) == ("101", model, "Be kind.")


def _text(content: Any) -> str:
    return content if isinstance(content, str) else "".join(block.get("text", "") for block in content)


def test_a_function_call_is_continued_with_its_output(sim: SimulatorServer, table: RoutingTable) -> None:
    async def scenario() -> tuple[Reply, Reply]:
        first = await ask(table, {"model": "claude", "input": "Weather in Oslo?", "tools": [WEATHER],
                                  "tool_choice": "required"})
        [call] = [item for item in first.json()["output"] if item["type"] == "function_call"]
        follow = await ask(table, {"model": "claude", "tools": [WEATHER], "previous_response_id": first.json()["id"],
                                   "input": [{"type": "function_call_output", "call_id": call["call_id"],
                                              "output": "4 C and snow"}]})
        return first, follow

    first, follow = run(scenario())
    assert follow.status == 200, follow.body
    [call] = [item for item in first.json()["output"] if item["type"] == "function_call"]
    assert call["name"] == "get_weather"
    sent = sim.received("claude-sim")[1]["body"]["messages"]
    assert sent[1]["content"][-1]["type"] == "tool_use"
    assert sent[1]["content"][-1]["id"] == call["call_id"]
    assert sent[2]["content"][0] == {"type": "tool_result", "tool_use_id": call["call_id"], "content": "4 C and snow"}


def test_a_streamed_answer_is_stored_too(sim: SimulatorServer, table: RoutingTable) -> None:
    async def scenario() -> Reply:
        first = await ask(table, {"model": "primary", "input": "remember this", "stream": True}, key=ALICE)
        response_id = events_of(first)[-1]["response"]["id"]
        return await ask(table, {"model": "primary", "input": "and now?", "previous_response_id": response_id},
                         key=ALICE)

    assert run(scenario()).status == 200
    assert len(sim.received("primary")[1]["body"]["input"]) == 3


def _refused(reply: Reply) -> None:
    assert reply.status == 400
    assert (reply.error["type"], reply.error["param"]) == ("invalid_request_error", "previous_response_id")


def test_another_key_cannot_continue_someone_elses_response(sim: SimulatorServer, table: RoutingTable) -> None:
    async def scenario() -> tuple[Reply, Reply]:
        first = await ask(table, {"model": "primary", "input": "secret plans"}, key=ALICE)
        other = await ask(table, {"model": "primary", "input": "what were the plans?",
                                  "previous_response_id": first.json()["id"]}, key=BOB)
        unknown = await ask(table, {"model": "primary", "input": "x", "previous_response_id": "resp_nope"}, key=BOB)
        return other, unknown

    other, unknown = run(scenario())
    _refused(other)
    _refused(unknown)
    assert other.error["message"].replace(other.error["message"].split("'")[1], "") == \
        unknown.error["message"].replace("resp_nope", "")  # the same answer as for an id that does not exist
    assert len(sim.received("primary")) == 1


def test_an_expired_or_unstored_response_cannot_be_continued(sim: SimulatorServer, table: RoutingTable) -> None:
    async def first(body: dict[str, Any]) -> str:
        return str((await ask(table, body, key=ALICE)).json()["id"])

    kept = run(first({"model": "primary", "input": "old"}))
    unstored = run(first({"model": "primary", "input": "private", "store": False}))
    StoredResponse.objects.filter(response_id=kept).update(expires_at=dt.datetime.now(tz=dt.UTC) - dt.timedelta(1))
    assert not StoredResponse.objects.filter(response_id=unstored).exists()
    for response_id in (kept, unstored):
        _refused(one(table, {"model": "primary", "input": "again", "previous_response_id": response_id}, key=ALICE))


def test_a_follow_up_while_the_database_is_down_is_a_503(sim: SimulatorServer, table: RoutingTable,
                                                         database_unreachable: None) -> None:
    previous = issue_response_id(key_scope=ALICE.id, stored=True, now_unix=time.time() - 60)
    reply = one(table, {"model": "primary", "input": "x", "previous_response_id": previous}, key=ALICE)
    assert (reply.status, reply.error["code"], reply.error["param"]) == (
        503, "responses_store_unavailable", "previous_response_id")
    assert reply.headers["Retry-After"] == "5"
    assert sim.received() == []
    # A request that continues nothing does not need the database (its answer's write is dropped and logged).
    assert one(table, {"model": "primary", "input": "x"}, key=ALICE).status == 200

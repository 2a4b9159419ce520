"""Per-key and per-team limits in the engine, in process (limits counted in this process, no REDIS_URL):
the 429s in both envelopes, the x-ratelimit-* headers, usage counted from JSON answers and streams, slots
returned on every path, the audit event and the metrics. Over real HTTP and Redis: tests/e2e/test_governance.py.
"""

from __future__ import annotations

import asyncio
import dataclasses
import json
import time
from typing import Any

from routing.core.limits import Limits, ScopeCounts
from routing.core.table import KeySpec, RoutingTable, TeamSpec
from routing.gateway.client_answer import RelayStream
from routing.gateway.state import state
from routing.models import hash_secret
from routing.simulator import SimulatorServer
from tests.gateway import support
from tests.gateway.support import answer, counted, eventually, request, run

simulator, sim, table, fresh_state = support.simulator, support.sim, support.table, support.fresh_state


def key(name: str, *, team: TeamSpec | None = None, **limits: Any) -> KeySpec:
    return KeySpec(id=abs(hash(name)) % 10_000, name=name, secret_hash=hash_secret(name), limits=Limits(**limits),
                   team=team)


def test_a_limited_key_gets_the_headers_and_then_a_429_in_the_openai_envelope(
        sim: SimulatorServer, table: RoutingTable, audit_events: list[dict[str, Any]]) -> None:
    limited = key("two-a-minute", rpm=2)

    async def scenario() -> list[support.Reply]:
        return [await answer(request(table, "primary", key=limited)) for _ in range(3)]

    first, second, third = run(scenario())
    assert (first.status, second.status, third.status) == (200, 200, 429)
    assert first.headers["x-ratelimit-limit-requests"] == "2"
    assert first.headers["x-ratelimit-remaining-requests"] == "1"
    assert first.headers["x-ratelimit-reset-requests"] in ("1m0s", "59s")
    assert second.headers["x-ratelimit-remaining-requests"] == "0"
    assert third.headers["x-ratelimit-remaining-requests"] == "0"
    assert 1 <= int(third.headers["Retry-After"]) <= 60
    assert third.error["code"] == "rate_limit_exceeded"
    assert third.error["type"] == "rate_limit_exceeded" or third.error["type"].endswith("error")
    assert 'key "two-a-minute"' in third.error["message"]
    assert "2 requests per minute" in third.error["message"]
    assert len(sim.received("primary")) == 2  # the refused request never went upstream
    refused = audit_events[-1]
    assert (refused["status"], refused["error_class"], refused["limit"]) == (429, "limit_exceeded", "key:rpm")
    assert audit_events[0]["limit"] == ""
    assert counted("gomodel_limit_rejections_total", key="two-a-minute", team="", limit="rpm") == 1


def test_the_anthropic_envelope_carries_the_type_and_the_code(sim: SimulatorServer, table: RoutingTable) -> None:
    limited = key("anthropic-one", rpm=1)

    async def scenario() -> support.Reply:
        await answer(request(table, "claude", key=limited, inbound="anthropic"))
        return await answer(request(table, "claude", key=limited, inbound="anthropic"))

    reply = run(scenario())
    assert reply.status == 429
    body = reply.json()
    assert body["type"] == "error"
    assert body["error"]["type"] == "rate_limit_error"
    assert body["error"]["code"] == "rate_limit_exceeded"
    assert reply.headers["x-ratelimit-limit-requests"] == "1"
    assert "Retry-After" in reply.headers


def test_keys_of_a_team_share_its_limit_and_the_refusal_names_the_team(
        sim: SimulatorServer, table: RoutingTable, audit_events: list[dict[str, Any]]) -> None:
    squad = TeamSpec("squad", Limits(rpm=3))
    one, two = key("one", team=squad, rpm=10), key("two", team=squad, rpm=10)

    async def scenario() -> list[support.Reply]:
        return [await answer(request(table, "primary", key=k)) for k in (one, two, one, two)]

    replies = run(scenario())
    assert [r.status for r in replies] == [200, 200, 200, 429]
    assert 'team "squad"' in replies[-1].error["message"]
    assert replies[0].headers["x-ratelimit-limit-requests"] == "3"  # the tightest scope: the team's
    assert (audit_events[-1]["team"], audit_events[-1]["limit"]) == ("squad", "team:rpm")
    assert counted("gomodel_limit_rejections_total", key="two", team="squad", limit="rpm") == 1


def test_a_team_narrows_the_models_its_keys_may_use(sim: SimulatorServer, table: RoutingTable) -> None:
    squad = TeamSpec("narrow", allowed_models=frozenset({"primary"}))
    member = key("member", team=squad)
    reply = run(answer(request(table, "secondary", key=member)))
    assert reply.status == 403
    assert reply.error["code"] == "model_not_allowed"
    assert "narrow" in reply.error["message"]
    assert run(answer(request(table, "primary", key=member))).status == 200


def test_tokens_and_spend_are_counted_from_a_json_answer(sim: SimulatorServer, table: RoutingTable) -> None:
    limited = key("tokens-json", tpm=100_000, budget_usd=10.0)
    reply = run(answer(request(table, "primary", "count my tokens", key=limited)))
    usage = reply.json()["usage"]
    counts = run(state.limits.counts(limited.limit_scopes[0]))
    assert counts.tokens == usage["prompt_tokens"] + usage["completion_tokens"] > 0
    cost = float(reply.headers["X-GoModel-Cost-Usd"])
    assert counts.spend_nanos == round(cost * 1e9) > 0
    assert counted("gomodel_spend_usd_total", key="tokens-json", team="") == cost
    assert counted("gomodel_tokens_total", key="tokens-json", team="", direction="output") == \
        usage["completion_tokens"]


def test_a_failed_attempt_the_provider_billed_counts_too(sim: SimulatorServer, table: RoutingTable,
                                                        audit_events: list[dict[str, Any]]) -> None:
    """The primary's answer breaks the response schema (billed, then refused by validation); the fallback
    answers. Both answers' tokens count against the key."""
    limited = key("billed", tpm=100_000)
    sim.set_fault("primary", {"kind": "schema_violation", "times": 1})
    reply = run(answer(request(table, "pair", key=limited, response_format=support.SCHEMA_FORMAT)))
    assert reply.status == 200
    attempts = audit_events[-1]["attempts"]
    assert [a["validation"].split(":")[0] for a in attempts] == ["rejected", "accepted"]
    billed = sum(a["usage"]["input_tokens"] + a["usage"]["output_tokens"] for a in attempts)
    assert run_counts(limited).tokens == billed > reply.json()["usage"]["total_tokens"]


def test_tokens_are_counted_from_a_stream_when_it_ends(sim: SimulatorServer, table: RoutingTable) -> None:
    limited = key("tokens-stream", tpm=100_000, max_concurrency=1)
    call = request(table, "primary", "stream me", key=limited, stream=True,
                   stream_options={"include_usage": True})
    reply = run(answer(call))
    usage = json.loads([e for e in reply.events if e != "[DONE]"][-1])["usage"]
    counts = run(state.limits.counts(limited.limit_scopes[0]))
    assert counts.tokens == usage["total_tokens"] > 0
    assert counts.slots == 0  # the stream ended: its slot is back
    assert reply.headers["x-ratelimit-limit-tokens"] == "100000"


def test_a_budget_refuses_once_spent_and_says_when_it_resets(
        sim: SimulatorServer, table: RoutingTable) -> None:
    # "hello" reserves about 2 tokens in and max_tokens 5 out: 12 micro-dollars at 1 and 2 USD per million. The
    # first answer's spend leaves less than that for the second.
    limited = key("thrifty", budget_usd=0.000015, budget_period="day")

    async def scenario() -> tuple[support.Reply, support.Reply]:
        return (await answer(request(table, "primary", key=limited, max_tokens=5)),
                await answer(request(table, "primary", key=limited, max_tokens=5)))

    first, second = run(scenario())
    assert first.status == 200
    assert second.status == 429
    assert second.error["code"] == "budget_exceeded"
    assert "per day" in second.error["message"]
    assert 1 <= int(second.headers["Retry-After"]) <= 86_400


def test_concurrency_is_held_for_a_stream_and_returned_when_the_client_goes_away(
        sim: SimulatorServer, table: RoutingTable) -> None:
    limited = key("one-at-a-time", max_concurrency=1)

    async def scenario() -> tuple[int, str, int, int]:
        response = await support.engine.handle(request(table, "slow-stream", key=limited, stream=True))
        assert isinstance(response, RelayStream)
        await anext(response.source)  # the first frames reached the client
        busy = await answer(request(table, "primary", key=limited))
        await response.source.aclose()  # the client hung up mid-stream
        await eventually(lambda: run_counts(limited).slots == 0, what="the slot's release")
        after = await answer(request(table, "primary", key=limited))
        return busy.status, busy.error["code"], after.status, run_counts(limited).slots

    assert run(scenario()) == (429, "concurrency_limit_exceeded", 200, 0)


def test_concurrency_is_returned_when_a_json_request_is_cancelled(sim: SimulatorServer, table: RoutingTable) -> None:
    limited = key("cancelled", max_concurrency=1)
    sim.set_fault("primary", {"kind": "slow_first_byte", "ms": 5000, "times": 1})

    async def scenario() -> tuple[int, int]:
        task = asyncio.create_task(answer(request(table, "primary", key=limited)))
        await eventually(lambda: run_counts(limited).slots == 1, what="the admission")
        await eventually(lambda: len(sim.received("primary")) == 1, what="the upstream request")
        task.cancel()
        await asyncio.gather(task, return_exceptions=True)
        await eventually(lambda: run_counts(limited).slots == 0, what="the slot's release")
        sim.clear_faults()
        after = await answer(request(table, "secondary", key=limited))
        return after.status, run_counts(limited).slots

    assert run(scenario()) == (200, 0)


def test_an_error_answer_returns_the_slot(sim: SimulatorServer, table: RoutingTable) -> None:
    limited = key("errors", max_concurrency=1)
    replies = run(_twice(table, limited, "does-not-exist"))
    assert [r.status for r in replies] == [404, 404]  # the first 404 gave its slot back
    assert "x-ratelimit-limit-requests" not in replies[0].headers  # no rpm: no requests headers


def test_a_key_without_limits_is_never_counted(sim: SimulatorServer, table: RoutingTable) -> None:
    free = key("free")
    reply = run(answer(request(table, "primary", key=free)))
    assert reply.status == 200
    assert not any(name.lower().startswith("x-ratelimit") for name in reply.headers)
    assert free.limit_scopes == ()


def test_the_master_key_is_never_limited() -> None:
    master = dataclasses.replace(key("master", rpm=1), is_master=True)
    assert master.limit_scopes == ()


async def _twice(table: RoutingTable, limited: KeySpec, model: str) -> list[support.Reply]:
    return [await answer(request(table, model, key=limited)) for _ in range(2)]


def run_counts(limited: KeySpec) -> ScopeCounts:
    """The key's counts in the in-process store, read directly (the tests run without REDIS_URL)."""
    ledger = getattr(state.limits, "ledger", None)
    assert ledger is not None, "in-process tests count limits in this process"
    return ledger.counts(limited.limit_scopes[0], time.time())  # type: ignore[no-any-return]

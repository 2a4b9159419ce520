"""The response cache over real HTTP, called by the openai and anthropic SDKs: exact hits and misses, scopes by key
and team, JSON answers replayed as streams (and streams served as JSON) in all three protocols, errors and
truncations never kept, bypass and refresh, the audit revision of a hit, a purge; semantic hits for a paraphrase
and misses for another question, context, system, tool set or scope, the embedding spent as a request of the key;
two replicas sharing a Redis (exact and semantic entries) and that Redis stopping (misses, never errors).
"""

from __future__ import annotations

import time
import uuid
from collections.abc import Iterator
from dataclasses import dataclass, field
from pathlib import Path
from typing import Any

import anthropic
import httpx2
import openai
import psycopg
import pytest
import redis
import yaml

from routing.simulator.server import SimulatorServer
from tests.audit.procs import PrivateRedis
from tests.e2e.conftest import SIM_KEY, SIM_MODELS, fresh_database, gateway_config, manage
from tests.gateway_process import Gateway, run_gateway

pytestmark = [pytest.mark.services, pytest.mark.slow]

KEYS = {"alice": [], "bob": [], "carol": ["--team", "squad"], "dave": ["--team", "squad"]}
CACHES = [
    {"model": "oa/oa-model", "ttl": "10m"},
    {"model": "an/an-model", "ttl": "10m", "scope": "team"},
    {"model": "normal", "ttl": "10m", "scope": "global"},
    {"model": "oa/slow-stream", "ttl": "10m"},
    {"model": "pool", "ttl": "10m", "semantic": {"embeddings": "oa/sim-embed", "threshold": 0.8}},
]
EMBEDDER = {"provider": "oa", "upstream": "sim-embed", "endpoints": ["embeddings"], "dimensions": 1024,
            "family": "sim-embed", "input_price": 0.02}


@dataclass
class Setup:
    gateway: Gateway
    secrets: dict[str, str]
    database_url: str
    clients: dict[tuple[Any, ...], Any] = field(default_factory=dict)

    def openai(self, name: str = "alice", gateway: Gateway | None = None) -> openai.OpenAI:
        slot: tuple[Any, ...] = ("openai", name, id(gateway))
        if slot not in self.clients:
            self.clients[slot] = openai.OpenAI(api_key=self.secrets[name], max_retries=0,
                                               base_url=f"{(gateway or self.gateway).base_url}/v1")
        return self.clients[slot]

    def anthropic(self, name: str = "alice") -> anthropic.Anthropic:
        slot: tuple[Any, ...] = ("anthropic", name)
        if slot not in self.clients:
            self.clients[slot] = anthropic.Anthropic(api_key=self.secrets[name], base_url=self.gateway.base_url,
                                                     max_retries=0)
        return self.clients[slot]


def _config(simulator: SimulatorServer) -> dict[str, Any]:
    config = gateway_config(simulator.base_url)
    config["models"].append(EMBEDDER)
    config["teams"] = [{"name": "squad"}]
    config["caches"] = CACHES
    return config


@pytest.fixture(scope="module")
def simulator() -> Iterator[SimulatorServer]:
    """The shared simulator's models and an embeddings model of 1024 dimensions (bag-of-words vectors)."""
    with SimulatorServer(config={"models": {**SIM_MODELS, "sim-embed": {"dimensions": 1024}}}) as sim:
        yield sim


@pytest.fixture(scope="module")
def setup(tmp_path_factory: pytest.TempPathFactory, simulator: SimulatorServer) -> Iterator[Setup]:
    tmp = Path(tmp_path_factory.mktemp("cache"))
    path = tmp / "config.yaml"
    path.write_text(yaml.safe_dump(_config(simulator)))
    with fresh_database("cache") as url:
        manage(url, "loadconfig", str(path), env={"E2E_SIM_KEY": SIM_KEY})
        secrets = {name: manage(url, "createkey", name, *flags).strip() for name, flags in KEYS.items()}
        env = {"DATABASE_URL": url, "E2E_SIM_KEY": SIM_KEY, "GOMODEL_MASTER_KEY": "", "CELERY_BROKER_URL": "",
               "REDIS_URL": ""}
        with run_gateway(tmp, env) as gateway:
            running = Setup(gateway, secrets, url)
            try:
                yield running
            finally:
                for client in running.clients.values():
                    client.close()


def _prompt(what: str = "question") -> str:
    return f"{what} {uuid.uuid4().hex[:10]}"


def _chat(client: openai.OpenAI, prompt: str, *, model: str = "oa/oa-model", headers: dict[str, str] | None = None,
          **extra: Any) -> tuple[str, Any]:
    raw = client.chat.completions.with_raw_response.create(
        model=model, messages=[{"role": "user", "content": prompt}], extra_headers=headers or {}, **extra)
    return raw.headers.get("x-gomodel-cache", ""), raw


def _calls(simulator: SimulatorServer, prompt: str) -> int:
    """How many requests carrying ``prompt`` reached the simulator."""
    return sum(1 for record in simulator.received() if prompt in str(record))


def test_it_serves_a_repeat_from_the_cache_and_routes_any_change(setup: Setup, simulator: SimulatorServer) -> None:
    client = setup.openai()
    prompt = _prompt()
    outcome, first = _chat(client, prompt)
    assert outcome == "miss"
    outcome, second = _chat(client, prompt, user="someone-else")  # transport fields: same entry
    assert outcome == "hit"
    answer = second.parse()
    assert answer.choices[0].message.content == first.parse().choices[0].message.content
    assert second.headers["x-gomodel-cost-usd"] == "0.00000000"
    assert second.headers["x-gomodel-attempts"] == "0"
    assert second.headers["x-gomodel-target"] == "oa/oa-model"
    assert float(first.headers["x-gomodel-cost-usd"]) > 0
    assert _calls(simulator, prompt) == 1
    outcome, _ = _chat(client, prompt, temperature=0.3)  # a sampling parameter: another request
    assert outcome == "miss"
    outcome, _ = _chat(client, prompt, max_tokens=500)
    assert outcome == "miss"
    assert _calls(simulator, prompt) == 3


def test_a_name_without_a_cache_gets_no_cache_header(setup: Setup) -> None:
    outcome, raw = _chat(setup.openai(), _prompt(), model="az/az-model")
    assert outcome == ""
    assert raw.parse().choices[0].message.content


def test_a_key_scope_keeps_each_key_to_its_own_answers(setup: Setup) -> None:
    prompt = _prompt()
    assert _chat(setup.openai("alice"), prompt)[0] == "miss"
    assert _chat(setup.openai("bob"), prompt)[0] == "miss"  # the same request from another key
    assert _chat(setup.openai("bob"), prompt)[0] == "hit"
    assert _chat(setup.openai("alice"), prompt)[0] == "hit"


def test_a_team_scope_shares_answers_within_the_team_only(setup: Setup) -> None:
    prompt = _prompt()

    def ask(name: str) -> tuple[str, str]:
        raw = setup.anthropic(name).messages.with_raw_response.create(
            model="an/an-model", max_tokens=200, messages=[{"role": "user", "content": prompt}])
        message = raw.parse()
        return raw.headers.get("x-gomodel-cache", ""), message.content[0].text

    outcome, filled = ask("carol")
    assert outcome == "miss"
    assert ask("dave") == ("hit", filled)  # carol's teammate
    assert ask("alice")[0] == "miss"  # no team: her own scope
    assert ask("bob")[0] == "miss"


def test_a_global_scope_on_a_tier_alias_serves_every_key(setup: Setup) -> None:
    prompt = _prompt("hello")
    assert _chat(setup.openai("alice"), prompt, model="normal")[0] == "miss"
    assert _chat(setup.openai("carol"), prompt, model="normal")[0] == "hit"


def _stream_text(stream: Any) -> tuple[str, Any]:
    text, usage = [], None
    for chunk in stream:
        if chunk.usage is not None:
            usage = chunk.usage
        for choice in chunk.choices:
            if choice.delta.content:
                text.append(choice.delta.content)
    return "".join(text), usage


def test_openai_a_json_answer_is_replayed_as_a_stream_and_back(setup: Setup, simulator: SimulatorServer) -> None:
    client = setup.openai()
    prompt = _prompt()
    _, filled = _chat(client, prompt)
    expected = filled.parse().choices[0].message.content
    stream = client.chat.completions.create(model="oa/oa-model", messages=[{"role": "user", "content": prompt}],
                                            stream=True, stream_options={"include_usage": True})
    assert stream.response.headers["x-gomodel-cache"] == "hit"
    text, usage = _stream_text(stream)
    assert text == expected
    assert usage is not None
    assert usage.total_tokens == filled.parse().usage.total_tokens

    other = _prompt()
    stream = client.chat.completions.create(model="oa/oa-model", messages=[{"role": "user", "content": other}],
                                            stream=True)
    assert stream.response.headers["x-gomodel-cache"] == "miss"
    streamed, _ = _stream_text(stream)
    outcome, raw = _chat(client, other)
    assert outcome == "hit"
    answer = raw.parse()
    assert answer.choices[0].message.content == streamed
    assert answer.choices[0].finish_reason == "stop"
    assert _calls(simulator, other) == 1


def test_openai_tool_calls_are_kept_and_replayed(setup: Setup) -> None:
    client = setup.openai()
    tools = [{"type": "function", "function": {"name": "lookup", "parameters": {
        "type": "object", "properties": {"city": {"type": "string"}}, "required": ["city"]}}}]
    prompt = _prompt("weather")
    first = client.chat.completions.create(model="oa/oa-model", messages=[{"role": "user", "content": prompt}],
                                           tools=tools)
    call = first.choices[0].message.tool_calls[0]
    stream = client.chat.completions.create(model="oa/oa-model", messages=[{"role": "user", "content": prompt}],
                                            tools=tools, stream=True)
    assert stream.response.headers["x-gomodel-cache"] == "hit"
    names, arguments = [], []
    for chunk in stream:
        for choice in chunk.choices:
            for delta in choice.delta.tool_calls or []:
                names.append(delta.function.name or "")
                arguments.append(delta.function.arguments or "")
    assert "".join(names) == call.function.name
    assert "".join(arguments) == call.function.arguments
    # The same prompt without the tools is another request.
    assert _chat(client, prompt)[0] == "miss"


def test_anthropic_a_json_answer_is_replayed_as_a_stream_and_back(setup: Setup) -> None:
    client = setup.anthropic("carol")
    prompt = _prompt()
    messages = [{"role": "user", "content": prompt}]
    filled = client.messages.create(model="an/an-model", max_tokens=200, messages=messages)
    with client.messages.stream(model="an/an-model", max_tokens=200, messages=messages) as stream:
        assert stream.response.headers["x-gomodel-cache"] == "hit"
        final = stream.get_final_message()
    assert final.content[0].text == filled.content[0].text
    assert final.stop_reason == "end_turn"
    assert final.usage.output_tokens == filled.usage.output_tokens

    other = [{"role": "user", "content": _prompt()}]
    with client.messages.stream(model="an/an-model", max_tokens=200, messages=other) as stream:
        assert stream.response.headers["x-gomodel-cache"] == "miss"
        streamed = stream.get_final_message()
    raw = client.messages.with_raw_response.create(model="an/an-model", max_tokens=200, messages=other)
    assert raw.headers["x-gomodel-cache"] == "hit"
    message = raw.parse()
    assert message.content[0].text == streamed.content[0].text
    assert message.stop_reason == "end_turn"


def test_responses_a_json_answer_is_replayed_as_a_stream_and_back(setup: Setup) -> None:
    client = setup.openai()
    prompt = _prompt()
    raw = client.responses.with_raw_response.create(model="oa/oa-model", input=prompt)
    assert raw.headers["x-gomodel-cache"] == "miss"
    filled = raw.parse()
    stream = client.responses.create(model="oa/oa-model", input=prompt, stream=True)
    assert stream.response.headers["x-gomodel-cache"] == "hit"
    events = list(stream)
    assert events[0].type == "response.created"
    assert events[-1].type == "response.completed"
    completed = events[-1].response
    assert completed.output_text == filled.output_text
    assert completed.id != filled.id  # each hit is a response of its own
    deltas = "".join(event.delta for event in events if event.type == "response.output_text.delta")
    assert deltas == filled.output_text
    # The hit is a turn that can be continued like any other.
    follow = client.responses.create(model="oa/oa-model", input="and then?", previous_response_id=completed.id)
    assert follow.output_text

    other = _prompt()
    stream = client.responses.create(model="oa/oa-model", input=other, stream=True)
    assert stream.response.headers["x-gomodel-cache"] == "miss"
    streamed = [event for event in stream if event.type == "response.completed"][0].response
    raw = client.responses.with_raw_response.create(model="oa/oa-model", input=other)
    assert raw.headers["x-gomodel-cache"] == "hit"
    assert raw.parse().output_text == streamed.output_text


def test_errors_are_never_kept(setup: Setup, sim: SimulatorServer) -> None:
    client = setup.openai()
    prompt = _prompt()
    sim.set_fault("oa-model", {"kind": "status", "status": 400, "times": 1})
    with pytest.raises(openai.BadRequestError) as caught:
        client.chat.completions.create(model="oa/oa-model", messages=[{"role": "user", "content": prompt}])
    assert caught.value.response.headers["x-gomodel-cache"] == "miss"
    assert _chat(client, prompt)[0] == "miss"  # the error was not kept; this answer is
    assert _chat(client, prompt)[0] == "hit"


def test_truncated_answers_are_never_kept(setup: Setup, simulator: SimulatorServer) -> None:
    client = setup.openai()
    prompt = _prompt("a long question that cannot fit in two tokens")
    outcome, raw = _chat(client, prompt, max_tokens=2)
    assert outcome == "miss"
    assert raw.parse().choices[0].finish_reason == "length"
    outcome, raw = _chat(client, prompt, max_tokens=2)
    assert outcome == "miss"
    assert raw.parse().choices[0].finish_reason == "length"
    stream = client.chat.completions.create(model="oa/oa-model", messages=[{"role": "user", "content": prompt}],
                                            max_tokens=2, stream=True)
    _stream_text(stream)
    assert _chat(client, prompt, max_tokens=2)[0] == "miss"
    assert _calls(simulator, prompt) == 4


def test_a_stream_cut_short_is_never_kept(setup: Setup, sim: SimulatorServer) -> None:
    client = setup.openai()
    prompt = _prompt()
    sim.set_fault("slow-stream", {"kind": "stream_error", "after_chunks": 2, "status": 500, "times": 1})
    stream = client.chat.completions.create(model="oa/slow-stream", messages=[{"role": "user", "content": prompt}],
                                            stream=True)
    assert stream.response.headers["x-gomodel-cache"] == "miss"
    with pytest.raises(openai.APIError):
        _stream_text(stream)
    assert _chat(client, prompt, model="oa/slow-stream")[0] == "miss"


def test_off_bypasses_the_cache_and_refresh_replaces_the_entry(setup: Setup, simulator: SimulatorServer) -> None:
    client = setup.openai()
    prompt = _prompt()
    _, filled = _chat(client, prompt)
    outcome, raw = _chat(client, prompt, headers={"X-GoModel-Cache": "off"})
    assert outcome == "bypass"
    assert _calls(simulator, prompt) == 2
    assert _chat(client, prompt, headers={"Cache-Control": "no-store"})[0] == "bypass"
    outcome, refreshed = _chat(client, prompt, headers={"X-GoModel-Cache": "refresh"})
    assert outcome == "miss"
    assert _calls(simulator, prompt) == 4
    new_text = refreshed.parse().choices[0].message.content
    assert new_text != filled.parse().choices[0].message.content  # the simulator counts its answers
    outcome, raw = _chat(client, prompt)
    assert outcome == "hit"
    assert raw.parse().choices[0].message.content == new_text
    assert _chat(client, prompt, headers={"Cache-Control": "no-cache"})[0] == "miss"
    assert _calls(simulator, prompt) == 5


def test_a_bad_cache_header_is_a_400_naming_it(setup: Setup) -> None:
    with pytest.raises(openai.BadRequestError) as caught:
        _chat(setup.openai(), _prompt(), headers={"X-GoModel-Cache": "sometimes"})
    assert caught.value.param == "X-GoModel-Cache"
    with pytest.raises(anthropic.BadRequestError) as refused:
        setup.anthropic().messages.create(model="an/an-model", max_tokens=10, extra_headers={
            "X-GoModel-Cache": "sometimes"}, messages=[{"role": "user", "content": "hi"}])
    assert "X-GoModel-Cache" in str(refused.value)


def _revision(database_url: str, request_id: str) -> tuple[Any, ...]:
    deadline = time.monotonic() + 15
    with psycopg.connect(database_url) as conn:
        while True:
            row = conn.execute("SELECT cache_outcome, cache_filled_by, cache_saved_usd, cost_usd, attempt_count "
                               "FROM audit_auditrevision WHERE request_id = %s", (request_id,)).fetchone()
            if row is not None or time.monotonic() > deadline:
                assert row is not None, f"no revision of {request_id}"
                return tuple(row)
            time.sleep(0.1)


def test_the_revision_of_a_hit_names_the_request_that_filled_it(setup: Setup) -> None:
    client = setup.openai()
    prompt = _prompt()
    _, filled = _chat(client, prompt)
    _, hit = _chat(client, prompt)
    filled_id = filled.headers["x-request-id"]
    assert _revision(setup.database_url, filled_id)[0] == "miss"
    outcome, filled_by, saved, cost, attempts = _revision(setup.database_url, hit.headers["x-request-id"])
    assert (outcome, filled_by, cost, attempts) == ("hit", filled_id, 0.0, 0)
    assert saved == pytest.approx(float(filled.headers["x-gomodel-cost-usd"]))


def test_metrics_count_outcomes_and_the_spend_saved(setup: Setup) -> None:
    client = setup.openai()
    prompt = _prompt()
    _chat(client, prompt)
    _chat(client, prompt)
    text = httpx2.get(f"{setup.gateway.base_url}/metrics", timeout=10).text
    assert 'gomodel_cache_requests_total{name="oa/oa-model",outcome="hit"}' in text
    assert 'gomodel_cache_requests_total{name="oa/oa-model",outcome="miss"}' in text
    assert 'gomodel_cache_saved_usd_total{name="oa/oa-model"}' in text


def test_purge_cache_makes_every_kept_answer_a_miss(setup: Setup) -> None:
    client = setup.openai()
    prompt = _prompt()
    _chat(client, prompt)
    assert _chat(client, prompt)[0] == "hit"
    out = manage(setup.database_url, "purge_cache", "oa/oa-model")
    assert "oa/oa-model" in out
    deadline = time.monotonic() + 10
    while _chat(client, prompt)[0] == "hit":  # the gateway follows the new configuration within its poll
        assert time.monotonic() < deadline, "the purge never reached the gateway"
        time.sleep(0.2)
    assert _chat(client, prompt)[0] == "hit"  # filled again


# --- two replicas and their Redis -----------------------------------------------------------------------------


@pytest.fixture(scope="module")
def replicas(tmp_path_factory: pytest.TempPathFactory, simulator: SimulatorServer,
             setup: Setup) -> Iterator[tuple[Gateway, Gateway, PrivateRedis]]:
    tmp = Path(tmp_path_factory.mktemp("cache-redis"))
    private = PrivateRedis(tmp / "redis")
    private.start()
    env = {"DATABASE_URL": setup.database_url, "E2E_SIM_KEY": SIM_KEY, "GOMODEL_MASTER_KEY": "",
           "CELERY_BROKER_URL": "", "REDIS_URL": private.url}
    try:
        with run_gateway(tmp, env) as one, run_gateway(tmp, env) as two:
            yield one, two, private
    finally:
        private.stop()


def test_two_replicas_share_entries_through_redis_encrypted(setup: Setup, simulator: SimulatorServer,
                                                            replicas: tuple[Gateway, Gateway, PrivateRedis]) -> None:
    one, two, private = replicas
    prompt = _prompt()
    outcome, filled = _chat(setup.openai(gateway=one), prompt)
    assert outcome == "miss"
    text = filled.parse().choices[0].message.content
    deadline = time.monotonic() + 5
    while True:  # the write is not waited for by the request
        outcome, raw = _chat(setup.openai(gateway=two), prompt)
        if outcome == "hit" or time.monotonic() > deadline:
            break
        time.sleep(0.1)
    assert outcome == "hit"
    assert raw.parse().choices[0].message.content == text
    assert _chat(setup.openai("bob", gateway=two), prompt)[0] == "miss"  # still scoped by key
    stored = redis.Redis.from_url(private.url)
    try:
        values = [stored.get(key) or b"" for key in stored.scan_iter(match="gomodel:cache:*")]
    finally:
        stored.close()
    assert values
    assert not any(prompt.encode() in value or text.encode()[:20] in value for value in values)


def test_two_replicas_share_semantic_entries_through_redis(setup: Setup,
                                                          replicas: tuple[Gateway, Gateway, PrivateRedis]) -> None:
    one, two, _private = replicas
    topic = uuid.uuid4().hex[:8]
    first = _pool(setup.openai(gateway=one), [{"role": "user", "content": f"list the moons of {topic} please"}])
    assert first.headers["x-gomodel-cache"] == "miss"
    deadline = time.monotonic() + 5
    while True:
        raw = _pool(setup.openai(gateway=two), [{"role": "user", "content": f"list all the moons of {topic} please"}])
        if raw.headers["x-gomodel-cache"] != "miss" or time.monotonic() > deadline:
            break
        time.sleep(0.1)
    assert raw.headers["x-gomodel-cache"] == "semantic-hit"
    assert raw.parse().choices[0].message.content == first.parse().choices[0].message.content


def test_a_redis_outage_turns_lookups_into_misses_never_errors(setup: Setup,
                                                               replicas: tuple[Gateway, Gateway, PrivateRedis]) -> None:
    one, two, private = replicas
    prompt = _prompt()
    _chat(setup.openai(gateway=one), prompt)
    private.stop()
    for gateway in (one, two, one, two):
        outcome, raw = _chat(setup.openai(gateway=gateway), prompt)
        assert outcome == "miss"
        assert raw.parse().choices[0].message.content


# --- semantic matching ------------------------------------------------------------------------------------------


def _answered(simulator: SimulatorServer, prompt: str) -> int:
    """Chat requests carrying ``prompt`` that reached a model of ``pool`` (its embeddings not counted)."""
    return sum(1 for model in ("oa-model", "an-model") for record in simulator.received(model=model)
               if prompt in str(record))


def _pool(client: openai.OpenAI, messages: list[dict[str, Any]], **extra: Any) -> Any:
    return client.chat.completions.with_raw_response.create(model="pool", messages=messages, **extra)


def _embeddings_revisions(database_url: str, key_name: str) -> int:
    """The semantic cache's embedding requests of ``key_name`` the audit trail holds."""
    with psycopg.connect(database_url) as conn:
        row = conn.execute("SELECT count(*) FROM audit_auditrevision WHERE endpoint = 'embeddings' AND "
                           "requested_model = 'oa/sim-embed' AND key_name = %s", (key_name,)).fetchone()
    return int(row[0]) if row else 0


def test_a_paraphrase_is_a_semantic_hit_and_another_question_a_miss(setup: Setup,
                                                                    simulator: SimulatorServer) -> None:
    client = setup.openai()
    topic = uuid.uuid4().hex[:8]
    question = f"what is the capital city of the country {topic}"
    paraphrase = f"please tell me what is the capital city of the country {topic}"
    first = _pool(client, [{"role": "user", "content": question}])
    assert first.headers["x-gomodel-cache"] == "miss"
    second = _pool(client, [{"role": "user", "content": paraphrase}])
    assert second.headers["x-gomodel-cache"] == "semantic-hit"
    similarity = float(second.headers["x-gomodel-cache-similarity"])
    assert 0.8 <= similarity < 1.0
    assert second.parse().choices[0].message.content == first.parse().choices[0].message.content
    assert second.headers["x-gomodel-cost-usd"] == "0.00000000"
    assert _answered(simulator, paraphrase) == 0
    other = _pool(client, [{"role": "user", "content": f"how do I bake sourdough bread {topic}"}])
    assert other.headers["x-gomodel-cache"] == "miss"
    assert "x-gomodel-cache-similarity" not in other.headers
    revision = _revision(setup.database_url, second.headers["x-request-id"])
    assert revision[:2] == ("semantic-hit", first.headers["x-request-id"])


def test_the_embedding_is_a_request_of_the_key_spent_and_audited(setup: Setup) -> None:
    # Counted for bob alone: the audit rows of earlier tests' embeddings (other keys) may still be arriving.
    client = setup.openai("bob")
    before = _embeddings_revisions(setup.database_url, "bob")
    topic = uuid.uuid4().hex[:8]
    _pool(client, [{"role": "user", "content": f"name three rivers of {topic}"}])
    _pool(client, [{"role": "user", "content": f"please name three rivers of {topic}"}])
    deadline = time.monotonic() + 15
    while _embeddings_revisions(setup.database_url, "bob") < before + 2 and time.monotonic() < deadline:
        time.sleep(0.1)
    assert _embeddings_revisions(setup.database_url, "bob") == before + 2


def test_no_semantic_hit_across_contexts_systems_tools_or_keys(setup: Setup) -> None:
    client = setup.openai()
    topic = uuid.uuid4().hex[:8]
    question = f"summarise the story of {topic} in a sentence"
    paraphrase = f"please summarise the story of {topic} in a sentence"
    _pool(client, [{"role": "user", "content": question}])
    assert _pool(client, [{"role": "user", "content": paraphrase}]).headers["x-gomodel-cache"] == "semantic-hit"
    earlier = [{"role": "user", "content": "hello"}, {"role": "assistant", "content": "hi, how can I help?"}]
    assert _pool(client, [*earlier, {"role": "user", "content": paraphrase}]).headers["x-gomodel-cache"] == "miss"
    system = [{"role": "system", "content": "answer in French"}]
    assert _pool(client, [*system, {"role": "user", "content": paraphrase}]).headers["x-gomodel-cache"] == "miss"
    tools = [{"type": "function", "function": {"name": "search", "parameters": {"type": "object"}}}]
    assert _pool(client, [{"role": "user", "content": paraphrase}], tools=tools,
                 tool_choice="none").headers["x-gomodel-cache"] == "miss"
    assert _pool(client, [{"role": "user", "content": paraphrase}],
                 temperature=0.1).headers["x-gomodel-cache"] == "miss"
    assert _pool(setup.openai("bob"), [{"role": "user", "content": paraphrase}]).headers["x-gomodel-cache"] == "miss"


def test_a_semantic_hit_in_the_same_context_of_a_conversation(setup: Setup) -> None:
    client = setup.openai()
    topic = uuid.uuid4().hex[:8]
    earlier = [{"role": "user", "content": f"let us talk about {topic}"},
               {"role": "assistant", "content": "gladly"}]
    _pool(client, [*earlier, {"role": "user", "content": f"what is the history of {topic} exactly"}])
    again = _pool(client, [*earlier, {"role": "user", "content": f"what is the history of {topic}"}])
    assert again.headers["x-gomodel-cache"] == "semantic-hit"
    streamed = client.chat.completions.create(model="pool", stream=True, messages=[
        *earlier, {"role": "user", "content": f"so what is the history of {topic}"}])
    assert streamed.response.headers["x-gomodel-cache"] == "semantic-hit"
    assert _stream_text(streamed)[0] == again.parse().choices[0].message.content

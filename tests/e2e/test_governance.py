"""Limits over real HTTP: two gateway processes sharing PostgreSQL and Redis, called by the openai and
anthropic SDKs. A key's limit holds across both processes, 429s come in each SDK's envelope with the codes
and headers, slots return when a client hangs up, stream tokens count, budgets refuse, a team's limit is
shared by its keys; a gateway whose Redis is away still serves, counting per process.
"""

from __future__ import annotations

import time
import uuid
from collections.abc import Callable, Iterator
from dataclasses import dataclass, field
from pathlib import Path

import anthropic
import httpx2
import openai
import pytest
import yaml

from routing.simulator.server import SimulatorServer
from tests.e2e.conftest import SIM_KEY, fresh_database, gateway_config, manage
from tests.gateway_process import Gateway, free_port, run_gateway
from tests.services import drop_redis_keys

pytestmark = [pytest.mark.services, pytest.mark.slow]

REDIS_URL = "redis://127.0.0.1:6379/2"
CHAT = "/v1/chat/completions"
KEYS = {  # name -> createkey flags
    "rpm5": ["--rpm", "5"],
    "anthropic1": ["--rpm", "1"],
    "headers": ["--rpm", "100", "--tpm", "100000"],
    "single": ["--max-concurrency", "1"],
    "streamed": ["--tpm", "100000"],
    "thrifty": ["--budget-usd", "0.000001", "--budget-period", "day"],
    "member1": ["--team", "squad"],
    "member2": ["--team", "squad"],
}


@dataclass
class Cluster:
    gateways: list[Gateway]
    secrets: dict[str, str]
    prefix: str
    database_url: str

    clients: dict[tuple[str, str, int], openai.OpenAI | anthropic.Anthropic] = field(default_factory=dict)

    def openai(self, name: str, replica: int = 0) -> openai.OpenAI:
        """The key's openai client on one gateway process; no retries, so a 429 reaches the test."""
        client = self.clients.get(("openai", name, replica))
        if client is None:
            client = self.clients[("openai", name, replica)] = openai.OpenAI(
                api_key=self.secrets[name], base_url=f"{self.gateways[replica].base_url}/v1", max_retries=0)
        assert isinstance(client, openai.OpenAI)
        return client

    def anthropic(self, name: str, replica: int = 0) -> anthropic.Anthropic:
        client = self.clients.get(("anthropic", name, replica))
        if client is None:
            client = self.clients[("anthropic", name, replica)] = anthropic.Anthropic(
                api_key=self.secrets[name], base_url=self.gateways[replica].base_url, max_retries=0)
        assert isinstance(client, anthropic.Anthropic)
        return client

    def close(self) -> None:
        for client in self.clients.values():
            client.close()


@pytest.fixture(scope="module")
def cluster(tmp_path_factory: pytest.TempPathFactory, simulator: SimulatorServer) -> Iterator[Cluster]:
    tmp = Path(tmp_path_factory.mktemp("governance"))
    config = gateway_config(simulator.base_url)
    config["teams"] = [{"name": "squad", "rpm": 3, "allowed_models": ["oa/oa-model", "an/an-model"]}]
    path = tmp / "config.yaml"
    path.write_text(yaml.safe_dump(config))
    prefix = f"gomodel:test:e2e-limits:{uuid.uuid4().hex[:12]}:"
    with fresh_database("governance") as url:
        manage(url, "loadconfig", str(path), env={"E2E_SIM_KEY": SIM_KEY})
        secrets = {name: manage(url, "createkey", name, *flags).strip() for name, flags in KEYS.items()}
        env = {"DATABASE_URL": url, "E2E_SIM_KEY": SIM_KEY, "GOMODEL_MASTER_KEY": "", "REDIS_URL": REDIS_URL,
               "GOMODEL_LIMIT_KEY_PREFIX": prefix, "CELERY_BROKER_URL": ""}
        with run_gateway(tmp, env) as one, run_gateway(tmp, env) as two:
            running = Cluster([one, two], secrets, prefix, url)
            try:
                yield running
            finally:
                running.close()
    drop_redis_keys(REDIS_URL, prefix)


def refusal(cluster: Cluster, send: Callable[[], object]) -> openai.RateLimitError:
    """The 429 that ``send`` gets; fails with the gateways' logs when it is served instead."""
    try:
        send()
    except openai.RateLimitError as exc:
        return exc
    raise AssertionError("not refused; the gateways' logs:\n" + "\n".join(g.log()[-4000:] for g in cluster.gateways))


def chat(client: openai.OpenAI, model: str = "oa/oa-model") -> openai.types.chat.ChatCompletion:
    return client.chat.completions.create(model=model, messages=[{"role": "user", "content": "hello"}])


def test_a_key_rpm_holds_across_two_gateway_processes(cluster: Cluster) -> None:
    answered, refused = 0, []
    for i in range(8):
        try:
            chat(cluster.openai("rpm5", replica=i % 2))
            answered += 1
        except openai.RateLimitError as exc:
            refused.append(exc)
    assert answered == 5, [g.log() for g in cluster.gateways]
    assert len(refused) == 3
    error = refused[0]
    assert error.status_code == 429
    assert error.code == "rate_limit_exceeded"
    assert 1 <= int(error.response.headers["retry-after"]) <= 60
    assert error.response.headers["x-ratelimit-limit-requests"] == "5"
    assert error.response.headers["x-ratelimit-remaining-requests"] == "0"
    assert 'key "rpm5"' in error.message


def test_the_anthropic_sdk_gets_its_own_envelope(cluster: Cluster) -> None:
    client = cluster.anthropic("anthropic1")
    client.messages.create(model="an/an-model", max_tokens=16, messages=[{"role": "user", "content": "hi"}])
    with pytest.raises(anthropic.RateLimitError) as caught:
        cluster.anthropic("anthropic1", replica=1).messages.create(
            model="an/an-model", max_tokens=16, messages=[{"role": "user", "content": "hi"}])
    body = caught.value.body
    assert isinstance(body, dict)
    assert body["type"] == "error"
    assert body["error"]["type"] == "rate_limit_error"
    assert body["error"]["code"] == "rate_limit_exceeded"
    assert "retry-after" in caught.value.response.headers


def test_every_answer_to_a_limited_key_carries_openais_headers(cluster: Cluster) -> None:
    raw = cluster.openai("headers").chat.completions.with_raw_response.create(
        model="oa/oa-model", messages=[{"role": "user", "content": "hello"}], max_tokens=100)
    headers = raw.headers
    assert headers["x-ratelimit-limit-requests"] == "100"
    assert headers["x-ratelimit-remaining-requests"] == "99"
    assert headers["x-ratelimit-reset-requests"] in ("1m0s", "59s")
    assert headers["x-ratelimit-limit-tokens"] == "100000"
    # Nothing answered before this request: what it had reserved is gone (its input estimate and max_tokens).
    first_reserved = 100000 - int(headers["x-ratelimit-remaining-tokens"])
    assert 100 < first_reserved < 100 + 20
    assert headers["x-ratelimit-reset-tokens"] == "0s"
    second = cluster.openai("headers", replica=1).chat.completions.with_raw_response.create(
        model="oa/oa-model", messages=[{"role": "user", "content": "hello"}], max_tokens=100)
    used = raw.parse().usage
    assert used is not None
    # The first answer's real tokens are counted, and the second request's own reservation (the same) is held.
    assert int(second.headers["x-ratelimit-remaining-tokens"]) == 100000 - used.total_tokens - first_reserved
    assert second.headers["x-ratelimit-remaining-requests"] == "98"


def test_a_slot_returns_when_the_client_hangs_up_mid_stream(cluster: Cluster, sim: SimulatorServer) -> None:
    """The stream would run for a minute; the slot is back well before that because the client hung up."""
    sim.set_fault("slow-stream", {"kind": "slow", "ms": 60_000, "times": 1})
    gateway = cluster.gateways[0]
    body = {"model": "oa/slow-stream", "stream": True, "messages": [{"role": "user", "content": "a long story"}]}
    headers = {"Authorization": f"Bearer {cluster.secrets['single']}"}
    with httpx2.stream("POST", gateway.base_url + CHAT, json=body, headers=headers, timeout=30) as response:
        assert response.status_code == 200
        lines = response.iter_lines()  # kept open: leaving a for-loop over it would close the stream
        while not next(lines).startswith("data: {"):
            pass
        busy = refusal(cluster, lambda: chat(cluster.openai("single", replica=1)))
        assert busy.code == "concurrency_limit_exceeded"
        assert "1 requests in flight" in busy.message
    deadline = time.monotonic() + 20  # far sooner than the stream's own end: only the hang-up frees the slot
    while True:
        try:
            chat(cluster.openai("single", replica=1))  # the other process sees the slot returned
            break
        except openai.RateLimitError:
            if time.monotonic() > deadline:
                raise
            time.sleep(0.05)


def test_tokens_of_a_stream_are_counted(cluster: Cluster) -> None:
    def probe(replica: int) -> tuple[int, int]:
        """A one-token chat: the remaining tokens it was answered with, and the tokens it used."""
        raw = cluster.openai("streamed", replica=replica).chat.completions.with_raw_response.create(
            model="oa/oa-model", messages=[{"role": "user", "content": "hello"}], max_tokens=1)
        usage = raw.parse().usage
        assert usage is not None
        return int(raw.headers["x-ratelimit-remaining-tokens"]), usage.total_tokens

    remaining, counted = probe(0)
    reserved = 100000 - remaining  # nothing counted before it: the window holds only its own reservation
    stream = cluster.openai("streamed").chat.completions.create(
        model="oa/oa-model", messages=[{"role": "user", "content": "stream please"}], stream=True,
        stream_options={"include_usage": True})
    usage = None
    for chunk in stream:
        if chunk.usage is not None:
            usage = chunk.usage
    assert usage is not None
    assert usage.total_tokens > 0
    expected = 100000 - counted - usage.total_tokens - reserved
    deadline = time.monotonic() + 10
    while True:  # the stream's tokens are counted as its generator finishes, just after the last byte
        remaining, used = probe(1)
        if remaining == expected or time.monotonic() > deadline:
            break
        expected -= used  # each probe is counted too
        time.sleep(0.05)
    assert remaining == expected


def test_a_budget_refuses_a_request_that_may_cost_more_than_is_left(cluster: Cluster) -> None:
    """$0.000001 a day is less than one request's reservation (its input estimate and max_tokens): refused before
    anything is spent, on either process. The cluster tests hold a budget under concurrency through HAProxy."""
    for replica in (0, 1):
        with pytest.raises(openai.RateLimitError) as caught:
            chat(cluster.openai("thrifty", replica=replica))
        assert caught.value.code == "budget_exceeded"
        assert "per day" in caught.value.message
        assert "Lower max_tokens" in caught.value.message


def test_a_team_limit_is_shared_by_its_keys(cluster: Cluster) -> None:
    with pytest.raises(openai.PermissionDeniedError):  # the team's model list applies to its keys
        chat(cluster.openai("member1"), model="az/az-model")  # (the team counts it: it was admitted first)
    chat(cluster.openai("member2", replica=1))
    chat(cluster.openai("member1", replica=1))
    busy = refusal(cluster, lambda: chat(cluster.openai("member2")))
    assert 'team "squad"' in busy.message
    assert busy.response.headers["x-ratelimit-limit-requests"] == "3"


def test_the_metrics_count_rejections_and_spend_by_key_and_team(cluster: Cluster) -> None:
    refusal(cluster, lambda: [chat(cluster.openai("rpm5")) for _ in range(6)])
    text = httpx2.get(cluster.gateways[0].base_url + "/metrics").text
    assert 'gomodel_limit_rejections_total{key="rpm5",limit="rpm",team=""}' in text
    assert 'gomodel_spend_usd_total{key="member1",team="squad"}' in text or \
        'gomodel_spend_usd_total{key="rpm5",team=""}' in text
    assert "gomodel_limit_store_redis 1.0" in text


def test_a_gateway_whose_redis_is_away_still_serves_and_counts_per_process(
        tmp_path: Path, cluster: Cluster) -> None:
    dead = f"redis://127.0.0.1:{free_port()}/0"
    env = {"DATABASE_URL": cluster.database_url, "E2E_SIM_KEY": SIM_KEY, "GOMODEL_MASTER_KEY": "",
           "REDIS_URL": dead, "CELERY_BROKER_URL": ""}
    with run_gateway(tmp_path, env) as lonely, openai.OpenAI(
            api_key=cluster.secrets["anthropic1"], base_url=f"{lonely.base_url}/v1", max_retries=0) as client:
        chat(client, "an/an-model")  # Redis's count is out of reach: this process counts from zero
        with pytest.raises(openai.RateLimitError):
            chat(client, "an/an-model")  # and still holds the limit itself
        text = httpx2.get(lonely.base_url + "/metrics").text
        assert "gomodel_limit_store_fallback_total 2.0" in text
        assert "gomodel_limit_store_redis 0.0" in text
        log = lonely.log()
    assert log.count("LIMITS DEGRADED") == 1

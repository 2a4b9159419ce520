"""The real openai and anthropic SDKs against a running gateway routed to the simulator's Vertex AI (Gemini and
Claude publishers, embeddings, Claude's token count), each request carrying the access token the gateway minted
from a service-account file at a loopback OAuth endpoint; a provider whose token cannot be minted sends nothing."""

from __future__ import annotations

from collections.abc import Iterator
from pathlib import Path
from typing import Any

import anthropic
import openai
import pytest
import yaml

from routing.simulator.count_tokens import counted_tokens
from routing.simulator.server import SimulatorServer
from routing.simulator.wire.embeddings import embedding_vector
from tests.e2e.conftest import fresh_database
from tests.gateway_process import Gateway, run_gateway
from tests.gcp_token_server import TokenServer

pytestmark = pytest.mark.services

TOKEN = "ya29.e2e-token-1"
CAPS = ["text", "tools"]
PUBLISHERS = "/v1/projects/sim-project/locations/us-central1/publishers"


@pytest.fixture(scope="module")
def token_servers() -> Iterator[tuple[TokenServer, TokenServer]]:
    refusing = TokenServer(fail_with=(400, {"error": "invalid_grant", "error_description": "Account disabled"}))
    with TokenServer(fixed=TOKEN) as good, refusing:  # every provider minting from it gets the same token
        yield good, refusing


@pytest.fixture(scope="module")
def sim(token_servers: tuple[TokenServer, TokenServer]) -> Iterator[SimulatorServer]:
    # Only the minted token opens these models: any other bearer (or none) is a 401.
    locked = {"latency_ms": 2, "chunk_count": 4, "api_keys": [TOKEN]}
    models = {"gem-v": locked, "claude-v": locked, "emb-v": {**locked, "dimensions": 16}, "gem-broken": locked}
    with SimulatorServer(config={"models": models}) as server:
        yield server


@pytest.fixture(scope="module")
def gateway(tmp_path_factory: pytest.TempPathFactory, sim: SimulatorServer,
            token_servers: tuple[TokenServer, TokenServer]) -> Iterator[Gateway]:
    tmp = tmp_path_factory.mktemp("vertex")
    good, refusing = token_servers
    (tmp / "good").mkdir()
    (tmp / "refusing").mkdir()
    good_file, refusing_file = good.write_key_file(tmp / "good"), refusing.write_key_file(tmp / "refusing")
    cloud = {"base_url": sim.base_url, "region": "us-central1", "project": "sim-project"}
    config: dict[str, Any] = {
        "providers": [
            {"name": "vx", "kind": "vertex", "credentials_file": str(good_file), **cloud},
            {"name": "vc", "kind": "vertex_anthropic", "credentials_file": str(good_file), **cloud},
            {"name": "broken", "kind": "vertex", "credentials_file": str(refusing_file), **cloud},
        ],
        "models": [
            {"provider": "vx", "upstream": "gem-v", "capabilities": CAPS, "input_price": 1, "output_price": 2},
            {"provider": "vc", "upstream": "claude-v", "capabilities": CAPS, "input_price": 1, "output_price": 2},
            {"provider": "vx", "upstream": "emb-v", "endpoints": ["embeddings"], "dimensions": 16,
             "family": "text-embedding-005"},
            {"provider": "broken", "upstream": "gem-broken", "capabilities": CAPS},
        ],
    }
    path = tmp / "config.yaml"
    path.write_text(yaml.safe_dump(config))
    with fresh_database("vertex") as url:
        env = {"DATABASE_URL": url, "GOMODEL_CONFIG": str(path), "CELERY_BROKER_URL": "", "GOMODEL_AUTH": "open"}
        with run_gateway(Path(tmp), env) as running:
            yield running


def last_record(sim: SimulatorServer, model: str) -> dict[str, Any]:
    sim.wait_until_idle()
    return sim.received(model=model)[-1]


def assert_sent_with_the_token(record: dict[str, Any], path: str) -> None:
    assert record["path"] == PUBLISHERS + path
    assert record["status"] == 200
    assert record["auth"]["header"] == "authorization"
    assert record["auth"]["key_index"] == 0  # the simulator's only key: the token the gateway minted


@pytest.mark.parametrize(("model", "path"), [("vx/gem-v", "/google/models/gem-v:generateContent"),
                                             ("vc/claude-v", "/anthropic/models/claude-v:rawPredict")])
def test_the_openai_sdk_gets_answers_from_both_publishers(oai: openai.OpenAI, sim: SimulatorServer, model: str,
                                                          path: str) -> None:
    answer = oai.chat.completions.create(model=model, messages=[{"role": "user", "content": "hello vertex"}])

    assert answer.choices[0].message.content.endswith("hello vertex")
    assert answer.model == model
    assert answer.usage is not None
    assert answer.usage.completion_tokens > 0
    assert_sent_with_the_token(last_record(sim, model.split("/")[1]), path)


@pytest.mark.parametrize(("model", "path"), [("vx/gem-v", "/google/models/gem-v:streamGenerateContent"),
                                             ("vc/claude-v", "/anthropic/models/claude-v:streamRawPredict")])
def test_the_openai_sdk_streams_from_both_publishers(oai: openai.OpenAI, sim: SimulatorServer, model: str,
                                                     path: str) -> None:
    stream = oai.chat.completions.create(model=model, messages=[{"role": "user", "content": "stream vertex"}],
                                         stream=True, stream_options={"include_usage": True})
    chunks = list(stream)

    text = "".join(c.choices[0].delta.content or "" for c in chunks if c.choices)
    assert text.endswith("stream vertex")
    assert [c.choices[0].finish_reason for c in chunks if c.choices and c.choices[0].finish_reason] == ["stop"]
    assert chunks[-1].usage is not None
    record = last_record(sim, model.split("/")[1])
    assert record["stream"] is True
    assert_sent_with_the_token(record, path)


@pytest.mark.parametrize("model", ["vc/claude-v", "vx/gem-v"])
def test_the_anthropic_sdk_gets_messages_from_both_publishers(claude: anthropic.Anthropic, sim: SimulatorServer,
                                                              model: str) -> None:
    message = claude.messages.create(model=model, max_tokens=64, system="Be brief.",
                                     messages=[{"role": "user", "content": "hi claude"}])

    assert message.type == "message"
    assert message.model == model
    assert message.content[0].type == "text"
    assert message.content[0].text.endswith("hi claude")
    assert message.stop_reason == "end_turn"
    record = last_record(sim, model.split("/")[1])
    if model.startswith("vc/"):  # Anthropic's body with Vertex's version and the model in the path only
        assert record["body"]["anthropic_version"] == "vertex-2023-10-16"
        assert "model" not in record["body"]
        assert record["body"]["system"] == "Be brief."


@pytest.mark.parametrize("model", ["vc/claude-v", "vx/gem-v"])
def test_the_anthropic_sdk_streams_from_both_publishers(claude: anthropic.Anthropic, sim: SimulatorServer,
                                                        model: str) -> None:
    with claude.messages.stream(model=model, max_tokens=64,
                                messages=[{"role": "user", "content": "stream claude"}]) as stream:
        events = [event.type for event in stream]
        final = stream.get_final_message()

    assert events[0] == "message_start"
    assert events[-1] == "message_stop"
    assert final.content[0].text.endswith("stream claude")
    assert final.usage.output_tokens > 0
    assert last_record(sim, model.split("/")[1])["stream"] is True


def test_embeddings_come_from_predict_with_vertex_s_token_counts(oai: openai.OpenAI, sim: SimulatorServer) -> None:
    texts = ["vertex embeds this", "and this one"]

    answer = oai.embeddings.create(model="vx/emb-v", input=texts, dimensions=8)

    # The SDK asks for base64 (float32), so the floats come back to float32 precision.
    for got, text in zip(answer.data, texts, strict=True):
        assert got.embedding == pytest.approx(embedding_vector("emb-v", text, 8), abs=1e-6)
    assert answer.usage.prompt_tokens == sum((len(t) + 3) // 4 for t in texts)
    record = last_record(sim, "emb-v")
    assert record["path"] == PUBLISHERS + "/google/models/emb-v:predict"
    assert record["auth"]["key_index"] == 0


def test_claude_on_vertex_counts_tokens(claude: anthropic.Anthropic, sim: SimulatorServer) -> None:
    messages = [{"role": "user", "content": "how many tokens is this?"}]

    raw = claude.messages.with_raw_response.count_tokens(model="vc/claude-v", messages=messages)  # type: ignore[arg-type]

    assert raw.headers["x-gomodel-token-count"] == "provider"
    sent = {"model": "claude-v", "messages": messages, "anthropic_version": "vertex-2023-10-16"}
    assert raw.parse().input_tokens == counted_tokens(sent)
    assert last_record(sim, "claude-v")["path"] == PUBLISHERS + "/anthropic/models/count-tokens:rawPredict"


def test_a_provider_without_a_token_fails_as_a_configuration_error_and_sends_nothing(
        oai: openai.OpenAI, sim: SimulatorServer, gateway: Gateway, token_servers: tuple[TokenServer, TokenServer]
) -> None:
    with pytest.raises(openai.APIStatusError) as failed:
        oai.chat.completions.create(model="broken/gem-broken", messages=[{"role": "user", "content": "hi"}])

    assert failed.value.status_code == 502
    assert failed.value.body["code"] == "key_unavailable"  # type: ignore[index]
    assert sim.received(model="gem-broken") == []
    log = gateway.log()
    assert log.count("provider broken: cannot fetch a Google access token (RefreshError: invalid_grant") == 1
    _, refusing = token_servers
    assert refusing.private_key_pem.splitlines()[1] not in log
    assert TOKEN not in log

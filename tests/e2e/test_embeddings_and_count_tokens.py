"""The real openai SDK's embeddings.create and the anthropic SDK's messages.count_tokens against a running gateway.

Embedding models on an OpenAI-kind and a Gemini-kind simulated provider (one family, one size), a virtual
model over them that falls back after an injected 5xx, float and base64 encodings, list inputs; count_tokens
to an Anthropic-kind provider (counted there) and to an OpenAI-kind one (the marked estimate). The audit
revision of each request records its endpoint.
"""

from __future__ import annotations

import tempfile
import time
from collections.abc import Iterator
from pathlib import Path
from typing import Any

import anthropic
import openai
import psycopg
import pytest
import schemathesis
import yaml
from hypothesis import HealthCheck, Phase, given, settings
from psycopg.rows import dict_row
from schemathesis.generation import GenerationMode

from routing.simulator.server import SimulatorServer
from routing.simulator.wire.embeddings import embedding_vector
from tests.e2e.conftest import SIM_KEY, fresh_database, gateway_config
from tests.gateway_process import Gateway, run_gateway

pytestmark = pytest.mark.services

EMBEDDER = {"endpoints": ["embeddings"], "dimensions": 8, "family": "sim-embed", "input_price": 0.02}


@pytest.fixture(scope="module")
def embed_gateway(simulator: SimulatorServer) -> Iterator[Gateway]:
    config = gateway_config(simulator.base_url)
    config["models"] += [{"provider": "oa", "upstream": "oa-embed", **EMBEDDER},
                         {"provider": "ge", "upstream": "ge-embed", **EMBEDDER}]
    config["virtual_models"].append({"source": "embed-pool", "strategy": "failover",
                                     "targets": [{"model": "oa/oa-embed"}, {"model": "ge/ge-embed"}]})
    with tempfile.TemporaryDirectory() as tmp, fresh_database("embed") as url:
        path = Path(tmp) / "config.yaml"
        path.write_text(yaml.safe_dump(config))
        env = {"DATABASE_URL": url, "GOMODEL_CONFIG": str(path), "E2E_SIM_KEY": SIM_KEY, "GOMODEL_MASTER_KEY": "",
               "GOMODEL_AUTH": "open", "CELERY_BROKER_URL": ""}
        with run_gateway(Path(tmp), env) as gateway:
            gateway.database_url = url  # type: ignore[attr-defined]
            yield gateway


@pytest.fixture
def oai(embed_gateway: Gateway, simulator: SimulatorServer) -> Iterator[openai.OpenAI]:
    simulator.clear_faults()
    with openai.OpenAI(base_url=f"{embed_gateway.base_url}/v1", api_key="unused-on-loopback",
                       max_retries=0) as client:
        yield client
    simulator.clear_faults()


@pytest.fixture
def claude(embed_gateway: Gateway) -> Iterator[anthropic.Anthropic]:
    with anthropic.Anthropic(base_url=embed_gateway.base_url, api_key="unused-on-loopback", max_retries=0) as client:
        yield client


def audit_row(gateway: Gateway, request_id: str, timeout: float = 10.0) -> dict[str, Any]:
    deadline = time.monotonic() + timeout
    url = gateway.database_url.replace("postgres://", "postgresql://")  # type: ignore[attr-defined]
    with psycopg.connect(url, row_factory=dict_row) as conn:
        while True:
            row = conn.execute("SELECT * FROM audit_auditrevision WHERE request_id = %s", (request_id,)).fetchone()
            if row is not None:
                return row
            if time.monotonic() > deadline:
                raise AssertionError(f"no audit revision for {request_id}")
            time.sleep(0.1)


@pytest.mark.parametrize(("model", "upstream"), [("oa/oa-embed", "oa-embed"), ("ge/ge-embed", "ge-embed")])
def test_float_embeddings_of_a_list(oai: openai.OpenAI, embed_gateway: Gateway, model: str, upstream: str) -> None:
    raw = oai.embeddings.with_raw_response.create(model=model, input=["first text", "second text"],
                                                  encoding_format="float")
    result = raw.parse()
    assert [item.index for item in result.data] == [0, 1]
    assert result.data[1].embedding == pytest.approx(embedding_vector(upstream, "second text", 8), abs=1e-6)
    assert result.model == model
    assert result.usage.prompt_tokens == 6
    assert raw.headers["x-gomodel-target"] == model
    assert float(raw.headers["x-gomodel-cost-usd"]) > 0
    assert raw.headers.get("x-gomodel-usage") == ("estimate" if upstream == "ge-embed" else None)
    assert audit_row(embed_gateway, raw.headers["x-request-id"])["endpoint"] == "embeddings"


@pytest.mark.parametrize("model", ["oa/oa-embed", "ge/ge-embed"])
def test_base64_embeddings_decode_to_the_same_vectors(oai: openai.OpenAI, model: str) -> None:
    # The SDK asks for base64 unless told otherwise and decodes it into floats itself.
    result = oai.embeddings.create(model=model, input="hello there")
    upstream = model.split("/")[1]
    assert result.data[0].embedding == pytest.approx(embedding_vector(upstream, "hello there", 8), abs=1e-6)


def test_a_virtual_model_falls_back_after_a_5xx(oai: openai.OpenAI, simulator: SimulatorServer) -> None:
    simulator.set_fault("oa-embed", {"kind": "status", "status": 503, "times": 1})
    raw = oai.embeddings.with_raw_response.create(model="embed-pool", input=["a", "b", "c"])
    result = raw.parse()
    assert raw.headers["x-gomodel-target"] == "ge/ge-embed"
    assert raw.headers["x-gomodel-attempts"] == "2"
    assert len(result.data) == 3
    assert result.data[2].embedding == pytest.approx(embedding_vector("ge-embed", "c", 8), abs=1e-6)


def test_a_chat_model_is_refused_naming_the_endpoint(oai: openai.OpenAI) -> None:
    with pytest.raises(openai.BadRequestError) as refused:
        oai.embeddings.create(model="oa/oa-model", input="x")
    assert "does not serve the embeddings endpoint" in str(refused.value)
    with pytest.raises(openai.BadRequestError):
        oai.chat.completions.create(model="embed-pool", messages=[{"role": "user", "content": "hi"}])


def test_models_list_their_endpoints(oai: openai.OpenAI) -> None:
    listed = {m.id: m.model_extra["endpoints"] for m in oai.models.list()}  # type: ignore[index]
    assert listed["embed-pool"] == ["embeddings"]
    assert listed["oa/oa-model"] == ["chat"]


def test_count_tokens_at_an_anthropic_provider(claude: anthropic.Anthropic, embed_gateway: Gateway) -> None:
    raw = claude.messages.with_raw_response.count_tokens(
        model="an/an-model", system="Be brief.", messages=[{"role": "user", "content": "Count me, please."}])
    assert raw.parse().input_tokens > 85  # the simulated provider's count includes its overhead
    assert raw.headers["x-gomodel-token-count"] == "provider"
    assert raw.headers["x-gomodel-target"] == "an/an-model"
    assert audit_row(embed_gateway, raw.headers["x-request-id"])["endpoint"] == "count_tokens"


def test_count_tokens_elsewhere_is_a_marked_estimate(claude: anthropic.Anthropic) -> None:
    raw = claude.messages.with_raw_response.count_tokens(
        model="oa/oa-model", messages=[{"role": "user", "content": "x" * 400}])
    assert raw.parse().input_tokens == 100
    assert raw.headers["x-gomodel-token-count"] == "estimate"


FUZZED_MODELS = ["oa/oa-embed", "ge/ge-embed", "embed-pool", "oa/oa-model", "an/an-model", "no-such-model"]


def fuzz_spec() -> dict[str, Any]:
    spec = yaml.safe_load((Path(__file__).resolve().parents[2] / "routing" / "api" / "openapi.yaml").read_text())
    for name in ("EmbeddingsRequest", "CountTokensRequest"):
        spec["components"]["schemas"][name]["properties"]["model"] = {"type": "string", "enum": FUZZED_MODELS}
    spec["components"]["parameters"]["Deadline"]["schema"] = {"type": "integer", "minimum": 10000, "maximum": 60000}
    return spec


@pytest.mark.slow
@pytest.mark.parametrize("mode", [GenerationMode.POSITIVE, GenerationMode.NEGATIVE], ids=["valid", "invalid"])
@pytest.mark.parametrize("path", ["/v1/embeddings", "/v1/messages/count_tokens"])
def test_no_input_gets_a_server_error(embed_gateway: Gateway, path: str, mode: GenerationMode) -> None:
    operation = schemathesis.openapi.from_dict(fuzz_spec())[path]["POST"]
    seen: list[int] = []

    @given(operation.as_strategy(generation_mode=mode))
    @settings(max_examples=40, deadline=None, database=None, phases=[Phase.explicit, Phase.generate],
              suppress_health_check=list(HealthCheck))
    def fuzz(case: Any) -> None:
        response = case.call(base_url=embed_gateway.base_url, timeout=30)
        seen.append(response.status_code)
        assert response.status_code < 500, f"{response.status_code}: {response.text[:300]}\n{case.as_curl_command()}"
        if response.status_code >= 400:
            assert "error" in response.json()  # always the client's error envelope, never a traceback

    fuzz()
    assert seen

"""The real openai SDK's embeddings.create through a running gateway to a Cohere provider (Embed v2 on the
simulator): the vectors, Cohere's billed tokens, the input_type default and the client's choice through
extra_body, base64, what Cohere cannot take refused naming the field, and a fallback after a 429."""

from __future__ import annotations

import tempfile
from collections.abc import Iterator
from pathlib import Path

import openai
import pytest
import yaml

from routing.simulator.server import SimulatorServer
from routing.simulator.wire.embeddings import embedding_vector
from tests.e2e.conftest import SIM_KEY, fresh_database, gateway_config
from tests.gateway_process import Gateway, run_gateway

pytestmark = pytest.mark.services

EMBEDDER = {"endpoints": ["embeddings"], "dimensions": 8, "family": "sim-embed", "input_price": 0.1}


@pytest.fixture(scope="module")
def cohere_gateway(simulator: SimulatorServer) -> Iterator[Gateway]:
    config = gateway_config(simulator.base_url)
    config["providers"].append({"name": "co", "kind": "cohere", "base_url": simulator.base_url,
                                "api_key": "${E2E_SIM_KEY}"})
    config["models"] += [{"provider": "co", "upstream": "co-embed", **EMBEDDER},
                         {"provider": "oa", "upstream": "oa-embed", **EMBEDDER}]
    config["virtual_models"].append({"source": "cohere-pool", "strategy": "failover",
                                     "targets": [{"model": "co/co-embed"}, {"model": "oa/oa-embed"}]})
    with tempfile.TemporaryDirectory() as tmp, fresh_database("cohere_embed") as url:
        path = Path(tmp) / "config.yaml"
        path.write_text(yaml.safe_dump(config))
        env = {"DATABASE_URL": url, "GOMODEL_CONFIG": str(path), "E2E_SIM_KEY": SIM_KEY, "GOMODEL_MASTER_KEY": "",
               "GOMODEL_AUTH": "open", "CELERY_BROKER_URL": ""}
        with run_gateway(Path(tmp), env) as gateway:
            yield gateway


@pytest.fixture
def oai(cohere_gateway: Gateway, simulator: SimulatorServer) -> Iterator[openai.OpenAI]:
    simulator.clear_faults()
    with openai.OpenAI(base_url=f"{cohere_gateway.base_url}/v1", api_key="unused-on-loopback",
                       max_retries=0) as client:
        yield client
    simulator.clear_faults()


def last_body(simulator: SimulatorServer, model: str) -> dict[str, object]:
    simulator.wait_until_idle()
    return dict(simulator.received(model)[-1]["body"])


def test_float_embeddings_come_from_cohere_with_its_billed_tokens(oai: openai.OpenAI,
                                                                   simulator: SimulatorServer) -> None:
    raw = oai.embeddings.with_raw_response.create(model="co/co-embed", input=["first text", "second text"],
                                                  encoding_format="float")
    result = raw.parse()

    assert [item.index for item in result.data] == [0, 1]
    assert result.data[1].embedding == pytest.approx(embedding_vector("co-embed", "second text", 8), abs=1e-6)
    assert result.model == "co/co-embed"
    assert result.usage.prompt_tokens == 6  # the simulator's billed units: 3 + 3
    assert raw.headers["x-gomodel-target"] == "co/co-embed"
    assert raw.headers.get("x-gomodel-usage") is None  # counted by the provider, not estimated
    assert last_body(simulator, "co-embed") == {"model": "co-embed", "texts": ["first text", "second text"],
                                                "input_type": "search_document", "embedding_types": ["float"]}


def test_the_sdk_default_base64_decodes_to_the_same_vectors(oai: openai.OpenAI) -> None:
    result = oai.embeddings.create(model="co/co-embed", input="hello")  # the SDK asks for base64 and decodes

    assert result.data[0].embedding == pytest.approx(embedding_vector("co-embed", "hello", 8), abs=1e-6)


def test_the_client_chooses_input_type_and_dimensions(oai: openai.OpenAI, simulator: SimulatorServer) -> None:
    result = oai.embeddings.create(model="co/co-embed", input="what is a gateway?", dimensions=4,
                                   encoding_format="float", extra_body={"input_type": "search_query"})

    assert result.data[0].embedding == pytest.approx(embedding_vector("co-embed", "what is a gateway?", 4), abs=1e-6)
    body = last_body(simulator, "co-embed")
    assert body["input_type"] == "search_query"
    assert body["output_dimension"] == 4


@pytest.mark.parametrize(("extra", "param"), [
    ({"input": [[1, 2, 3]]}, "input"),
    ({"input": "x", "extra_body": {"input_type": "search"}}, "input_type"),
])
def test_what_cohere_cannot_take_is_a_400_naming_the_field(oai: openai.OpenAI, extra: dict[str, object],
                                                           param: str) -> None:
    with pytest.raises(openai.BadRequestError) as refused:
        oai.embeddings.create(model="co/co-embed", **extra)  # type: ignore[arg-type]

    assert refused.value.status_code == 400
    assert isinstance(refused.value.body, dict)
    assert refused.value.body.get("param") == param


def test_a_virtual_model_falls_back_from_cohere_after_a_429(oai: openai.OpenAI, simulator: SimulatorServer) -> None:
    simulator.set_fault("co-embed", {"kind": "rate_limit", "retry_after": 1, "times": 1})

    raw = oai.embeddings.with_raw_response.create(model="cohere-pool", input=["a", "b"], encoding_format="float")

    assert raw.headers["x-gomodel-target"] == "oa/oa-embed"
    assert raw.headers["x-gomodel-attempts"] == "2"
    assert raw.parse().data[0].embedding == pytest.approx(embedding_vector("oa-embed", "a", 8), abs=1e-6)

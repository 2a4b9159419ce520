"""A model whose public name has a slash also answers to its slash-free alias (each ``/`` spelled ``--``), for
clients that read a slash as a provider prefix of their own (the OpenAI Agents SDK): with the real SDKs through a
running gateway, on chat, Responses and Messages, the alias is served by its model and answered under its public
name, and a key limited to a model may use that model's alias and no other."""

from __future__ import annotations

from collections.abc import Iterator
from pathlib import Path

import anthropic
import openai
import pytest
import yaml

from routing.simulator.server import SimulatorServer
from tests.e2e.conftest import SIM_KEY, fresh_database, gateway_config, manage
from tests.gateway_process import Gateway, run_gateway

pytestmark = pytest.mark.services


@pytest.mark.parametrize(("alias", "model"), [("oa--oa-model", "oa/oa-model"), ("an--an-model", "an/an-model")])
def test_the_slash_free_alias_is_served_by_its_model(oai: openai.OpenAI, claude: anthropic.Anthropic, alias: str,
                                                     model: str) -> None:
    chat = oai.chat.completions.with_raw_response.create(model=alias, messages=[{"role": "user", "content": "Hi"}])
    responses = oai.responses.with_raw_response.create(model=alias, input="Hi", store=False)
    messages = claude.messages.with_raw_response.create(model=alias, max_tokens=50,
                                                        messages=[{"role": "user", "content": "Hi"}])
    for raw in (chat, responses, messages):
        assert raw.headers["x-gomodel-target"] == model
        assert raw.parse().model == model


@pytest.fixture(scope="module")
def limited(tmp_path_factory: pytest.TempPathFactory, simulator: SimulatorServer) -> Iterator[tuple[Gateway, str]]:
    tmp = tmp_path_factory.mktemp("aliases")
    config = tmp / "config.yaml"
    config.write_text(yaml.safe_dump(gateway_config(simulator.base_url)))
    with fresh_database("aliases") as url:
        manage(url, "loadconfig", str(config), env={"E2E_SIM_KEY": SIM_KEY})
        key = manage(url, "createkey", "only-oa", "--model", "oa/oa-model").strip()
        env = {"DATABASE_URL": url, "E2E_SIM_KEY": SIM_KEY, "GOMODEL_MASTER_KEY": "", "CELERY_BROKER_URL": ""}
        with run_gateway(Path(tmp), env) as gateway:
            yield gateway, key


def test_a_key_limited_to_a_model_may_use_its_alias_and_no_other(limited: tuple[Gateway, str]) -> None:
    gateway, key = limited
    with openai.OpenAI(base_url=f"{gateway.base_url}/v1", api_key=key, max_retries=0) as client:
        answer = client.chat.completions.create(model="oa--oa-model", messages=[{"role": "user", "content": "Hi"}])
        assert answer.model == "oa/oa-model"
        with pytest.raises(openai.PermissionDeniedError) as refused:
            client.chat.completions.create(model="an--an-model", messages=[{"role": "user", "content": "Hi"}])
    assert refused.value.code == "model_not_allowed"

"""One gateway for the whole compatibility suite, keyed as in production, in front of the provider simulator."""

from __future__ import annotations

import os
from collections.abc import Iterator
from dataclasses import dataclass
from pathlib import Path

import pytest
import yaml

from routing.simulator.server import SimulatorServer
from tests.compat.scenario import KINDS, Kind
from tests.e2e.conftest import SIM_KEY, SIM_MODELS, fresh_database, gateway_config, manage
from tests.gateway_process import run_gateway

# LiteLLM fetches its model price list from the internet when imported unless told to read the copy it ships; the
# suite's machines reach no such host, and a client of the gateway needs none of it.
os.environ.setdefault("LITELLM_LOCAL_MODEL_COST_MAP", "True")


@dataclass(frozen=True)
class Compat:
    base_url: str  # the gateway's root, no path
    key: str  # a gateway key, sent as each library sends keys
    simulator: SimulatorServer

    @property
    def openai_url(self) -> str:
        return f"{self.base_url}/v1"


@pytest.fixture(scope="session")
def compat(tmp_path_factory: pytest.TempPathFactory) -> Iterator[Compat]:
    tmp = tmp_path_factory.mktemp("compat")
    with SimulatorServer(config={"models": SIM_MODELS}) as simulator, fresh_database("compat") as url:
        config = tmp / "config.yaml"
        config.write_text(yaml.safe_dump(gateway_config(simulator.base_url)))
        manage(url, "loadconfig", str(config), env={"E2E_SIM_KEY": SIM_KEY})
        key = manage(url, "createkey", "compat-clients").strip()
        env = {"DATABASE_URL": url, "E2E_SIM_KEY": SIM_KEY, "GOMODEL_MASTER_KEY": "", "CELERY_BROKER_URL": ""}
        with run_gateway(Path(tmp), env) as gateway:
            yield Compat(gateway.base_url, key, simulator)


@pytest.fixture(params=KINDS, ids=[kind.name for kind in KINDS])
def kind(request: pytest.FixtureRequest, compat: Compat) -> Kind:
    compat.simulator.clear_faults()
    param: Kind = request.param
    return param

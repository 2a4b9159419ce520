"""Schemathesis fuzzes the published OpenAPI description against a running gateway: never a 5xx.

Valid bodies (with the model restricted to configured names, so they reach every adapter and the
simulator) and invalid ones (negative generation) are both sent; either way the answer is < 500.
"""

from __future__ import annotations

import copy
from pathlib import Path
from typing import Any

import httpx2
import pytest
import schemathesis
import yaml
from hypothesis import HealthCheck, Phase, given, settings
from schemathesis.generation import GenerationMode

from tests.gateway_process import Gateway

pytestmark = [pytest.mark.services, pytest.mark.slow]

SPEC = yaml.safe_load((Path(__file__).resolve().parents[2] / "routing" / "api" / "openapi.yaml").read_text())
MODELS = ["oa/oa-model", "az/az-model", "an/an-model", "ge/ge-model", "normal", "pool", "no-such-model"]
OPERATIONS = [("/v1/chat/completions", "POST"), ("/v1/messages", "POST"), ("/v1/routing/explain", "POST"),
              ("/v1/models", "GET"), ("/v1/ledger/claim", "POST"), ("/v1/ledger/complete", "POST"),
              ("/v1/ledger/entry/{execution_key}", "GET")]


def spec_with_known_models() -> dict[str, Any]:
    spec = copy.deepcopy(SPEC)
    for name in ("ChatCompletionRequest", "MessagesRequest"):
        spec["components"]["schemas"][name]["properties"]["model"] = {"type": "string", "enum": MODELS}
    # A deadline the client sets tighter than the upstream can answer is a documented 504, not a crash:
    # fuzz with deadlines the simulator always meets, so that any 5xx left is the gateway's fault.
    spec["components"]["parameters"]["Deadline"]["schema"] = {"type": "integer", "minimum": 10000,
                                                               "maximum": 60000}
    return spec


def test_the_published_description_is_served(gateway: Gateway) -> None:
    served = httpx2.get(f"{gateway.base_url}/v1/openapi.json").json()
    assert served == SPEC


@pytest.mark.parametrize("mode", [GenerationMode.POSITIVE, GenerationMode.NEGATIVE], ids=["valid", "invalid"])
@pytest.mark.parametrize(("path", "method"), OPERATIONS)
def test_no_input_gets_a_server_error(gateway: Gateway, path: str, method: str, mode: GenerationMode) -> None:
    schema = schemathesis.openapi.from_dict(spec_with_known_models())
    operation = schema[path][method]
    seen: list[int] = []

    @given(operation.as_strategy(generation_mode=mode))
    @settings(max_examples=40, deadline=None, database=None, phases=[Phase.explicit, Phase.generate],
              suppress_health_check=list(HealthCheck))
    def fuzz(case: Any) -> None:
        response = case.call(base_url=gateway.base_url, timeout=30)
        seen.append(response.status_code)
        assert response.status_code < 500, f"{response.status_code}: {response.text[:300]}\n{case.as_curl_command()}"
        if response.status_code >= 400 and path != "/v1/models":
            body = response.json()
            assert "error" in body, body  # always the client's error envelope, never a traceback

    fuzz()
    assert seen

"""A contract's JSON schema is checked as a client's is: the admin and the config file refuse what the gateway
would not evaluate, such as a pattern RE2 cannot compile, and accept RE2 syntax Python's re lacks."""

from __future__ import annotations

from typing import Any

import pytest
from django.core.exceptions import ValidationError

from routing import models as m
from routing.config.file.parse import parse_config
from routing.config.file.schema import ConfigError

pytestmark = pytest.mark.django_db

BACKREFERENCE = {"type": "object", "properties": {"code": {"type": "string", "pattern": "^(a)\\1$"}}}
LETTERS = {"type": "object", "properties": {"name": {"type": "string", "pattern": "^\\p{L}+$"}}}


def config_with(schema: dict[str, Any]) -> dict[str, Any]:
    return {"contracts": [{"workload": "extract", "structured_output": {"required": True, "schema": schema}}]}


def test_it_refuses_a_contract_pattern_re2_cannot_compile_in_the_config_file() -> None:
    with pytest.raises(ConfigError) as caught:
        parse_config(config_with(BACKREFERENCE))
    (problem,) = caught.value.problems
    assert problem.startswith("contracts[0].structured_output.schema: Invalid JSON schema: "
                              "/properties/code/pattern: RE2 cannot compile it"), problem


def test_it_refuses_it_in_the_admin_naming_the_schema_field() -> None:
    contract = m.Contract(workload="extract", structured_output_required=True, schema=BACKREFERENCE)
    with pytest.raises(ValidationError) as caught:
        contract.full_clean()
    (message,) = caught.value.message_dict["schema"]
    assert message.startswith("Invalid JSON schema: /properties/code/pattern: RE2 cannot compile it"), message


def test_it_accepts_re2_syntax_that_pythons_re_would_refuse() -> None:
    parsed = parse_config(config_with(LETTERS))
    assert parsed["contracts"][0]["structured_output"]["schema"] == LETTERS
    m.Contract(workload="extract", structured_output_required=True, schema=LETTERS).full_clean()

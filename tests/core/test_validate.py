"""Validation before acceptance: the pipeline's stages, its order, and that nothing is repaired."""

from __future__ import annotations

from collections.abc import Mapping
from typing import Any

import pytest

from routing.core.answer import Answer, ToolCall
from routing.core.contracts import effective_contract
from routing.core.outcome import ErrorClass
from routing.core.requirements import DeclaredTool, Requirements
from routing.core.table import ContractSpec
from routing.core.validate import AnswerVerdict, ValidationRules, validate_answer
from routing.schema.engine import validate_instance

INVOICE = {
    "type": "object",
    "required": ["total", "currency"],
    "properties": {"total": {"type": "number", "minimum": 0}, "currency": {"enum": ["EUR", "USD"]}},
    "additionalProperties": False,
}
WEATHER = {"type": "object", "required": ["city"], "properties": {"city": {"type": "string"}},
           "additionalProperties": False}
TOOLS = (DeclaredTool("get_weather", WEATHER), DeclaredTool("ping", None), DeclaredTool("sql", None, freeform=True))


def check(answer: Answer | None, rules: ValidationRules, **kwargs: Any) -> AnswerVerdict:
    return validate_answer(answer, rules, schema_validator=validate_instance, **kwargs)


def call(name: str, arguments: str) -> ToolCall:
    return ToolCall(id="call_1", name=name, arguments=arguments)


STRUCTURED = ValidationRules(refuse_truncation=True, json_required=True, schemas=(INVOICE,))
WITH_TOOLS = ValidationRules(tools=TOOLS)

CASES: list[tuple[str, Answer | None, ValidationRules, str]] = [
    ("valid structured output", Answer('{"total": 12.5, "currency": "EUR"}', "stop"), STRUCTURED, "ok"),
    ("surrounding whitespace is normalised", Answer('\n  {"total": 1, "currency": "USD"}\n\t', "stop"),
     STRUCTURED, "ok"),
    ("a code fence is not stripped", Answer('```json\n{"total": 1, "currency": "USD"}\n```', "stop"),
     STRUCTURED, "schema"),
    ("prose around the JSON is not stripped", Answer('Here you go: {"total": 1, "currency": "USD"}', "stop"),
     STRUCTURED, "schema"),
    ("a missing field is not guessed", Answer('{"total": 1}', "stop"), STRUCTURED, "schema"),
    ("wrong type", Answer('{"total": "12", "currency": "EUR"}', "stop"), STRUCTURED, "schema"),
    ("enum violation", Answer('{"total": 1, "currency": "EURO"}', "stop"), STRUCTURED, "schema"),
    ("extra field", Answer('{"total": 1, "currency": "EUR", "x": 1}', "stop"), STRUCTURED, "schema"),
    ("NaN is not JSON", Answer('{"total": NaN, "currency": "EUR"}', "stop"), STRUCTURED, "schema"),
    ("empty output", Answer("", "stop"), STRUCTURED, "schema"),
    ("truncated structured output", Answer('{"total": 1, "curr', "length"), STRUCTURED, "truncated"),
    ("content filter cut", Answer('{"total": 1, "currency": "EUR"}', "content_filter"), STRUCTURED, "truncated"),
    ("truncated chat answer is accepted", Answer("Once upon a", "length"), ValidationRules(), "ok"),
    ("envelope unparseable", None, ValidationRules(), "malformed"),
    ("valid tool call", Answer("", "tool_calls", (call("get_weather", '{"city": "Paris"}'),)), WITH_TOOLS, "ok"),
    ("tool call with whitespace around arguments", Answer("", "tool_calls", (call("get_weather", ' {"city":"P"} '),)),
     WITH_TOOLS, "ok"),
    ("tool without a schema takes any object", Answer("", "tool_calls", (call("ping", '{"a": [1]}'),)),
     WITH_TOOLS, "ok"),
    ("freeform tool takes plain text", Answer("", "tool_calls", (call("sql", "SELECT 1"),)), WITH_TOOLS, "ok"),
    ("unknown tool", Answer("", "tool_calls", (call("delete_everything", "{}"),)), WITH_TOOLS, "tool_call"),
    ("arguments not JSON", Answer("", "tool_calls", (call("get_weather", "{city: Paris}"),)), WITH_TOOLS,
     "tool_call"),
    ("arguments not an object", Answer("", "tool_calls", (call("ping", "[1, 2]"),)), WITH_TOOLS, "tool_call"),
    ("empty arguments are not repaired", Answer("", "tool_calls", (call("ping", ""),)), WITH_TOOLS, "tool_call"),
    ("arguments against the schema", Answer("", "tool_calls", (call("get_weather", '{"town": "Paris"}'),)),
     WITH_TOOLS, "tool_call"),
    ("one bad call among good ones", Answer("", "tool_calls", (
        call("get_weather", '{"city": "Paris"}'), call("get_weather", '{"city": 7}'))), WITH_TOOLS, "tool_call"),
    ("tool call when none were declared", Answer("", "tool_calls", (call("ping", "{}"),)), ValidationRules(),
     "tool_call"),
    ("tool call when tool_choice is none", Answer("", "tool_calls", (call("ping", "{}"),)),
     ValidationRules(tools=TOOLS, tool_choice="none"), "tool_call"),
    ("no call when one is required", Answer("It is sunny.", "stop"),
     ValidationRules(tools=TOOLS, tool_choice="required"), "tool_call"),
    ("another tool than the forced one", Answer("", "tool_calls", (call("ping", "{}"),)),
     ValidationRules(tools=TOOLS, tool_choice="required", forced_tool="get_weather"), "tool_call"),
    ("a tool-calling turn skips the structured-output check",
     Answer("Let me look that up.", "tool_calls", (call("get_weather", '{"city": "Paris"}'),)),
     ValidationRules(tools=TOOLS, json_required=True, schemas=(INVOICE,)), "ok"),
    ("a truncated tool call is refused by its arguments", Answer("", "length", (call("get_weather", '{"ci'),)),
     WITH_TOOLS, "tool_call"),
    ("required finish reason", Answer("done", "length"), ValidationRules(required_finish_reason="stop"),
     "truncated"),
    ("required finish reason allows a tool turn", Answer("", "tool_calls", (call("ping", "{}"),)),
     ValidationRules(tools=TOOLS, required_finish_reason="stop"), "ok"),
    ("too short", Answer("  ok  ", "stop"), ValidationRules(min_output_chars=3), "too_short"),
    ("long enough", Answer(" okay ", "stop"), ValidationRules(min_output_chars=3), "ok"),
]


@pytest.mark.parametrize(("answer", "rules", "reason"), [c[1:] for c in CASES], ids=[c[0] for c in CASES])
def test_it_runs_the_acceptance_pipeline(answer: Answer | None, rules: ValidationRules, reason: str) -> None:
    verdict = check(answer, rules)
    assert verdict.reason == reason
    assert verdict.ok is (reason == "ok")


def test_it_refuses_an_answer_whose_transport_did_not_complete() -> None:
    verdict = check(Answer('{"total": 1, "currency": "EUR"}', "stop"), STRUCTURED, transport_complete=False)
    assert (verdict.ok, verdict.reason) == (False, "malformed")


def test_it_reports_the_first_failing_stage() -> None:
    # Truncated, with an unknown tool and a schema violation: truncation is checked first.
    answer = Answer("{", "length", (call("nope", "{}"),))
    rules = ValidationRules(refuse_truncation=True, tools=TOOLS, json_required=True, schemas=(INVOICE,))
    assert check(answer, rules).reason == "truncated"


def test_it_says_what_failed_without_quoting_the_output() -> None:
    verdict = check(Answer('{"total": -5, "currency": "SECRET-VALUE"}', "stop"), STRUCTURED)
    assert verdict.reason == "schema"
    assert any("/currency" in d and "enum" in d for d in verdict.details)
    assert any("/total" in d and "minimum" in d for d in verdict.details)
    assert not any("SECRET-VALUE" in d for d in verdict.details)


def test_it_names_a_missing_required_field() -> None:
    verdict = check(Answer('{"total": 1}', "stop"), STRUCTURED)
    assert verdict.details == ('/: required ["currency"]',)


def test_it_validates_against_every_original_schema() -> None:
    contract_schema = {"type": "object", "required": ["total"]}
    request_schema = {"type": "object", "required": ["currency"]}
    rules = ValidationRules(json_required=True, schemas=(contract_schema, request_schema))
    assert check(Answer('{"total": 1, "currency": "EUR"}', "stop"), rules).ok
    assert check(Answer('{"total": 1}', "stop"), rules).reason == "schema"


def test_it_runs_the_operators_checks_last() -> None:
    def total_matches_lines(answer: Answer) -> str | None:
        return None if '"total": 3' in answer.text else "total does not match the line items"

    rules = ValidationRules(json_required=True, schemas=(INVOICE,), extra_checks=(total_matches_lines,))
    assert check(Answer('{"total": 3, "currency": "EUR"}', "stop"), rules).ok
    verdict = check(Answer('{"total": 4, "currency": "EUR"}', "stop"), rules)
    assert (verdict.reason, verdict.details) == (
        "custom", ("test_it_runs_the_operators_checks_last.<locals>.total_matches_lines: "
                   "total does not match the line items",))


def test_it_rejects_instead_of_crashing_when_an_operator_check_raises() -> None:
    def broken(answer: Answer) -> str | None:
        raise KeyError("oops")

    verdict = check(Answer("fine", "stop"), ValidationRules(extra_checks=(broken,)))
    assert verdict.reason == "custom"
    assert "raised KeyError" in verdict.details[0]


def test_it_calls_the_schema_validator_it_is_given() -> None:
    seen: list[tuple[Mapping[str, Any], Any]] = []

    def validator(schema: Mapping[str, Any], instance: Any) -> list[str]:
        seen.append((schema, instance))
        return ["/: nope"]

    verdict = validate_answer(Answer('{"a": 1}', "stop"), ValidationRules(schemas=(WEATHER,)),
                              schema_validator=validator)
    assert seen == [(WEATHER, {"a": 1})]
    assert (verdict.reason, verdict.details) == ("schema", ("/: nope",))


def test_it_turns_a_rejection_into_an_invalid_response_outcome() -> None:
    verdict = check(Answer("{", "length"), STRUCTURED)
    outcome = verdict.as_outcome(latency_s=1.25)
    assert (outcome.ok, outcome.error_class, outcome.reason, outcome.status, outcome.latency_s) == (
        False, ErrorClass.INVALID_RESPONSE, "truncated", 200, 1.25)
    accepted = check(Answer("hi", "stop"), ValidationRules()).as_outcome(latency_s=0.5)
    assert accepted.ok
    assert accepted.latency_s == 0.5


def test_it_builds_rules_from_the_effective_contract() -> None:
    spec = ContractSpec(workload="invoice", schema=INVOICE, structured_output_required=True, min_output_chars=5,
                        required_finish_reason="stop")
    requirements = Requirements(tools=TOOLS, tool_choice="required", forced_tool="get_weather")
    rules = ValidationRules.from_contract(effective_contract(requirements, spec), extra_checks=[len])  # type: ignore[list-item]
    assert rules.refuse_truncation
    assert rules.json_required
    assert rules.schemas == (INVOICE,)
    assert (rules.tools, rules.tool_choice, rules.forced_tool) == (TOOLS, "required", "get_weather")
    assert (rules.min_output_chars, rules.required_finish_reason) == (5, "stop")
    assert rules.extra_checks == (len,)


def test_it_refuses_an_unlisted_property_only_under_a_strict_contract() -> None:
    loose = {"type": "object", "required": ["total"], "properties": {"total": {"type": "number"}}}
    answer = Answer('{"total": 1, "note": "extra"}', "stop")
    for strict, reason in [(False, "ok"), (True, "schema")]:
        spec = ContractSpec(workload="w", schema=loose, structured_output_required=True, strict=strict)
        rules = ValidationRules.from_contract(effective_contract(Requirements(), spec))
        assert check(answer, rules).reason == reason

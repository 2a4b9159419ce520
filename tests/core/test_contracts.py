"""Workload contracts: merging a request's needs with its contract, filtering and ranking candidates."""

from __future__ import annotations

import pytest

from routing.core.contracts import (
    DEFAULT_EXPECTED_OUTPUT_TOKENS,
    EffectiveContract,
    effective_contract,
    estimate_cost_usd,
    filter_candidates,
    rank,
    strict_schema,
)
from routing.core.requirements import DeclaredTool, Requirements
from routing.core.table import ContractSpec, ModelSpec

INVOICE_SCHEMA = {"type": "object", "required": ["total"], "properties": {"total": {"type": "number"}}}


def model(name: str, *caps: str, **fields: object) -> ModelSpec:
    return ModelSpec(name=name, provider=name.split("/")[0], upstream=name.split("/")[-1],
                     capabilities=frozenset(caps or ("text",)), **fields)  # type: ignore[arg-type]


TEXT_ONLY = model("cheap/text", "text", input_price=0.1, output_price=0.2, context_window=32_000)
VISION = model("openai/gpt-4o-mini", "text", "image", "tools", "json_schema", input_price=0.15,
               output_price=0.6, context_window=128_000, model_class="general")
EXTRACTOR = model("acme/docx", "text", "image", "file", "json_schema", input_price=1.0, output_price=4.0,
                  context_window=200_000, model_class="document-extraction")
TOOLS_NO_IMAGES = model("mistral/small", "text", "tools", input_price=0.2, output_price=0.6,
                        context_window=32_000)
POOL = (TEXT_ONLY, VISION, EXTRACTOR, TOOLS_NO_IMAGES)


def names(models: tuple[ModelSpec, ...]) -> list[str]:
    return [m.name for m in models]


def test_it_never_falls_back_to_a_text_only_model_for_images() -> None:
    contract = effective_contract(Requirements(modalities=frozenset({"text", "image"})), None)
    eligible, rejected = filter_candidates(POOL, contract)
    assert names(eligible) == ["openai/gpt-4o-mini", "acme/docx"]
    assert dict(rejected) == {"cheap/text": "modality:image", "mistral/small": "modality:image"}


def test_it_never_falls_back_to_a_model_without_tools_for_a_tool_request() -> None:
    contract = effective_contract(Requirements(tools=(DeclaredTool("get_weather"),)), None)
    eligible, rejected = filter_candidates(POOL, contract)
    assert names(eligible) == ["openai/gpt-4o-mini", "mistral/small"]
    assert dict(rejected)["cheap/text"] == "tools"
    assert dict(rejected)["acme/docx"] == "tools"


def test_it_requires_schema_mode_for_structured_output() -> None:
    contract = effective_contract(Requirements(response_schema=INVOICE_SCHEMA, json_required=True), None)
    eligible, rejected = filter_candidates(POOL, contract)
    assert names(eligible) == ["openai/gpt-4o-mini", "acme/docx"]
    assert dict(rejected)["cheap/text"] == "json_schema"


def test_it_filters_on_context_window_with_room_for_the_output() -> None:
    contract = effective_contract(Requirements(estimated_input_tokens=30_000, max_output_tokens=4_000), None)
    eligible, rejected = filter_candidates(POOL, contract)
    assert "cheap/text" not in names(eligible)
    assert dict(rejected)["cheap/text"] == "context_window"
    fits = effective_contract(Requirements(estimated_input_tokens=30_000, max_output_tokens=2_000), None)
    assert "cheap/text" in names(filter_candidates(POOL, fits)[0])


def test_it_refuses_a_model_that_cannot_produce_the_requested_output() -> None:
    small_output = model("x/short", "text", max_output_tokens=4096)
    contract = effective_contract(Requirements(max_output_tokens=8192), None)
    assert filter_candidates([small_output], contract)[1] == (("x/short", "max_output"),)


def test_it_does_not_hold_unknown_limits_or_prices_against_a_model() -> None:
    local = model("local/llama", "text")  # no context window, no prices
    contract = EffectiveContract(required_input_tokens=10_000_000, max_cost_usd=0.0001)
    assert names(filter_candidates([local], contract)[0]) == ["local/llama"]


def test_it_applies_the_contract_class_cost_and_suppression() -> None:
    spec = ContractSpec(workload="invoice_extraction", modalities=frozenset({"text", "image"}),
                        max_input_tokens=50_000, structured_output_required=True, schema=INVOICE_SCHEMA,
                        strict=True, allowed_model_classes=frozenset({"document-extraction"}),
                        max_cost_usd=0.08, deadline_ms=8000)
    contract = effective_contract(Requirements(estimated_input_tokens=1_000), spec)
    eligible, rejected = filter_candidates(POOL, contract)
    assert names(eligible) == ["acme/docx"]  # 50k x $1/M + 1,024 x $4/M = $0.054 <= $0.08
    assert dict(rejected)["openai/gpt-4o-mini"] == "model_class"
    # The request already spent part of its budget on a failed attempt: the rest is too little.
    assert filter_candidates(POOL, contract, remaining_budget_usd=0.05)[1][-2:] == (
        ("acme/docx", "cost"), ("mistral/small", "model_class"))
    assert dict(filter_candidates(POOL, contract, suppressed={"acme/docx"})[1])["acme/docx"] == "suppressed"


def test_it_skips_disabled_models() -> None:
    off = model("x/off", "text", enabled=False)
    assert filter_candidates([off], EffectiveContract())[1] == (("x/off", "disabled"),)


def test_it_estimates_cost_from_input_and_expected_output() -> None:
    contract = EffectiveContract(required_input_tokens=10_000, max_output_tokens=2_000)
    assert estimate_cost_usd(VISION, contract) == pytest.approx((10_000 * 0.15 + 2_000 * 0.6) / 1e6)
    unbounded = EffectiveContract(required_input_tokens=10_000)
    assert estimate_cost_usd(VISION, unbounded) == pytest.approx(
        (10_000 * 0.15 + DEFAULT_EXPECTED_OUTPUT_TOKENS * 0.6) / 1e6)
    assert estimate_cost_usd(model("local/x"), contract) is None


def test_it_merges_the_request_and_its_contract() -> None:
    spec = ContractSpec(workload="invoice_extraction", version=3, modalities=frozenset({"text", "image"}),
                        max_input_tokens=50_000, requires_tools=True, schema=INVOICE_SCHEMA,
                        structured_output_required=True, allowed_model_classes=frozenset({"doc"}),
                        max_cost_usd=0.08, deadline_ms=8000, required_finish_reason="stop",
                        min_output_chars=10, validator="myapp.checks.invoice_total")
    request_schema = {"type": "object"}
    requirements = Requirements(modalities=frozenset({"text", "file"}), estimated_input_tokens=70_000,
                                response_schema=request_schema, json_required=True)
    contract = effective_contract(requirements, spec)
    assert contract.workload == "invoice_extraction"
    assert contract.version == 3
    assert contract.modalities == {"text", "image", "file"}
    assert contract.required_input_tokens == 70_000  # the larger of the estimate and the contract
    assert contract.needs_tools is True
    assert contract.schemas == (INVOICE_SCHEMA, request_schema)  # both must hold
    assert contract.refuse_truncation is True
    assert (contract.max_cost_usd, contract.deadline_ms, contract.required_finish_reason) == (0.08, 8000, "stop")
    assert (contract.min_output_chars, contract.validator) == (10, "myapp.checks.invoice_total")


def test_it_does_not_repeat_a_schema_both_sides_give() -> None:
    spec = ContractSpec(workload="w", schema=INVOICE_SCHEMA, structured_output_required=True)
    contract = effective_contract(Requirements(response_schema=dict(INVOICE_SCHEMA)), spec)
    assert contract.schemas == (INVOICE_SCHEMA,)


@pytest.mark.parametrize(
    ("requirements", "spec", "refuse"),
    [
        (Requirements(), None, False),  # a chat answer cut at the client's own max_tokens is what it asked for
        (Requirements(tools=(DeclaredTool("t"),)), None, False),  # tools merely offered
        (Requirements(tools=(DeclaredTool("t"),), tool_choice="required"), None, True),
        (Requirements(tools=(DeclaredTool("t"),), forced_tool="t", tool_choice="required"), None, True),
        (Requirements(json_required=True), None, True),
        (Requirements(response_schema={"type": "object"}, json_required=True), None, True),
        (Requirements(), ContractSpec(workload="w", requires_tools=True), True),
        (Requirements(), ContractSpec(workload="w", required_finish_reason="stop"), True),
        (Requirements(), ContractSpec(workload="w", structured_output_required=True), True),
        (Requirements(), ContractSpec(workload="w"), False),
    ],
)
def test_it_refuses_truncation_only_when_the_answer_must_be_complete(
    requirements: Requirements, spec: ContractSpec | None, refuse: bool
) -> None:
    assert effective_contract(requirements, spec).refuse_truncation is refuse


def test_it_ranks_fallbacks_by_health_then_latency_then_cost() -> None:
    a, b, c, d = (model(f"p/{n}", "text", input_price=p, output_price=p) for n, p in
                  [("a", 1.0), ("b", 0.5), ("c", 0.1), ("d", 0.1)])
    contract = EffectiveContract(required_input_tokens=1000)
    ranked = rank([a, b, c, d], contract, health={"p/a": 0.2}, latency_s={"p/b": 0.5, "p/c": 0.5, "p/d": 2.0})
    assert names(ranked) == ["p/c", "p/b", "p/d", "p/a"]
    # Without signals: cheapest first, declaration order breaking ties.
    assert names(rank([a, b, c, d], contract)) == ["p/c", "p/d", "p/b", "p/a"]


def test_it_makes_a_strict_schema_refuse_unlisted_properties_everywhere() -> None:
    schema = {
        "type": "object",
        "properties": {
            "total": {"type": "number"},
            "lines": {"type": "array", "items": {"type": "object", "properties": {"amount": {"type": "number"}}}},
            "meta": {"type": "object"},  # no properties listed: a free-form object stays free
            "tags": {"type": "object", "properties": {}, "additionalProperties": {"type": "string"}},
        },
        "$defs": {"party": {"type": "object", "properties": {"name": {"type": "string"}}}},
        "anyOf": [{"properties": {"total": {"minimum": 0}}}],
    }
    strict = strict_schema(schema)
    assert strict["additionalProperties"] is False
    assert strict["properties"]["lines"]["items"]["additionalProperties"] is False
    assert "additionalProperties" not in strict["properties"]["meta"]
    assert strict["properties"]["tags"]["additionalProperties"] == {"type": "string"}  # the schema's own word
    assert strict["$defs"]["party"]["additionalProperties"] is False
    assert strict["anyOf"][0]["additionalProperties"] is False
    assert "additionalProperties" not in schema  # the original is untouched


def test_it_applies_strict_mode_to_the_side_that_asked_for_it() -> None:
    loose = {"type": "object", "properties": {"a": {"type": "string"}}}
    spec = ContractSpec(workload="w", schema=loose, structured_output_required=True, strict=True)
    assert effective_contract(Requirements(), spec).schemas == (strict_schema(loose),)
    spec_loose = ContractSpec(workload="w", schema=loose, structured_output_required=True, strict=False)
    assert effective_contract(Requirements(), spec_loose).schemas == (loose,)
    request = Requirements(response_schema=loose, json_required=True, strict=True)
    assert effective_contract(request, None).schemas == (strict_schema(loose),)

"""Workload contracts: what a request needs, merged with its workload's contract, and the candidate filter.

A fallback is only a fallback if it can still meet the contract. So candidates are filtered on what the
request needs (modalities, context, tools, schema mode, model class, cost) before anything ranks them by
health, latency or price; a text-only model is never a fallback for a request with images or tools.

``Requirements`` come from the request body (``routing.core.requirements``); ``ContractSpec`` comes from the
routing table; ``EffectiveContract`` is both, and is what filtering, validation and the deadline read.
"""

from __future__ import annotations

import math
from collections.abc import Collection, Mapping, Sequence
from dataclasses import dataclass
from typing import Any

from routing.core.requirements import DeclaredTool, Requirements, ToolChoice
from routing.core.table import ContractSpec, ModelSpec

# Output tokens assumed for the cost estimate when the request sets no max_tokens.
DEFAULT_EXPECTED_OUTPUT_TOKENS = 1_024


@dataclass(frozen=True, slots=True)
class EffectiveContract:
    """The request's requirements and its workload contract, combined. Every field is already resolved."""

    workload: str | None = None
    version: int | None = None
    modalities: frozenset[str] = frozenset({"text"})
    required_input_tokens: int = 0  # max(estimate, contract.max_input_tokens)
    max_output_tokens: int | None = None
    needs_tools: bool = False
    tools: tuple[DeclaredTool, ...] = ()
    tool_choice: ToolChoice = "auto"
    forced_tool: str | None = None
    schemas: tuple[Mapping[str, Any], ...] = ()  # every original schema the answer must satisfy
    json_required: bool = False
    strict: bool = False
    allowed_model_classes: frozenset[str] = frozenset()
    max_cost_usd: float | None = None
    deadline_ms: int | None = None
    required_finish_reason: str | None = None
    min_output_chars: int | None = None
    refuse_truncation: bool = False
    validator: str = ""

    @property
    def needs_json_schema(self) -> bool:
        return bool(self.schemas)


def effective_contract(requirements: Requirements, contract: ContractSpec | None) -> EffectiveContract:
    """Combine a request's needs with its workload contract (None: the request's needs alone).

    Modalities are the union (an image workload keeps image-capable targets even for a text-only
    request, so its fallback set does not shift from request to request). The context needed is the
    larger of the estimate and the contract's ``max_input_tokens``. Both the contract's schema and the
    request's schema must hold, each made strict (``strict_schema``) when its side asked for strict mode.
    Truncation is refused when the answer must be complete to be usable: structured output, required tools
    or a required finish reason; a plain chat answer that stops at the client's own max_tokens is what the
    client asked for.
    """
    schemas: list[Mapping[str, Any]] = []
    if contract is not None and contract.schema is not None:
        schemas.append(strict_schema(contract.schema) if contract.strict else contract.schema)
    if requirements.response_schema is not None:
        schema = requirements.response_schema
        schema = strict_schema(schema) if requirements.strict else schema
        if schema not in schemas:
            schemas.append(schema)
    if contract is None:
        return EffectiveContract(
            modalities=requirements.modalities,
            required_input_tokens=requirements.estimated_input_tokens,
            max_output_tokens=requirements.max_output_tokens,
            needs_tools=requirements.needs_tools,
            tools=requirements.tools,
            tool_choice=requirements.tool_choice,
            forced_tool=requirements.forced_tool,
            schemas=tuple(schemas),
            json_required=requirements.json_required or bool(schemas),
            strict=requirements.strict,
            refuse_truncation=_needs_complete_output(requirements, schemas, None),
        )
    json_required = requirements.json_required or bool(schemas) or contract.structured_output_required
    return EffectiveContract(
        workload=contract.workload,
        version=contract.version,
        modalities=requirements.modalities | contract.modalities,
        required_input_tokens=max(requirements.estimated_input_tokens, contract.max_input_tokens or 0),
        max_output_tokens=requirements.max_output_tokens,
        needs_tools=requirements.needs_tools or contract.requires_tools,
        tools=requirements.tools,
        tool_choice=requirements.tool_choice,
        forced_tool=requirements.forced_tool,
        schemas=tuple(schemas),
        json_required=json_required,
        strict=requirements.strict or contract.strict,
        allowed_model_classes=contract.allowed_model_classes,
        max_cost_usd=contract.max_cost_usd,
        deadline_ms=contract.deadline_ms,
        required_finish_reason=contract.required_finish_reason,
        min_output_chars=contract.min_output_chars,
        refuse_truncation=json_required or _needs_complete_output(requirements, schemas, contract),
        validator=contract.validator,
    )


# Keywords whose value is one schema, a list of schemas, or a name -> schema map.
_SUBSCHEMA = ("additionalProperties", "items", "contains", "not", "if", "then", "else", "propertyNames")
_SUBSCHEMA_LISTS = ("allOf", "anyOf", "oneOf", "prefixItems")
_SUBSCHEMA_MAPS = ("properties", "patternProperties", "$defs", "definitions", "dependentSchemas")


def strict_schema(schema: Mapping[str, Any]) -> Mapping[str, Any]:
    """``schema`` with ``additionalProperties: false`` on every object schema that lists ``properties``
    and says nothing about others: strict mode's rule (OpenAI's and Anthropic's), so an answer with a
    property the schema does not name is refused. The original is not modified."""
    out: dict[str, Any] = {}
    for key, value in schema.items():
        if key in _SUBSCHEMA and isinstance(value, Mapping):
            out[key] = strict_schema(value)
        elif key in _SUBSCHEMA_LISTS and isinstance(value, list):
            out[key] = [strict_schema(v) if isinstance(v, Mapping) else v for v in value]
        elif key in _SUBSCHEMA_MAPS and isinstance(value, Mapping):
            out[key] = {k: strict_schema(v) if isinstance(v, Mapping) else v for k, v in value.items()}
        else:
            out[key] = value
    open_keys = ("additionalProperties", "unevaluatedProperties", "patternProperties")
    if "properties" in schema and not any(k in schema for k in open_keys):
        out["additionalProperties"] = False
    return out


def _needs_complete_output(
    requirements: Requirements, schemas: Sequence[Mapping[str, Any]], contract: ContractSpec | None
) -> bool:
    if schemas or requirements.json_required:
        return True
    if requirements.tool_choice == "required" or requirements.forced_tool is not None:
        return True
    return contract is not None and (contract.requires_tools or contract.required_finish_reason is not None)


# --------------------------------------------------------------------------------------------------------
# Filtering and ranking
# --------------------------------------------------------------------------------------------------------


def expected_output_tokens(contract: EffectiveContract) -> int:
    return contract.max_output_tokens if contract.max_output_tokens is not None else DEFAULT_EXPECTED_OUTPUT_TOKENS


def estimate_cost_usd(model: ModelSpec, contract: EffectiveContract) -> float | None:
    """Estimated input x input price + expected output x output price, in USD; None for an unpriced model."""
    if model.input_price is None and model.output_price is None:
        return None
    return (
        contract.required_input_tokens * (model.input_price or 0.0)
        + expected_output_tokens(contract) * (model.output_price or 0.0)
    ) / 1_000_000


def rejection_reason(
    model: ModelSpec,
    contract: EffectiveContract,
    *,
    cost_limit_usd: float | None = None,
    suppressed: Collection[str] = (),
) -> str | None:
    """Why ``model`` cannot serve ``contract`` (a bounded word, ``modality:<name>`` for a modality), or None.

    An unknown context window or an unpriced model is not held against a target: the operator did not
    say, and the provider will answer INCOMPATIBLE if the request does not fit.
    """
    if not model.enabled:
        return "disabled"
    if model.name in suppressed:
        return "suppressed"
    if contract.allowed_model_classes and model.model_class not in contract.allowed_model_classes:
        return "model_class"
    for modality in sorted(contract.modalities - model.capabilities):
        return f"modality:{modality}"
    if contract.needs_tools and "tools" not in model.capabilities:
        return "tools"
    if contract.needs_json_schema and "json_schema" not in model.capabilities:
        return "json_schema"
    if (
        contract.max_output_tokens is not None
        and model.max_output_tokens is not None
        and contract.max_output_tokens > model.max_output_tokens
    ):
        return "max_output"
    if model.context_window is not None:
        needed = contract.required_input_tokens + (contract.max_output_tokens or 0)
        if needed > model.context_window:
            return "context_window"
    if cost_limit_usd is not None:
        cost = estimate_cost_usd(model, contract)
        if cost is not None and cost > cost_limit_usd:
            return "cost"
    return None


def filter_candidates(
    models: Sequence[ModelSpec],
    contract: EffectiveContract,
    *,
    remaining_budget_usd: float | None = None,
    suppressed: Collection[str] = (),
) -> tuple[tuple[ModelSpec, ...], tuple[tuple[str, str], ...]]:
    """The models that can serve ``contract`` (order kept) and the rejected ones as ``(name, reason)``.

    The cost limit is the tighter of the contract's ``max_cost_usd`` and ``remaining_budget_usd`` (what
    the request may still spend after its earlier attempts). ``suppressed``: names the health model has
    taken out of rotation.
    """
    limits = [x for x in (contract.max_cost_usd, remaining_budget_usd) if x is not None]
    cost_limit = min(limits) if limits else None
    eligible: list[ModelSpec] = []
    rejected: list[tuple[str, str]] = []
    for model in models:
        reason = rejection_reason(model, contract, cost_limit_usd=cost_limit, suppressed=suppressed)
        if reason is None:
            eligible.append(model)
        else:
            rejected.append((model.name, reason))
    return tuple(eligible), tuple(rejected)


def rank(
    eligible: Sequence[ModelSpec],
    contract: EffectiveContract,
    *,
    health: Mapping[str, float] | None = None,
    latency_s: Mapping[str, float] | None = None,
) -> tuple[ModelSpec, ...]:
    """``eligible`` ordered for fallback: healthiest first, then fastest, then cheapest, then as declared.

    ``health`` maps a name to a score in [0, 1] (missing: 1, healthy); ``latency_s`` to the measured
    latency estimate (missing: ranked after every measured target). Used to order the remaining fallbacks;
    picking the primary is the selector's job.
    """
    health = health or {}
    latency_s = latency_s or {}

    def key(item: tuple[int, ModelSpec]) -> tuple[float, float, float, int]:
        index, model = item
        latency = latency_s.get(model.name)
        cost = estimate_cost_usd(model, contract)
        return (
            -health.get(model.name, 1.0),
            latency if latency is not None and math.isfinite(latency) else math.inf,
            cost if cost is not None else 0.0,
            index,
        )

    return tuple(model for _, model in sorted(enumerate(eligible), key=key))

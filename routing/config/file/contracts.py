"""The ``contracts`` section: parse and check it, apply it, dump it back, compile it into the RoutingTable.

A contract names a ``workload`` and what a request under it needs (modalities, tools, structured output, model
classes, cost, deadline) and what its answer must be (finish reason, length, a validator): docs/reliability.md.
Virtual models, tier and category routes name a contract of the file or one already configured.
"""

from __future__ import annotations

from collections.abc import Mapping
from typing import Any

from django.core.exceptions import ValidationError

from routing import models as m
from routing.config.file.checks import (
    _check_bool,
    _check_duplicates,
    _check_name,
    _check_number,
    _check_unknown_keys,
    _Checker,
    _entries,
    _num,
)
from routing.config.file.values import decimal_in, float_out
from routing.core.table import ContractSpec

SECTION = "contracts"


def parse_contracts(chk: _Checker, data: Mapping[str, Any]) -> list[dict[str, Any]]:
    """The section's contracts in canonical form; problems are added by path."""
    contracts = [_parse_contract(chk, path, entry) for path, entry in _entries(chk, data, SECTION)]
    _check_duplicates(chk, SECTION, [c["workload"] for c in contracts], "workload")
    return contracts


def contract_names(contracts: list[dict[str, Any]]) -> set[str]:
    """The workload of every contract once the file is applied: the file's and those configured."""
    return {c["workload"] for c in contracts if isinstance(c["workload"], str)} | set(
        m.Contract.objects.values_list("workload", flat=True))


def _parse_contract(chk: _Checker, path: str, entry: Mapping[str, Any]) -> dict[str, Any]:
    _check_unknown_keys(chk, path, entry, ("workload", "modalities", "max_input_tokens", "requires_tools",
                                           "structured_output", "allowed_model_classes", "max_cost_usd",
                                           "deadline_ms", "required_finish_reason", "min_output_chars",
                                           "validator"))
    _check_name(chk, f"{path}.workload", entry.get("workload"))
    out: dict[str, Any] = {"workload": entry.get("workload")}
    modalities = entry.get("modalities", ["text"])
    if not isinstance(modalities, list) or any(x not in m.MODALITIES for x in modalities):
        chk.add(f"{path}.modalities", f"expected a list of {', '.join(m.MODALITIES)}, got {modalities!r}")
    else:
        out["modalities"] = modalities
    for key, minimum in (("max_input_tokens", 1), ("deadline_ms", 100), ("min_output_chars", 0)):
        _check_number(chk, f"{path}.{key}", entry.get(key), minimum=minimum, integer=True)
        if entry.get(key) is not None:
            out[key] = entry[key]
    _check_bool(chk, f"{path}.requires_tools", entry.get("requires_tools"))
    if entry.get("requires_tools"):
        out["requires_tools"] = True
    structured = entry.get("structured_output")
    if structured is not None:
        if not isinstance(structured, dict):
            chk.add(f"{path}.structured_output", "expected {required, schema, strict}")
        else:
            _check_unknown_keys(chk, f"{path}.structured_output", structured, ("required", "schema", "strict"))
            _check_bool(chk, f"{path}.structured_output.required", structured.get("required"))
            _check_bool(chk, f"{path}.structured_output.strict", structured.get("strict"))
            schema = structured.get("schema")
            try:
                m.validate_json_schema(schema)
            except ValidationError as exc:
                chk.add(f"{path}.structured_output.schema", exc.messages[0])
            if structured.get("required") and not schema:
                chk.add(f"{path}.structured_output.schema", "structured output is required, so a schema is needed")
            so: dict[str, Any] = {"required": bool(structured.get("required"))}
            if schema:
                so["schema"] = schema
            if structured.get("strict"):
                so["strict"] = True
            out["structured_output"] = so
    classes = entry.get("allowed_model_classes")
    if classes is not None:
        if not isinstance(classes, list) or not all(isinstance(c, str) and c for c in classes):
            chk.add(f"{path}.allowed_model_classes", "expected a list of model class names")
        elif classes:
            out["allowed_model_classes"] = classes
    _check_number(chk, f"{path}.max_cost_usd", entry.get("max_cost_usd"))
    if entry.get("max_cost_usd") is not None:
        out["max_cost_usd"] = _num(entry["max_cost_usd"])
    reason = entry.get("required_finish_reason")
    if reason is not None:
        if reason not in m.FINISH_REASONS:
            chk.add(f"{path}.required_finish_reason", f"expected one of {', '.join(m.FINISH_REASONS)}")
        out["required_finish_reason"] = reason
    if entry.get("validator"):
        from routing.config.answer_checks import resolve_validator

        try:
            resolve_validator(str(entry["validator"]))
        except ValueError as exc:
            chk.add(f"{path}.validator", str(exc))
        out["validator"] = str(entry["validator"])
    return out


def apply_contracts(canonical: Mapping[str, Any], before: Mapping[str, Any]) -> None:
    """Create or update the file's contracts (unchanged ones are skipped)."""
    for entry in canonical.get(SECTION, []):
        if entry in before.get(SECTION, []):
            continue
        so = entry.get("structured_output", {})
        values = {
            "modalities": entry.get("modalities", []),
            "max_input_tokens": entry.get("max_input_tokens"),
            "requires_tools": entry.get("requires_tools", False),
            "structured_output_required": so.get("required", False),
            "schema": so.get("schema"),
            "strict": so.get("strict", False),
            "allowed_model_classes": entry.get("allowed_model_classes", []),
            "max_cost_usd": decimal_in(entry.get("max_cost_usd")),
            "deadline_ms": entry.get("deadline_ms"),
            "required_finish_reason": entry.get("required_finish_reason", ""),
            "min_output_chars": entry.get("min_output_chars"),
            "validator": entry.get("validator", ""),
        }
        m.Contract.objects.update_or_create(workload=entry["workload"], defaults=values)


def contract_rows() -> dict[str, m.Contract]:
    """The configured contracts by workload, for the sections that name one."""
    return {c.workload: c for c in m.Contract.objects.all()}


def prune_contracts(canonical: Mapping[str, Any]) -> None:
    m.Contract.objects.exclude(workload__in=[c["workload"] for c in canonical.get(SECTION, [])]).delete()


def contract_entries() -> list[dict[str, Any]]:
    """The configured contracts in canonical form, in the order they were created."""
    return [_contract_entry(c) for c in m.Contract.objects.order_by("id")]


def _contract_entry(contract: m.Contract) -> dict[str, Any]:
    entry: dict[str, Any] = {"workload": contract.workload}
    if contract.modalities:
        entry["modalities"] = list(contract.modalities)
    for key in ("max_input_tokens", "deadline_ms", "min_output_chars"):
        if getattr(contract, key) is not None:
            entry[key] = getattr(contract, key)
    if contract.requires_tools:
        entry["requires_tools"] = True
    if contract.schema or contract.structured_output_required or contract.strict:
        so: dict[str, Any] = {"required": contract.structured_output_required}
        if contract.schema:
            so["schema"] = contract.schema
        if contract.strict:
            so["strict"] = True
        entry["structured_output"] = so
    if contract.allowed_model_classes:
        entry["allowed_model_classes"] = list(contract.allowed_model_classes)
    if contract.max_cost_usd is not None:
        entry["max_cost_usd"] = float_out(contract.max_cost_usd)
    if contract.required_finish_reason:
        entry["required_finish_reason"] = contract.required_finish_reason
    if contract.validator:
        entry["validator"] = contract.validator
    return entry


def compile_contracts() -> list[ContractSpec]:
    return [
        ContractSpec(
            workload=row.workload,
            version=row.version,
            modalities=frozenset(row.modalities or ["text"]),
            max_input_tokens=row.max_input_tokens,
            requires_tools=row.requires_tools,
            structured_output_required=row.structured_output_required,
            schema=row.schema or None,
            strict=row.strict,
            allowed_model_classes=frozenset(row.allowed_model_classes or []),
            max_cost_usd=float_out(row.max_cost_usd),
            deadline_ms=row.deadline_ms,
            required_finish_reason=row.required_finish_reason or None,
            min_output_chars=row.min_output_chars,
            validator=row.validator,
        )
        for row in m.Contract.objects.all()
    ]

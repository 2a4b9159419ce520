"""Checking one ``contracts`` entry of the configuration file and giving its canonical form."""

from __future__ import annotations

from collections.abc import Mapping
from typing import Any

from django.core.exceptions import ValidationError

from routing import models as m
from routing.config.file.checks import _check_bool, _check_name, _check_number, _check_unknown_keys, _Checker, _num


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

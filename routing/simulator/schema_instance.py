"""Smallest plausible JSON values valid against a JSON schema, and values that break one on purpose.

The simulator answers tool calls and structured-output requests with these, so a gateway's validation
sees answers that pass (or, under the ``schema_violation`` fault, fail) exactly as a real model's would.
Covers what tool and response schemas use: ``type`` (also Gemini's upper-case names and type lists),
``properties``/``required``/``minProperties``, ``items``/``prefixItems``/``minItems``/``uniqueItems``,
``enum``, ``const``, ``$ref`` into ``$defs``/``definitions``, ``allOf``/``anyOf``/``oneOf``, string
``format``, ``minLength``/``maxLength``/``pattern`` (from a list of candidates), numeric bounds and
``multipleOf``.
"""

from __future__ import annotations

import math
import re
from collections.abc import Mapping
from typing import Any

_MAX_DEPTH = 24

_FORMAT_SAMPLES = {
    "date": "2024-01-01",
    "date-time": "2024-01-01T00:00:00Z",
    "time": "00:00:00Z",
    "email": "user@example.com",
    "idn-email": "user@example.com",
    "uri": "https://example.com",
    "url": "https://example.com",
    "iri": "https://example.com",
    "uri-reference": "https://example.com",
    "uuid": "00000000-0000-4000-8000-000000000000",
    "ipv4": "192.0.2.1",
    "ipv6": "2001:db8::1",
    "hostname": "example.com",
    "idn-hostname": "example.com",
    "duration": "P1D",
}
_PATTERN_CANDIDATES = (
    "example", "a", "A", "0", "1", "abc", "ABC", "123", "a1", "A1", "2024-01-01", "user@example.com",
    "https://example.com", "00000000-0000-4000-8000-000000000000", "+10000000000", "AB-123", "x_1", "",
)


def minimal_instance(schema: Any) -> Any:
    """A small value valid against ``schema``: required properties only, first enum values, lower bounds."""
    return _instance(schema, schema, 0)


def violating_instance(schema: Any) -> Any:
    """A value that breaks ``schema``: the minimal instance without its first required property.

    A schema that requires nothing gets a value of the wrong type instead (a list for an object schema,
    an object otherwise), so the answer still fails validation.
    """
    resolved = _resolve(schema, schema, 0)
    value = _instance(schema, schema, 0)
    required = _merged(resolved, schema, 0).get("required") if isinstance(resolved, Mapping) else None
    if isinstance(value, dict) and required:
        value.pop(required[0], None)
        return value
    return [] if isinstance(value, dict) else {"unexpected": True}


def _instance(schema: Any, root: Any, depth: int) -> Any:
    if schema is True or schema is None or not isinstance(schema, Mapping):
        return {}
    if depth > _MAX_DEPTH:
        return {}
    schema = _merged(_resolve(schema, root, depth), root, depth)
    if "const" in schema:
        return schema["const"]
    if schema.get("enum"):
        return schema["enum"][0]
    for combinator in ("anyOf", "oneOf"):
        options = schema.get(combinator)
        if options:
            rest = {k: v for k, v in schema.items() if k != combinator}
            return _instance({**rest, **_pick_option(options, root, depth)}, root, depth + 1)
    kind = _type_of(schema)
    if kind == "object":
        return _object(schema, root, depth)
    if kind == "array":
        return _array(schema, root, depth)
    if kind == "string":
        return _string(schema)
    if kind == "integer":
        return int(_number(schema, integer=True))
    if kind == "number":
        return _number(schema, integer=False)
    if kind == "boolean":
        return True
    if kind == "null":
        return None
    return "example"


def _resolve(schema: Any, root: Any, depth: int) -> Any:
    """Follow ``$ref`` pointers into the root document (local references only)."""
    while isinstance(schema, Mapping) and isinstance(schema.get("$ref"), str) and depth <= _MAX_DEPTH:
        ref = schema["$ref"]
        target: Any = root
        if ref != "#":
            if not ref.startswith("#/"):
                return {k: v for k, v in schema.items() if k != "$ref"}
            for part in ref[2:].split("/"):
                part = part.replace("~1", "/").replace("~0", "~")
                if not isinstance(target, Mapping) or part not in target:
                    return {k: v for k, v in schema.items() if k != "$ref"}
                target = target[part]
        siblings = {k: v for k, v in schema.items() if k != "$ref"}
        schema = {**target, **siblings} if isinstance(target, Mapping) else target
        depth += 1
    return schema


def _merged(schema: Any, root: Any, depth: int) -> Mapping[str, Any]:
    """``allOf`` folded into one schema: properties united, required lists joined."""
    if not isinstance(schema, Mapping):
        return {}
    parts = schema.get("allOf")
    if not parts:
        return schema
    merged: dict[str, Any] = {k: v for k, v in schema.items() if k != "allOf"}
    for part in parts:
        part = _merged(_resolve(part, root, depth + 1), root, depth + 1)
        for key, value in part.items():
            if key == "properties":
                merged["properties"] = {**merged.get("properties", {}), **value}
            elif key == "required":
                merged["required"] = list(dict.fromkeys([*merged.get("required", []), *value]))
            else:
                merged.setdefault(key, value)
    return merged


def _pick_option(options: list[Any], root: Any, depth: int) -> Mapping[str, Any]:
    """The first option that is not just ``null`` (a nullable field still gets a real value)."""
    for option in options:
        resolved = _resolve(option, root, depth + 1)
        if isinstance(resolved, Mapping) and _type_of(resolved) != "null":
            return resolved
    first = _resolve(options[0], root, depth + 1)
    return first if isinstance(first, Mapping) else {}


def _type_of(schema: Mapping[str, Any]) -> str | None:
    kind = schema.get("type")
    if isinstance(kind, list):
        non_null = [k for k in kind if str(k).lower() != "null"]
        kind = non_null[0] if non_null else "null"
    if isinstance(kind, str):
        return kind.lower()
    if "properties" in schema or "required" in schema or "additionalProperties" in schema:
        return "object"
    if "items" in schema or "prefixItems" in schema:
        return "array"
    return None


def _object(schema: Mapping[str, Any], root: Any, depth: int) -> dict[str, Any]:
    properties = schema.get("properties") or {}
    names = list(dict.fromkeys(schema.get("required") or []))
    minimum = schema.get("minProperties") or 0
    for name in properties:
        if len(names) >= minimum:
            break
        if name not in names:
            names.append(name)
    return {name: _instance(properties.get(name, {"type": "string"}), root, depth + 1) for name in names}


def _array(schema: Mapping[str, Any], root: Any, depth: int) -> list[Any]:
    prefix = schema.get("prefixItems") or []
    count = max(int(schema.get("minItems") or 0), 0)
    items = schema.get("items")
    if isinstance(items, list):  # draft-4 tuple form
        prefix, items = items, schema.get("additionalItems", {})
    values = [_instance(prefix[i] if i < len(prefix) else (items or {}), root, depth + 1) for i in range(count)]
    if schema.get("uniqueItems"):
        values = [_variant(value, index) for index, value in enumerate(values)]
    return values


def _variant(value: Any, index: int) -> Any:
    """A distinct value of the same type, so ``uniqueItems`` holds."""
    if index == 0:
        return value
    if isinstance(value, bool):
        return not value if index == 1 else value
    if isinstance(value, int | float):
        return value + index
    if isinstance(value, str):
        return f"{value}{index}"
    if isinstance(value, dict):
        return {**value, f"item_{index}": index}
    if isinstance(value, list):
        return [*value, index]
    return value


def _string(schema: Mapping[str, Any]) -> str:
    min_length = int(schema.get("minLength") or 0)
    max_length = schema.get("maxLength")
    pattern = schema.get("pattern")
    value = _FORMAT_SAMPLES.get(str(schema.get("format", "")).lower(), "example")
    if isinstance(pattern, str):
        try:
            compiled = re.compile(pattern)
        except re.error:
            compiled = None
        if compiled is not None:
            fits = [c for c in (value, *_PATTERN_CANDIDATES) if compiled.search(c)]
            sized = [c for c in fits if len(c) >= min_length and (max_length is None or len(c) <= max_length)]
            if sized or fits:
                return (sized or fits)[0]
    if len(value) < min_length:
        value = value + "x" * (min_length - len(value))
    if max_length is not None and len(value) > max_length:
        value = value[: int(max_length)]
    return value


def _number(schema: Mapping[str, Any], *, integer: bool) -> float:
    low, high = schema.get("minimum"), schema.get("maximum")
    exclusive_low, exclusive_high = schema.get("exclusiveMinimum"), schema.get("exclusiveMaximum")
    step = 1.0 if integer else 0.5
    if exclusive_low is True and low is not None:  # draft-4 boolean form
        low, exclusive_low = None, low
    if exclusive_high is True and high is not None:
        high, exclusive_high = None, high
    if isinstance(exclusive_low, int | float) and not isinstance(exclusive_low, bool):
        candidate = math.floor(exclusive_low) + 1 if integer else exclusive_low + step
        low = candidate if low is None else max(low, candidate)
    if isinstance(exclusive_high, int | float) and not isinstance(exclusive_high, bool):
        candidate = math.ceil(exclusive_high) - 1 if integer else exclusive_high - step
        high = candidate if high is None else min(high, candidate)
    if integer:
        low = math.ceil(low) if low is not None else None
        high = math.floor(high) if high is not None else None
    value: float = 0
    if low is not None and value < low:
        value = low
    if high is not None and value > high:
        value = high
    if low is not None and high is not None and high < low:  # contradictory bounds: keep the lower one
        value = low
    multiple = schema.get("multipleOf")
    if isinstance(multiple, int | float) and not isinstance(multiple, bool) and multiple > 0:
        value = math.ceil(value / multiple) * multiple
        if integer and not float(value).is_integer():
            value = math.ceil(value)
    return value

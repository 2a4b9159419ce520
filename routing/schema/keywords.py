"""jsonschema validator classes for untrusted schemas: patterns on RE2, and a work budget per validation.

A client writes the schema (``response_format``, tool parameters) and a model writes the instance, so
neither the size of the work nor its shape is ours to choose. Two things make it bounded:

* ``pattern``, ``patternProperties`` and ``additionalProperties`` match with RE2 (``routing.schema.patterns``),
  in time linear in the text; ``uniqueItems`` hashes the items instead of comparing every pair.
* A deterministic work budget: each subschema evaluation costs one step plus the keys and the entries of
  its keyword values it iterates, and the keywords that scan the instance (its items, its properties,
  the characters a pattern reads) cost that length too. Past ``budget`` steps the validation stops with
  ``ValidationTooCostly``. The budget counts work rather than time so that the same answer always gets
  the same verdict, however loaded the worker is; and it is a budget rather than a limit on the size of
  the answer because ``anyOf``, ``oneOf`` and ``$ref`` let a small schema cost exponential time on a small
  answer. A step is roughly a microsecond of CPU.

The budget is set per validation with ``metered`` (a context variable, so concurrent validations on other
threads each have their own); outside it nothing is counted.
"""

from __future__ import annotations

import contextlib
import contextvars
from collections.abc import Callable, Iterator, Mapping
from typing import Any

from jsonschema import validators
from jsonschema.exceptions import ValidationError
from jsonschema.protocols import Validator

from routing.schema import patterns as schema_patterns

Keyword = Callable[[Any, Any, Any, Mapping[str, Any]], Any]

PATTERN_CHARS_PER_STEP = 1024  # RE2 reads about a kilobyte per microsecond


class ValidationTooCostly(Exception):
    """The validation needed more steps than its budget allows."""


class _Budget:
    __slots__ = ("left", "limit")

    def __init__(self, limit: int) -> None:
        self.limit = limit
        self.left = limit

    def spend(self, steps: int) -> None:
        self.left -= steps
        if self.left < 0:
            raise ValidationTooCostly(f"checking this answer against the schema needs more than {self.limit} steps")


_budget: contextvars.ContextVar[_Budget | None] = contextvars.ContextVar("schema_budget", default=None)


@contextlib.contextmanager
def metered(limit: int) -> Iterator[None]:
    """Validations inside the block share ``limit`` steps, then raise ValidationTooCostly."""
    token = _budget.set(_Budget(limit))
    try:
        yield
    finally:
        _budget.reset(token)


def _spend(steps: int) -> None:
    budget = _budget.get()
    if budget is not None:
        budget.spend(steps)


def _length(value: Any) -> int:
    return len(value) if isinstance(value, dict | list | str) else 0


# -- keywords matched with RE2 ---------------------------------------------------------------------------------


def _pattern(validator: Any, pattern: str, instance: Any, schema: Mapping[str, Any]) -> Iterator[ValidationError]:
    if not validator.is_type(instance, "string"):
        return
    _spend(1 + len(instance) // PATTERN_CHARS_PER_STEP)
    try:
        matched = schema_patterns.search(pattern, instance)
    except schema_patterns.PatternError as exc:
        yield ValidationError(f"the pattern cannot be evaluated: {exc}")
        return
    if not matched:
        yield ValidationError(f"does not match {pattern!r}")  # the instance is model output: not quoted


def _keys_matching(patterns: Any, keys: Any) -> Iterator[tuple[str, str]]:
    """(pattern, key) for every key a pattern matches; each search is paid for by its length."""
    for pattern in patterns:
        for key in keys:
            _spend(1 + len(key) // PATTERN_CHARS_PER_STEP)
            if schema_patterns.search(pattern, key):
                yield pattern, key


def _pattern_properties(validator: Any, pattern_properties: Mapping[str, Any], instance: Any,
                        schema: Mapping[str, Any]) -> Iterator[ValidationError]:
    if not validator.is_type(instance, "object"):
        return
    try:
        for pattern, key in list(_keys_matching(pattern_properties, instance)):
            yield from validator.descend(instance[key], pattern_properties[pattern], path=key, schema_path=pattern)
    except schema_patterns.PatternError as exc:
        yield ValidationError(f"a patternProperties pattern cannot be evaluated: {exc}")


def _additional_properties(validator: Any, additional: Any, instance: Any,
                           schema: Mapping[str, Any]) -> Iterator[ValidationError]:
    if not validator.is_type(instance, "object"):
        return
    properties = schema.get("properties", {})
    try:
        matched = {key for _, key in _keys_matching(schema.get("patternProperties", {}), instance)}
    except schema_patterns.PatternError as exc:
        yield ValidationError(f"a patternProperties pattern cannot be evaluated: {exc}")
        return
    extras = [key for key in instance if key not in properties and key not in matched]
    if validator.is_type(additional, "object"):
        for extra in extras:
            yield from validator.descend(instance[extra], additional, path=extra)
    elif not additional and extras:
        yield ValidationError(f"additional properties are not allowed ({len(extras)} unexpected)")


# -- uniqueItems in linear time --------------------------------------------------------------------------------


def _unique_items(validator: Any, unique: Any, instance: Any, schema: Mapping[str, Any]) -> Iterator[ValidationError]:
    if not unique or not validator.is_type(instance, "array"):
        return
    seen: set[Any] = set()
    for item in instance:
        key = _comparable(item)
        if key in seen:
            yield ValidationError("has non-unique elements")
            return
        seen.add(key)


def _comparable(value: Any) -> Any:
    """A hashable stand-in equal for JSON-equal values: 1 and 1.0 are equal, true and 1 are not."""
    _spend(1 + _length(value))
    if isinstance(value, bool):
        return ("bool", value)
    if isinstance(value, int | float):
        return ("number", value)
    if isinstance(value, list):
        return ("array", tuple(_comparable(v) for v in value))
    if isinstance(value, dict):
        # Sorted pairs, not a frozenset: frozenset hashes of similar objects collide, and a set of them
        # degrades towards comparing every pair, which is what this replaces.
        return ("object", tuple(sorted((k, _comparable(v)) for k, v in value.items())))
    return ("value", value)


# -- the work budget for every other keyword -------------------------------------------------------------------


def _scanning(keyword: Keyword) -> Keyword:
    """``keyword``, first paying one step per item or property of the instance it walks."""

    def scan(validator: Any, value: Any, instance: Any, schema: Mapping[str, Any]) -> Any:
        _spend(1 + _length(instance) if not isinstance(instance, str) else 1)
        return keyword(validator, value, instance, schema)

    return scan


# Keywords that walk the instance's items or properties; the rest look at the instance once.
_SCANNING = ("items", "prefixItems", "additionalItems", "contains", "unevaluatedItems", "propertyNames",
             "unevaluatedProperties", "dependentRequired", "dependencies", "enum", "const")
_REPLACED: dict[str, Keyword] = {
    "pattern": _pattern,
    "patternProperties": _pattern_properties,
    "additionalProperties": _additional_properties,
    "uniqueItems": _unique_items,
}


def _metered_applicable(applicable: Callable[[Mapping[str, Any]], Any]) -> Callable[[Mapping[str, Any]], Any]:
    """The class's keyword lookup, first paying for the subschema it is about to evaluate."""

    def pay_then_apply(schema: Mapping[str, Any]) -> Any:
        steps = 1 + len(schema)
        for value in schema.values():
            if isinstance(value, dict | list):
                steps += len(value)
        _spend(steps)
        return applicable(schema)

    return pay_then_apply


_bounded_classes: dict[type, type[Validator]] = {}


def bounded(base: type[Validator]) -> type[Validator]:
    """The dialect of ``base`` (Draft 2020-12, Draft 7, ...) with RE2 patterns and the work budget."""
    cls = _bounded_classes.get(base)
    if cls is None:
        keywords = dict(base.VALIDATORS)
        for name in _SCANNING:
            if name in keywords:
                keywords[name] = _scanning(keywords[name])
        keywords.update({name: fn for name, fn in _REPLACED.items() if name in keywords})
        cls = validators.create(
            meta_schema=base.META_SCHEMA,
            validators=keywords,
            type_checker=base.TYPE_CHECKER,
            format_checker=base.FORMAT_CHECKER,
            # types-jsonschema's Validator leaves out ID_OF, which every validator class has, and the private
            # _APPLICABLE_VALIDATORS; and it types the latter for boolean schemas too, which jsonschema decides
            # before ever calling it.
            id_of=base.ID_OF,  # type: ignore[attr-defined]
            applicable_validators=_metered_applicable(base._APPLICABLE_VALIDATORS),  # type: ignore[attr-defined,arg-type]
        )
        _bounded_classes[base] = cls
    return cls

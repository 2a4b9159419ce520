"""The jsonschema-backed SchemaValidator: results, safe messages, dialects and the compiled-validator cache."""

from __future__ import annotations

import threading
from types import MappingProxyType
from typing import Any

import pytest

from routing.gateway.json_schema import SchemaCache, schema_key, schema_problems, validate_instance

INVOICE = {
    "type": "object",
    "required": ["total", "currency", "lines"],
    "properties": {
        "total": {"type": "number", "minimum": 0},
        "currency": {"enum": ["EUR", "USD"]},
        "lines": {"type": "array", "items": {"$ref": "#/$defs/line"}},
    },
    "$defs": {"line": {"type": "object", "required": ["amount"], "properties": {"amount": {"type": "number"}}}},
    "additionalProperties": False,
}


def test_it_accepts_a_valid_instance() -> None:
    assert validate_instance(INVOICE, {"total": 3, "currency": "EUR", "lines": [{"amount": 3}]}) == []


def test_it_reports_paths_and_keywords_without_instance_values() -> None:
    problems = validate_instance(
        INVOICE, {"total": -1, "currency": "private-word", "lines": [{"amount": "x"}], "leak": "secret"}
    )
    assert problems == [
        "/: additionalProperties not allowed",
        "/currency: enum [\"EUR\", \"USD\"]",
        "/lines/0/amount: type \"number\"",
        "/total: minimum 0",
    ]
    assert not any("private-word" in p or "secret" in p or "leak" in p for p in problems)


def test_it_caps_the_number_of_problems() -> None:
    schema = {"type": "object", "properties": {f"f{i}": {"type": "string"} for i in range(20)}}
    assert len(validate_instance(schema, {f"f{i}": i for i in range(20)})) == 5


def test_it_truncates_a_long_expectation() -> None:
    schema = {"enum": [f"value-{i}" for i in range(100)]}
    (problem,) = validate_instance(schema, "nope")
    assert problem.startswith("/: enum [") and problem.endswith("...")
    assert len(problem) < 100


def test_it_honours_the_schemas_own_dialect() -> None:
    draft7 = {"$schema": "http://json-schema.org/draft-07/schema#", "items": [{"type": "string"}],
              "additionalItems": False}
    assert validate_instance(draft7, ["a"]) == []
    assert validate_instance(draft7, ["a", "b"]) == ["/: additionalItems false"]


def test_it_treats_format_as_an_annotation() -> None:
    assert validate_instance({"type": "string", "format": "date"}, "2024-13-45") == []


def test_it_reports_an_invalid_schema_instead_of_raising() -> None:
    (problem,) = validate_instance({"type": "no-such-type"}, 1)
    assert problem.startswith("the schema itself is invalid")


def test_it_never_fetches_a_remote_reference() -> None:
    (problem,) = validate_instance({"$ref": "https://example.invalid/schema.json"}, 1)
    assert "unresolvable $ref" in problem


@pytest.mark.parametrize(
    ("schema", "ok"),
    [(INVOICE, True), (True, True), ({"type": "object", "required": "total"}, False),
     ({"minimum": "zero"}, False), ("a string", False), ([], False)],
)
def test_it_checks_a_clients_schema_up_front(schema: Any, ok: bool) -> None:
    assert (schema_problems(schema) == []) is ok


def test_it_reads_a_read_only_mapping_like_a_dict() -> None:
    frozen = MappingProxyType({"type": "object", "required": ["a"]})
    assert validate_instance(frozen, {}) == ['/: required ["a"]']


def test_it_compiles_each_schema_once_by_content() -> None:
    cache = SchemaCache(max_entries=8)
    first = cache.validator_for({"type": "object", "required": ["a"]})
    # A new dict with the same content, keys in another order, hits the cache.
    assert cache.validator_for({"required": ["a"], "type": "object"}) is first
    assert len(cache) == 1
    assert schema_key({"a": 1, "b": 2}) == schema_key({"b": 2, "a": 1})


def test_it_finds_a_long_lived_schema_by_identity() -> None:
    cache = SchemaCache(max_entries=8)
    schema = {"type": "integer"}
    compiled = cache.validator_for(schema)
    schema_copy_key = schema_key(schema)
    schema["type"] = "string"  # mutated in place: identity still finds the compiled original
    assert cache.validator_for(schema) is compiled
    assert schema_key(schema) != schema_copy_key


def test_it_bounds_the_cache() -> None:
    cache = SchemaCache(max_entries=4)
    for i in range(50):
        cache.validator_for({"type": "object", "required": [f"f{i}"]})
    assert len(cache) == 4


def test_it_is_safe_to_share_between_threads() -> None:
    cache = SchemaCache(max_entries=16)
    failures: list[BaseException] = []

    def work(n: int) -> None:
        try:
            for i in range(100):
                assert cache.validate({"type": "object", "required": [f"k{(n + i) % 40}"]}, {}) != []
        except BaseException as exc:  # collected, asserted in the main thread
            failures.append(exc)

    threads = [threading.Thread(target=work, args=(n,)) for n in range(8)]
    for thread in threads:
        thread.start()
    for thread in threads:
        thread.join()
    assert failures == []
    assert len(cache) <= 16

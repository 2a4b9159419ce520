"""The jsonschema-backed SchemaValidator: results, safe messages, dialects and the compiled-validator cache."""

from __future__ import annotations

import http.server
import json
import threading
from types import MappingProxyType
from typing import Any

import pytest

from routing.schema.engine import SchemaCache, schema_key, schema_problems, validate_instance

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
    assert problem.startswith("/: enum [")
    assert problem.endswith("...")
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
        except BaseException as exc:  # noqa: BLE001 - collected, asserted in the main thread
            failures.append(exc)

    threads = [threading.Thread(target=work, args=(n,)) for n in range(8)]
    for thread in threads:
        thread.start()
    for thread in threads:
        thread.join()
    assert failures == []
    assert len(cache) <= 16


# -- client patterns run on RE2, and every validation has a work budget ----------------------------------------


def test_it_answers_a_catastrophic_pattern_against_a_long_answer() -> None:
    schema = {"type": "string", "pattern": "^(a+)+$"}
    # Python's backtracking re would take longer than the age of the universe on the first one.
    assert validate_instance(schema, "a" * 50_000 + "b") == ['/: pattern "^(a+)+$"']
    assert validate_instance(schema, "a" * 50_000) == []


def test_it_matches_property_names_on_re2_too() -> None:
    schema = {"type": "object", "patternProperties": {"^(a+)+$": {"type": "integer"}}, "additionalProperties": False}
    assert validate_instance(schema, {"a" * 50_000 + "b": 1}) == ["/: additionalProperties not allowed"]
    assert validate_instance(schema, {"aaa": "x"}) == ['/aaa: type "integer"']
    assert validate_instance(schema, {"aaa": 1}) == []


@pytest.mark.parametrize(
    ("schema", "where"),
    [({"type": "object", "properties": {"code": {"type": "string", "pattern": "^(a)\\1$"}}},
      "/properties/code/pattern: RE2 cannot compile it (invalid escape sequence: \\1)"),
     ({"type": "string", "pattern": "^(?=.*[A-Z]).{8,}$"}, "/pattern: RE2 cannot compile it (invalid perl operator"),
     ({"type": "object", "patternProperties": {"^(?!x)": {}}}, "/patternProperties/^(?!x): RE2 cannot compile it"),
     ({"$defs": {"hidden": {"const": {"pattern": "(a)\\1"}}}, "$ref": "#/$defs/hidden/const"},
      "/$defs/hidden/const/pattern: RE2 cannot compile it")],
)
def test_it_refuses_a_pattern_re2_cannot_compile_naming_where_it_is(schema: dict[str, Any], where: str) -> None:
    (problem,) = schema_problems(schema)
    assert problem.startswith(where), problem
    assert "backreferences and lookaround are not supported" in problem
    assert validate_instance(schema, "anything")[0].startswith("the schema itself is invalid: " + where)


def test_it_takes_re2_syntax_and_ecma_unicode_escapes() -> None:
    assert schema_problems({"type": "string", "pattern": "^\\p{L}+$"}) == []  # Python's re refuses \p
    assert validate_instance({"type": "string", "pattern": "^\\p{L}+$"}, "café") == []
    assert validate_instance({"type": "string", "pattern": "^\\u0041\\u00e9$"}, "Aé") == []
    # An escaped backslash followed by "u0041" is that text, not an escape.
    assert validate_instance({"type": "string", "pattern": "^\\\\u0041$"}, "\\u0041") == []


@pytest.mark.parametrize(
    ("schema", "words"),
    [({"type": "object", "properties": {"x": {"$schema": "https://json-schema.org/draft/2020-12/schema",
                                              "pattern": "^(a+)+$"}}},
      "/properties/x/$schema: only the root of a schema may name its dialect"),
     ({"patternProperties": {"^a": {}}, "unevaluatedProperties": False},
      "unevaluatedProperties cannot be used in a schema that has patternProperties")],
)
def test_it_refuses_what_would_run_patterns_outside_re2(schema: dict[str, Any], words: str) -> None:
    (problem,) = schema_problems(schema)
    assert problem.startswith(words), problem


def test_it_stops_an_exponential_validation_at_its_budget() -> None:
    # Each level offers two branches that both fail at the bottom: 2^40 paths for a 40-deep answer.
    defs: dict[str, Any] = {"a0": {"type": "integer"}}
    for i in range(1, 40):
        branch = {"items": {"$ref": f"#/$defs/a{i - 1}"}}
        defs[f"a{i}"] = {"anyOf": [branch, dict(branch)]}
    answer: Any = "not an integer"
    for _ in range(39):
        answer = [answer]
    (problem,) = validate_instance({"$defs": defs, "$ref": "#/$defs/a39"}, answer)
    assert problem.startswith("/: validation stopped: checking this answer against the schema needs more than")


def test_it_stops_a_reference_loop_instead_of_raising() -> None:
    (problem,) = validate_instance({"$ref": "#"}, 1)
    assert problem == "/: validation stopped: the schema or the answer nests too deeply to check"


def test_it_checks_unique_items_by_json_equality() -> None:
    unique = {"type": "array", "uniqueItems": True}
    assert validate_instance(unique, [{"a": 1, "b": [1]}, {"b": [1.0], "a": 1.0}]) == ["/: uniqueItems true"]
    assert validate_instance(unique, [1, True, "1", None, 0, False]) == []
    assert validate_instance(unique, [{"k": i, "v": [i, str(i)]} for i in range(5_000)]) == []


def test_it_never_fetches_a_reference_from_a_server() -> None:
    requests: list[str] = []

    class Handler(http.server.BaseHTTPRequestHandler):
        def do_GET(self) -> None:
            requests.append(self.path)
            body = json.dumps({"type": "string"}).encode()
            self.send_response(200)
            self.send_header("Content-Type", "application/json")
            self.send_header("Content-Length", str(len(body)))
            self.end_headers()
            self.wfile.write(body)

        def log_message(self, format: str, *args: Any) -> None:
            pass

    with http.server.ThreadingHTTPServer(("127.0.0.1", 0), Handler) as server:
        threading.Thread(target=server.serve_forever, daemon=True).start()
        try:
            url = f"http://127.0.0.1:{server.server_address[1]}/schema.json"
            (problem,) = validate_instance({"$ref": url}, 1)
        finally:
            server.shutdown()
    assert "unresolvable $ref" in problem
    assert requests == []


def test_it_does_not_reach_the_dialects_meta_schemas_either() -> None:
    (problem,) = validate_instance({"$ref": "https://json-schema.org/draft/2020-12/schema"}, {"type": 1})
    assert "unresolvable $ref" in problem

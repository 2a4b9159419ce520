"""Minimal instances are valid against their schema; violating instances are not (checked with jsonschema)."""

from __future__ import annotations

from typing import Any

import jsonschema
import pytest

from routing.simulator.schema_instance import minimal_instance, violating_instance

SCHEMAS: list[tuple[str, dict[str, Any]]] = [
    ("empty object", {"type": "object"}),
    ("required scalars", {"type": "object", "required": ["s", "i", "n", "b", "z"], "properties": {
        "s": {"type": "string"}, "i": {"type": "integer"}, "n": {"type": "number"}, "b": {"type": "boolean"},
        "z": {"type": "null"}}}),
    ("enum and const", {"type": "object", "required": ["e", "c"], "properties": {
        "e": {"enum": ["low", "high"]}, "c": {"const": 42}}}),
    ("string bounds", {"type": "object", "required": ["short", "long"], "properties": {
        "short": {"type": "string", "maxLength": 3}, "long": {"type": "string", "minLength": 20}}}),
    ("formats", {"type": "object", "required": ["d", "t", "u", "m", "id"], "properties": {
        "d": {"type": "string", "format": "date"}, "t": {"type": "string", "format": "date-time"},
        "u": {"type": "string", "format": "uri"}, "m": {"type": "string", "format": "email"},
        "id": {"type": "string", "format": "uuid"}}}),
    ("patterns", {"type": "object", "required": ["digits", "code", "iso"], "properties": {
        "digits": {"type": "string", "pattern": "^[0-9]+$"}, "code": {"type": "string", "pattern": "^[A-Z]{2}-\\d{3}$"},
        "iso": {"type": "string", "pattern": "^\\d{4}-\\d{2}-\\d{2}$"}}}),
    ("numeric bounds", {"type": "object", "required": ["a", "b", "c", "d", "e"], "properties": {
        "a": {"type": "integer", "minimum": 5}, "b": {"type": "integer", "maximum": -3},
        "c": {"type": "number", "exclusiveMinimum": 0}, "d": {"type": "integer", "multipleOf": 7, "minimum": 10},
        "e": {"type": "number", "minimum": 0.5, "maximum": 0.75}}}),
    ("arrays", {"type": "object", "required": ["tags", "pair", "unique"], "properties": {
        "tags": {"type": "array", "items": {"type": "string"}, "minItems": 2},
        "pair": {"type": "array", "prefixItems": [{"type": "integer"}, {"type": "string"}], "minItems": 2},
        "unique": {"type": "array", "items": {"type": "integer"}, "minItems": 3, "uniqueItems": True}}}),
    ("nested objects", {"type": "object", "required": ["address"], "properties": {"address": {
        "type": "object", "required": ["city", "geo"], "additionalProperties": False,
        "properties": {"city": {"type": "string"}, "zip": {"type": "string"},
                       "geo": {"type": "object", "required": ["lat"], "properties": {"lat": {"type": "number"}}}}}}}),
    ("refs", {"type": "object", "required": ["item"], "properties": {"item": {"$ref": "#/$defs/item"}},
              "$defs": {"item": {"type": "object", "required": ["sku"], "properties": {"sku": {"type": "string"}}}}}),
    ("recursive refs", {"$ref": "#/definitions/node", "definitions": {"node": {
        "type": "object", "required": ["name", "children"], "properties": {
            "name": {"type": "string"}, "children": {"type": "array", "items": {"$ref": "#/definitions/node"}}}}}}),
    ("allOf", {"allOf": [{"type": "object", "required": ["a"], "properties": {"a": {"type": "string"}}},
                         {"required": ["b"], "properties": {"b": {"type": "integer", "minimum": 3}}}]}),
    ("anyOf with null first", {"type": "object", "required": ["v"], "properties": {
        "v": {"anyOf": [{"type": "null"}, {"type": "string", "minLength": 4}]}}}),
    ("oneOf", {"type": "object", "required": ["shape"], "properties": {"shape": {"oneOf": [
        {"type": "object", "required": ["radius"], "properties": {"radius": {"type": "number"}}},
        {"type": "object", "required": ["side"], "properties": {"side": {"type": "number"}}}]}}}),
    ("type lists", {"type": "object", "required": ["maybe"], "properties": {"maybe": {"type": ["null", "integer"]}}}),
    ("min properties", {"type": "object", "minProperties": 2, "properties": {"x": {"type": "string"},
                                                                           "y": {"type": "boolean"}}}),
    ("draft 4 exclusive bounds", {"$schema": "http://json-schema.org/draft-04/schema#", "type": "object",
                                  "required": ["p"], "properties": {
        "p": {"type": "integer", "minimum": 0, "exclusiveMinimum": True}}}),
    ("openai strict tool", {"type": "object", "additionalProperties": False, "required": ["query", "limit", "sort"],
                            "properties": {"query": {"type": "string"}, "limit": {"type": ["integer", "null"]},
                                           "sort": {"type": "string", "enum": ["asc", "desc"]}}}),
]


@pytest.mark.parametrize(("name", "schema"), SCHEMAS, ids=[name for name, _ in SCHEMAS])
def test_the_minimal_instance_is_valid(name: str, schema: dict[str, Any]) -> None:
    instance = minimal_instance(schema)

    validator = jsonschema.validators.validator_for(schema, default=jsonschema.Draft202012Validator)
    validator(schema, format_checker=jsonschema.FormatChecker()).validate(instance)


@pytest.mark.parametrize(("name", "schema"), SCHEMAS, ids=[name for name, _ in SCHEMAS])
def test_the_violating_instance_is_invalid(name: str, schema: dict[str, Any]) -> None:
    instance = violating_instance(schema)

    validator = jsonschema.validators.validator_for(schema, default=jsonschema.Draft202012Validator)
    assert not validator(schema).is_valid(instance)


def test_it_keeps_only_required_properties_and_the_first_enum_value() -> None:
    schema = {"type": "object", "required": ["unit"], "properties": {
        "unit": {"type": "string", "enum": ["celsius", "fahrenheit"]}, "note": {"type": "string"}}}

    assert minimal_instance(schema) == {"unit": "celsius"}
    assert violating_instance(schema) == {}


def test_it_reads_geminis_upper_case_types() -> None:
    schema = {"type": "OBJECT", "required": ["n", "items"], "properties": {
        "n": {"type": "INTEGER"}, "items": {"type": "ARRAY", "minItems": 1, "items": {"type": "STRING"}}}}

    assert minimal_instance(schema) == {"n": 0, "items": ["example"]}

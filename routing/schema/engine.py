"""JSON Schema checks for the validation pipeline, backed by ``jsonschema``, with compiled validators cached.

``validate_instance`` is the ``routing.core.validate.SchemaValidator`` the engine passes to
``validate_answer``; ``schema_problems`` checks a schema itself (a client's response_format or tool
parameters) before any upstream call, so a bad schema is the client's 400, not a failed answer.

The dialect is the schema's ``$schema`` (Draft 2020-12 when absent). ``format`` is an annotation, as the
2020-12 specification says by default: a model's "2024-13-45" for a ``date`` is not rejected here (add an
operator check for that). References resolve only inside the schema: nothing is fetched from the network,
and not even the dialects' meta-schemas are reachable (jsonschema's default registry would fetch a remote
``$ref`` with a blocking ``urlopen``). Patterns run on RE2 and each validation has a work budget
(``routing.schema.keywords``), because the schema is the client's and the instance the model's.
Problem messages name a JSON path and the schema keyword that failed, never a value from the instance,
because the instance is model output and the messages go to the audit log.
"""

from __future__ import annotations

import hashlib
import json
import threading
from collections import OrderedDict
from collections.abc import Mapping
from typing import Any

import referencing
import referencing.jsonschema
from jsonschema import validators
from jsonschema.exceptions import SchemaError, ValidationError
from jsonschema.protocols import Validator
from referencing.exceptions import Unresolvable

from routing.schema.keywords import ValidationTooCostly, bounded, metered
from routing.schema.patterns import pattern_problems

MAX_PROBLEMS = 5
# Steps one validation may take (routing.schema.keywords): a step is one to two microseconds here, so a few tenths
# of a second of CPU at most; a structured answer of 1,500 rows of ten fields needs about 170,000.
VALIDATION_BUDGET = 200_000


class UnusableSchema(ValueError):
    """A schema jsonschema accepts but the gateway will not evaluate (a pattern RE2 cannot compile, ...)."""


def _plain(value: Any) -> Any:
    """``value`` with every mapping a dict and every sequence a list (contract schemas may be read-only)."""
    if isinstance(value, Mapping):
        return {str(k): _plain(v) for k, v in value.items()}
    if isinstance(value, list | tuple):
        return [_plain(v) for v in value]
    return value


def schema_key(schema: Mapping[str, Any] | bool) -> str:
    """A stable identity for a schema's content: sha256 of its canonical JSON."""
    canonical = json.dumps(_plain(schema), sort_keys=True, separators=(",", ":"), ensure_ascii=False, default=str)
    return hashlib.sha256(canonical.encode("utf-8")).hexdigest()


class SchemaCache:
    """Compiled validators by schema, bounded LRU.

    Two levels: by object identity (a contract's schema is the same object on every request, so it costs
    a dict lookup) and by content hash (a client sends the same schema as a new dict every time). Safe to
    share between threads.
    """

    def __init__(self, max_entries: int = 256) -> None:
        self._max = max_entries
        self._by_key: OrderedDict[str, Validator] = OrderedDict()
        # id -> (the schema object itself, kept alive so its id cannot be reused, and its validator)
        self._by_id: OrderedDict[int, tuple[object, Validator]] = OrderedDict()
        self._lock = threading.Lock()

    def __len__(self) -> int:
        return len(self._by_key)

    def knows(self, schema: Mapping[str, Any] | bool) -> bool:
        """Whether ``schema`` (this object, or one with the same content) is already compiled."""
        with self._lock:
            hit = self._by_id.get(id(schema))
            if hit is not None and hit[0] is schema:
                return True
        key = schema_key(schema)
        with self._lock:
            return key in self._by_key

    def validator_for(self, schema: Mapping[str, Any] | bool) -> Validator:
        """The compiled validator for ``schema``; raises jsonschema's SchemaError for an invalid schema and
        UnusableSchema for one the gateway will not evaluate."""
        with self._lock:
            hit = self._by_id.get(id(schema))
            if hit is not None and hit[0] is schema:
                self._by_id.move_to_end(id(schema))
                return hit[1]
        key = schema_key(schema)
        with self._lock:
            compiled = self._by_key.get(key)
            if compiled is not None:
                self._by_key.move_to_end(key)
        if compiled is None:
            compiled = _compile(schema)
            with self._lock:
                self._by_key[key] = compiled
                while len(self._by_key) > self._max:
                    self._by_key.popitem(last=False)
        with self._lock:
            self._by_id[id(schema)] = (schema, compiled)
            while len(self._by_id) > self._max:
                self._by_id.popitem(last=False)
        return compiled

    def validate(self, schema: Mapping[str, Any], instance: Any) -> list[str]:
        """Problems with ``instance`` under ``schema`` (at most MAX_PROBLEMS), empty when it is valid."""
        try:
            validator = self.validator_for(schema)
            with metered(VALIDATION_BUDGET):
                errors = list(validator.iter_errors(instance))
        except SchemaError as exc:
            return [f"the schema itself is invalid: {_schema_error(exc)}"]
        except UnusableSchema as exc:
            return [f"the schema itself is invalid: {exc}"]
        except Unresolvable as exc:
            return [f"the schema has an unresolvable $ref: {str(exc)[:120]}"]
        except ValidationTooCostly as exc:
            return [f"/: validation stopped: {exc}"]
        except RecursionError:
            return ["/: validation stopped: the schema or the answer nests too deeply to check"]
        errors.sort(key=lambda e: [str(p) for p in e.absolute_path])
        return [_describe(error) for error in errors[:MAX_PROBLEMS]]


def _compile(schema: Mapping[str, Any] | bool) -> Validator:
    # jsonschema wants plain dicts all the way down (a contract's schema may be a read-only mapping).
    plain = _plain(schema)
    dialect = validators.validator_for(plain, default=validators.Draft202012Validator)
    problems = pattern_problems(plain)
    if problems:
        raise UnusableSchema(problems[0])
    # No format checks: the meta-schema's only one that matters, "regex", would compile patterns with
    # Python's re, refusing RE2 syntax (\p{L}) and accepting what RE2 cannot run; pattern_problems did it.
    # (types-jsonschema's Validator.check_schema leaves out the format_checker parameter jsonschema has.)
    dialect.check_schema(plain, format_checker=None)  # type: ignore[call-arg]
    # A resolver over this one document: no meta-schema, no network (jsonschema's default fetches remote refs).
    root = referencing.Resource.from_contents(plain, default_specification=referencing.jsonschema.DRAFT202012)
    # (_resolver is a private parameter of jsonschema's validator classes, which its stubs leave out.)
    return bounded(dialect)(plain, _resolver=referencing.Registry().resolver_with_root(root))  # type: ignore[call-arg]


def _pointer(path: Any) -> str:
    return "/" + "/".join(str(part) for part in path)


def _describe(error: ValidationError) -> str:
    where = _pointer(error.absolute_path)
    keyword = str(error.validator)
    expected: Any = error.validator_value
    if keyword == "required" and isinstance(error.instance, dict) and isinstance(expected, list):
        expected = [name for name in expected if name not in error.instance]
    elif keyword == "additionalProperties":
        return f"{where}: additionalProperties not allowed"
    shown = json.dumps(expected, ensure_ascii=False, default=str)
    if len(shown) > 80:
        shown = shown[:77] + "..."
    return f"{where}: {keyword} {shown}"


def _schema_error(exc: SchemaError) -> str:
    """Where in the client's schema the problem is, and what it is."""
    return f"{_pointer(exc.absolute_path)}: {exc.message[:120]}"


_default_cache = SchemaCache()


def validate_instance(schema: Mapping[str, Any], instance: Any) -> list[str]:
    """``routing.core.validate.SchemaValidator`` backed by the process-wide SchemaCache."""
    return _default_cache.validate(schema, instance)


def schema_is_compiled(schema: Any) -> bool:
    """Whether checking ``schema`` would be a cache hit (cheap: a hash of its content, no meta-schema check)."""
    return isinstance(schema, Mapping | bool) and _default_cache.knows(schema)


def schema_problems(schema: Any) -> list[str]:
    """Why ``schema`` is not a usable JSON Schema (empty when it is): check a client's schema up front."""
    if not isinstance(schema, Mapping | bool):
        return ["a JSON Schema must be an object or a boolean"]
    try:
        _default_cache.validator_for(schema)
    except SchemaError as exc:
        return [_schema_error(exc)]
    except UnusableSchema as exc:
        return [str(exc)]
    except RecursionError:
        return ["the schema nests too deeply to check"]
    return []

"""JSON Schema ``pattern``s on RE2, so a client's regular expression runs in time linear in the text.

A schema's ``pattern`` and ``patternProperties`` come from the client (``response_format``, tool
parameters) or from an operator (contracts). Python's ``re`` backtracks: ``"^(a+)+$"`` against a long
answer would hold the event loop, and every stream on it, for minutes. RE2 has no backtracking, and no
backreferences or lookaround either: a pattern that needs them is refused up front (``pattern_problems``)
with the place it sits in the schema, rather than run on another engine.

Patterns are ECMA-262 regular expressions; RE2's syntax covers the common part. ``\\uXXXX`` is rewritten to
RE2's ``\\x{XXXX}``; ``\\d`` and ``\\w`` are ASCII in both. Matching is a search, as the specification says
(anchor with ``^`` and ``$``).
"""

from __future__ import annotations

import functools
import re
from collections.abc import Iterator
from typing import Any

import re2

MAX_PROBLEMS = 5

_OPTIONS = re2.Options()
_OPTIONS.log_errors = False  # RE2 would print every refused pattern, as the client wrote it, to stderr
_OPTIONS.never_capture = True  # a yes/no search needs no groups, which keeps RE2 on its fastest engine

# An escaped backslash is consumed as a pair, so ``\\u0041`` (a backslash, then "u0041") stays as it is.
_ECMA_UNICODE_ESCAPE = re.compile(r"\\(?:\\|u([0-9A-Fa-f]{4}))")


class PatternError(ValueError):
    """A pattern RE2 cannot compile; the message says why, without repeating the pattern."""


@functools.lru_cache(maxsize=1024)
def compiled(pattern: str) -> Any:
    """The compiled RE2 program for a JSON Schema pattern; raises PatternError when RE2 cannot compile it."""
    try:
        return re2.compile(_rewrite_escapes(pattern), options=_OPTIONS)
    except re2.error as exc:
        reason = exc.args[0].decode("utf-8", "replace") if exc.args and isinstance(exc.args[0], bytes) else str(exc)
        raise PatternError(
            f"RE2 cannot compile it ({reason[:120]}); patterns are matched in linear time, so backreferences "
            "and lookaround are not supported"
        ) from None


def search(pattern: str, text: str) -> bool:
    """Whether ``pattern`` matches somewhere in ``text`` (JSON Schema's reading of ``pattern``)."""
    return compiled(pattern).search(text) is not None


def _rewrite_escapes(pattern: str) -> str:
    if "\\u" not in pattern:
        return pattern
    return _ECMA_UNICODE_ESCAPE.sub(lambda m: m.group(0) if m.group(1) is None else f"\\x{{{m.group(1)}}}", pattern)


def pattern_problems(schema: Any) -> list[str]:
    """Why the patterns of ``schema`` cannot be evaluated on RE2 (empty when they all can).

    Every object anywhere in the schema is looked at, not only those in a keyword's place, because a
    ``$ref`` may point anywhere in the document. Also refused: ``$schema`` below the root (a subschema in
    another dialect would be evaluated by jsonschema's stock classes, whose patterns run on Python's
    ``re``), and ``unevaluatedProperties`` in a schema with ``patternProperties`` (jsonschema evaluates
    those patterns with ``re`` internally).
    """
    problems: list[str] = []
    has_unevaluated = has_pattern_properties = False
    if type(schema) not in _CONTAINERS:
        return problems
    for node, place in _objects(schema):
        if place is not None and "$schema" in node:
            problems.append(f"{_pointer(place)}/$schema: only the root of a schema may name its dialect")
        text = node.get("pattern")
        if isinstance(text, str):
            problems.extend(f"{_pointer(place)}/pattern: {reason}" for reason in _compile_problem(text))
        keyed = node.get("patternProperties")
        if type(keyed) is dict:
            has_pattern_properties = True
            for key in keyed:
                problems.extend(f"{_pointer(place)}/patternProperties/{_escape(str(key))}: {reason}"
                                for reason in _compile_problem(str(key)))
        has_unevaluated = has_unevaluated or "unevaluatedProperties" in node
        if len(problems) >= MAX_PROBLEMS:
            break
    if has_unevaluated and has_pattern_properties and len(problems) < MAX_PROBLEMS:
        problems.append("unevaluatedProperties cannot be used in a schema that has patternProperties: "
                        "their patterns would not run on RE2")
    return problems[:MAX_PROBLEMS]


def _compile_problem(pattern: str) -> list[str]:
    try:
        compiled(pattern)
    except PatternError as exc:
        return [str(exc)]
    return []


# Where a container sits: (the place of its parent, its key or index), None at the root. Built as a chain of
# small tuples and turned into a JSON pointer only for a problem: most schemas have none.
Place = tuple[Any, str | int] | None


_CONTAINERS = (dict, list)


def _objects(schema: Any) -> Iterator[tuple[dict[str, Any], Place]]:
    """Every object in ``schema`` (plain JSON: dicts and lists) with its place, walked without recursion
    (schemas may be deep). ``type() in`` rather than ``isinstance``: this runs on request bodies' tool
    schemas, and an ABC check per value costs more than the rest of the walk."""
    stack: list[tuple[Any, Place]] = [(schema, None)]
    while stack:
        node, place = stack.pop()
        if type(node) is dict:
            yield node, place
            stack.extend((value, (place, key)) for key, value in node.items() if type(value) in _CONTAINERS)
        else:
            stack.extend((value, (place, i)) for i, value in enumerate(node) if type(value) in _CONTAINERS)


def _pointer(place: Place) -> str:
    parts: list[str] = []
    while place is not None:
        place, key = place
        parts.append(_escape(str(key)))
    return "".join(f"/{part}" for part in reversed(parts))


def _escape(token: str) -> str:
    return token.replace("~", "~0").replace("/", "~1")

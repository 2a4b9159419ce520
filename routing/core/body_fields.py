"""Readers of a request body's optional fields: tools, tool choice, structured output, reasoning, the
output-token limit, and text fields. Each accepts any JSON and returns a neutral value for what it cannot
read; ``routing.core.features`` calls them only when their keys are present.
"""

from __future__ import annotations

import dataclasses
from collections.abc import Mapping
from typing import Any

_REASONING_EFFORTS = frozenset({"medium", "high", "xhigh", "max"})
_THINKING_TYPES = frozenset({"enabled", "adaptive"})


@dataclasses.dataclass(frozen=True, slots=True)
class ToolSpec:
    """One declared tool: its name, kind and the JSON schema of its arguments (None when it has none)."""

    name: str
    kind: str  # "function", "custom", or an Anthropic server tool type such as "web_search_20250305"
    parameters: Mapping[str, Any] | None
    description: str = ""


def tools(entries: object) -> tuple[ToolSpec, ...]:
    if not isinstance(entries, list):
        return ()
    tools: list[ToolSpec] = []
    for entry in entries:
        if not isinstance(entry, dict):
            continue
        kind = entry.get("type") if isinstance(entry.get("type"), str) else "function"
        spec: dict[str, Any] = entry
        parameters: object = None
        if isinstance(entry.get("function"), dict):  # OpenAI {"type": "function", "function": {...}}
            spec = entry["function"]
            parameters = spec.get("parameters")
        elif isinstance(entry.get("custom"), dict):  # OpenAI custom (free-form) tool
            spec = entry["custom"]
        else:  # Anthropic {"name", "input_schema"} or legacy OpenAI functions {"name", "parameters"}
            parameters = entry.get("input_schema", entry.get("parameters"))
            if kind == "custom":
                kind = "function"
        tools.append(
            ToolSpec(
                name=text_field(spec.get("name")) or "",
                kind=str(kind),
                parameters=parameters if isinstance(parameters, dict) else None,
                description=text_field(spec.get("description")) or "",
            )
        )
    return tuple(tools)


def tool_choice(body: Mapping[str, Any]) -> tuple[str | None, str | None]:
    """(choice, forced tool name), normalised across shapes: Anthropic "any" is "required"."""
    choice = body.get("tool_choice", body.get("function_call"))
    if isinstance(choice, str):
        normal = {"auto": "auto", "none": "none", "required": "required", "any": "required"}.get(choice)
        return normal, None
    if not isinstance(choice, dict):
        return None, None
    kind = choice.get("type")
    if kind in ("auto", "none"):
        return str(kind), None
    if kind == "any":
        return "required", None
    if kind == "allowed_tools":
        allowed = choice.get("allowed_tools")
        mode = allowed.get("mode") if isinstance(allowed, dict) else None
        return ("required" if mode == "required" else "auto"), None
    for holder in (choice.get("function"), choice.get("custom"), choice):
        if isinstance(holder, dict) and isinstance(holder.get("name"), str):
            return "tool", holder["name"]
    return None, None


def structured_output(body: Mapping[str, Any]) -> tuple[str, Mapping[str, Any] | None, bool]:
    """(kind, schema, strict) from ``response_format`` (OpenAI), ``output_format`` or ``output_config``."""
    response_format = body.get("response_format")
    if isinstance(response_format, dict):
        kind = response_format.get("type")
        if kind == "json_object":
            return "json_object", None, False
        if kind == "json_schema":
            holder = response_format.get("json_schema")
            if not isinstance(holder, dict):
                return "json_schema", None, False
            schema = holder.get("schema")
            return "json_schema", schema if isinstance(schema, dict) else None, holder.get("strict") is True
    output_config = body.get("output_config")
    config_format = output_config.get("format") if isinstance(output_config, dict) else None
    for output_format in (body.get("output_format"), config_format):
        if isinstance(output_format, dict) and output_format.get("type") == "json_schema":
            schema = output_format.get("schema")
            # Anthropic constrains decoding to the schema, so its structured output is always strict.
            return "json_schema", schema if isinstance(schema, dict) else None, True
    return "", None, False


def reasoning(body: Mapping[str, Any]) -> str:
    """How the body asks for reasoning, "" if not; both shapes' fields are read (LiteLLM-style clients
    send ``thinking`` to OpenAI routes)."""
    effort = body.get("reasoning_effort")
    if isinstance(effort, str) and effort.lower() in _REASONING_EFFORTS:
        return f"reasoning_effort={effort.lower()}"
    reasoning = body.get("reasoning")
    if isinstance(reasoning, dict):
        effort = reasoning.get("effort")
        if isinstance(effort, str) and effort.lower() in _REASONING_EFFORTS:
            return f"reasoning.effort={effort.lower()}"
    thinking = body.get("thinking")
    if isinstance(thinking, dict):
        kind = thinking.get("type")
        if isinstance(kind, str) and kind.lower() in _THINKING_TYPES:
            return f"thinking={kind.lower()}"
    return ""


def max_output_tokens(body: Mapping[str, Any]) -> int | None:
    """OpenAI's ``max_completion_tokens`` wins over the older ``max_tokens`` (Anthropic's only field)."""
    newer = _int_field(body.get("max_completion_tokens"))
    return newer if newer is not None else _int_field(body.get("max_tokens"))


def text_field(value: object) -> str | None:
    """A non-empty string field (an integer id is taken as its decimal text), else None."""
    if isinstance(value, str):
        return value if value.strip() else None
    if isinstance(value, int) and not isinstance(value, bool):
        return str(value)
    return None


def _int_field(value: object) -> int | None:
    return value if isinstance(value, int) and not isinstance(value, bool) else None

"""Requirements: what one chat request needs from a target, read from its OpenAI or Anthropic body.

Modalities (text, image, audio, file), a rough input-token estimate, the requested max output, the tools
it declares with their argument schemas, the tool choice, and the structured-output schema. The candidate
filter and the validation pipeline both read these; nothing here looks at a provider.
"""

from __future__ import annotations

import json
import math
from collections.abc import Mapping
from dataclasses import dataclass
from typing import Any, Literal

from routing.core.features import Features

# Rough but cheap: about four characters per token for English text, and a flat charge per attachment
# (a 1-megapixel image is ~1,600 tokens on Anthropic, up to ~1,100 on OpenAI). An estimate that is too
# low costs one INCOMPATIBLE attempt; one that is too high would hide a model that could have answered.
CHARS_PER_TOKEN = 4
ATTACHMENT_TOKENS = 1_600

ToolChoice = Literal["auto", "none", "required"]


@dataclass(frozen=True, slots=True)
class DeclaredTool:
    """A tool the request offers the model. ``parameters`` is its argument schema (None: any object)."""

    name: str
    parameters: Mapping[str, Any] | None = None
    freeform: bool = False  # OpenAI custom tool: the arguments are plain text, not JSON


@dataclass(frozen=True, slots=True)
class Requirements:
    """What one request needs from a target, read from its body."""

    modalities: frozenset[str] = frozenset({"text"})
    estimated_input_tokens: int = 0
    max_output_tokens: int | None = None  # the request's max_tokens, if any
    tools: tuple[DeclaredTool, ...] = ()
    tool_choice: ToolChoice = "auto"
    forced_tool: str | None = None  # tool_choice names one tool
    response_schema: Mapping[str, Any] | None = None  # response_format json_schema / output_format
    json_required: bool = False  # json_object or json_schema response
    strict: bool = False

    @property
    def needs_tools(self) -> bool:
        return bool(self.tools)


_OPENAI_PART_MODALITY = {"image_url": "image", "input_audio": "audio", "file": "file", "input_image": "image"}
_ANTHROPIC_BLOCK_MODALITY = {"image": "image", "document": "file"}


def requirements_from_request(
    body: Mapping[str, Any], *, api: Literal["openai", "anthropic"]
) -> Requirements:
    """The Requirements of a chat request in OpenAI (``/v1/chat/completions``) or Anthropic
    (``/v1/messages``) shape. Unknown or malformed fields are ignored: rejecting a body is the parser's job.
    """
    scan = _Scan()
    if api == "anthropic":
        scan.content(body.get("system"), _ANTHROPIC_BLOCK_MODALITY)
        for message in _list(body.get("messages")):
            if isinstance(message, Mapping):
                scan.content(message.get("content"), _ANTHROPIC_BLOCK_MODALITY)
        tools = _anthropic_tools(body.get("tools"))
        choice, forced = _anthropic_tool_choice(body.get("tool_choice"))
        schema, json_required, strict = _anthropic_output(body)
        max_output = _positive_int(body.get("max_tokens"))
    else:
        for message in _list(body.get("messages")):
            if isinstance(message, Mapping):
                scan.content(message.get("content"), _OPENAI_PART_MODALITY)
                scan.chars += len(json.dumps(message.get("tool_calls"))) if message.get("tool_calls") else 0
        if "audio" in _list(body.get("modalities")):
            scan.modalities.add("audio")
        tools = _openai_tools(body.get("tools"), body.get("functions"))
        choice, forced = _openai_tool_choice(body.get("tool_choice", body.get("function_call")))
        schema, json_required, strict = _openai_response_format(body.get("response_format"))
        max_output = _positive_int(body.get("max_completion_tokens", body.get("max_tokens")))
    tool_chars = sum(len(t.name) + len(json.dumps(t.parameters or {})) for t in tools)
    estimate = math.ceil((scan.chars + tool_chars) / CHARS_PER_TOKEN) + scan.attachments * ATTACHMENT_TOKENS
    return Requirements(
        modalities=frozenset(scan.modalities),
        estimated_input_tokens=estimate,
        max_output_tokens=max_output,
        tools=tools,
        tool_choice=choice,
        forced_tool=forced,
        response_schema=schema,
        json_required=json_required,
        strict=strict,
    )


class _Scan:
    __slots__ = ("chars", "attachments", "modalities")

    def __init__(self) -> None:
        self.chars = 0
        self.attachments = 0
        self.modalities: set[str] = {"text"}

    def content(self, content: Any, modality_of: Mapping[str, str], depth: int = 0) -> None:
        if isinstance(content, str):
            self.chars += len(content)
            return
        if depth > 4:  # tool results nest content; a hostile body must not recurse forever
            return
        for part in _list(content):
            if not isinstance(part, Mapping):
                continue
            kind = part.get("type")
            text = part.get("text")
            if isinstance(text, str):
                self.chars += len(text)
            if isinstance(kind, str) and kind in modality_of:
                self.modalities.add(modality_of[kind])
                self.attachments += 1
            if kind == "tool_use":
                self.chars += len(json.dumps(part.get("input")))
            if "content" in part:  # Anthropic tool_result: text and images inside
                self.content(part.get("content"), modality_of, depth + 1)


def _list(value: Any) -> list[Any]:
    return value if isinstance(value, list) else []


def _positive_int(value: Any) -> int | None:
    return value if isinstance(value, int) and not isinstance(value, bool) and value > 0 else None


def _schema(value: Any) -> Mapping[str, Any] | None:
    return value if isinstance(value, Mapping) else None


def _openai_tools(tools: Any, functions: Any) -> tuple[DeclaredTool, ...]:
    declared: list[DeclaredTool] = []
    for tool in _list(tools):
        if not isinstance(tool, Mapping):
            continue
        if tool.get("type") == "custom" and isinstance(tool.get("custom"), Mapping):
            name = tool["custom"].get("name")
            if isinstance(name, str):
                declared.append(DeclaredTool(name, None, freeform=True))
            continue
        function = tool.get("function")
        if isinstance(function, Mapping) and isinstance(function.get("name"), str):
            declared.append(DeclaredTool(function["name"], _schema(function.get("parameters"))))
    for function in _list(functions):  # the legacy `functions` field
        if isinstance(function, Mapping) and isinstance(function.get("name"), str):
            declared.append(DeclaredTool(function["name"], _schema(function.get("parameters"))))
    return tuple(declared)


def _openai_tool_choice(choice: Any) -> tuple[ToolChoice, str | None]:
    if choice in ("none", "required"):
        return choice, None
    if isinstance(choice, Mapping):
        function = choice.get("function", choice.get("custom"))
        name = function.get("name") if isinstance(function, Mapping) else choice.get("name")
        if isinstance(name, str):
            return "required", name
    return "auto", None


def _openai_response_format(value: Any) -> tuple[Mapping[str, Any] | None, bool, bool]:
    if not isinstance(value, Mapping):
        return None, False, False
    if value.get("type") == "json_object":
        return None, True, False
    spec = value.get("json_schema")
    if value.get("type") == "json_schema" and isinstance(spec, Mapping):
        return _schema(spec.get("schema")), True, spec.get("strict") is True
    return None, False, False


def _anthropic_tools(tools: Any) -> tuple[DeclaredTool, ...]:
    declared: list[DeclaredTool] = []
    for tool in _list(tools):
        if isinstance(tool, Mapping) and isinstance(tool.get("name"), str):
            # Anthropic-defined tools (bash, text editor, ...) carry no input_schema: any object passes.
            declared.append(DeclaredTool(tool["name"], _schema(tool.get("input_schema"))))
    return tuple(declared)


def _anthropic_tool_choice(choice: Any) -> tuple[ToolChoice, str | None]:
    if not isinstance(choice, Mapping):
        return "auto", None
    kind = choice.get("type")
    if kind == "none":
        return "none", None
    if kind == "any":
        return "required", None
    if kind == "tool" and isinstance(choice.get("name"), str):
        return "required", choice["name"]
    return "auto", None


def _anthropic_output(body: Mapping[str, Any]) -> tuple[Mapping[str, Any] | None, bool, bool]:
    # GA: output_config.format; beta (structured-outputs-2025-11-13): output_format. Same inner shape.
    config = body.get("output_config")
    fmt = config.get("format") if isinstance(config, Mapping) else None
    if not isinstance(fmt, Mapping):
        fmt = body.get("output_format")
    if isinstance(fmt, Mapping) and fmt.get("type") == "json_schema":
        schema = _schema(fmt.get("schema"))
        return schema, True, schema is not None
    return None, False, False


def requirements_from_features(features: Features) -> Requirements:
    """The Requirements of a request from its already-extracted Features (the request path's way: the
    body is walked once, by ``extract_features``; ``requirements_from_request`` is the stand-alone form)."""
    if features.tool_choice == "tool":
        choice: ToolChoice = "required"
    elif features.tool_choice in ("none", "required"):
        choice = "none" if features.tool_choice == "none" else "required"
    else:
        choice = "auto"
    structured = features.structured_output
    return Requirements(
        modalities=features.modalities | {"text"},
        estimated_input_tokens=features.estimated_input_tokens,
        max_output_tokens=features.max_output_tokens,
        tools=tuple(
            DeclaredTool(tool.name, tool.parameters, freeform=tool.kind == "custom") for tool in features.tools
        ),
        tool_choice=choice,
        forced_tool=features.forced_tool,
        response_schema=features.output_schema if structured == "json_schema" else None,
        json_required=bool(structured),
        strict=features.output_schema_strict,
    )
